"""The contrastive branch's figures (thesis Ch. 4), from metrics.csv only, pooled over repeats as
in `contrastive_report.pool`: every point is the mean decision over the repeats (independent
trainings deciding the same records) with its 95 % interval clustered by record as the error bar;
each title gives the records behind its points, the suptitle the repeats.

`privacy_figure`: per dataset (row), task accuracy, membership inference accuracy and attribute
inference accuracy per target kind (supervised, contrastive, Talos at each λ > 0).
`talos_lambda_figure`: per dataset (row), the same three quantities against λ (λ = 0 is the
contrastive model), the supervised model as a horizontal reference with its band."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from privssl.attacks.contrastive_spec import ATTRIBUTE_ATTACK, MEMBERSHIP, MEMBERSHIP_TASK, NN_ATTACK  # noqa: E402
from privssl.reports.contrastive_report import pool  # noqa: E402
from privssl.reports.plotting import _span, fit_width  # noqa: E402

COLOURS = {"supervised": "tab:blue", "contrastive": "tab:orange", "talos": "tab:green"}
PANELS = ("task accuracy", "membership inference accuracy", "attribute inference accuracy")


def _title(dataset: str, quantity: str, n, unit: str) -> str:
    """'<dataset>: <quantity>' over the records behind its points: one n, or the range."""
    n = [int(v) for v in n if pd.notna(v)]
    if not n:
        return f"{dataset}: {quantity}\n(not measured)"
    low, high = min(n), max(n)
    return f"{dataset}: {quantity}\n(n = {low if low == high else f'{low}–{high}'} {unit} per point)"


def _kinds(stats: pd.DataFrame) -> list[tuple[str, str, float | None]]:
    """(label, target, λ) of every model kind of a dataset: supervised, contrastive, Talos by λ."""
    kinds = []
    if (stats.target == "supervised").any():
        kinds.append(("supervised", "supervised", None))
    if (stats.target == "contrastive").any():
        kinds.append(("contrastive\n(λ = 0)", "contrastive", 0.0))
    for lam in sorted(stats.loc[stats.target == "talos", "lambda"].unique()):
        kinds.append((f"Talos\nλ = {lam:g}", "talos", float(lam)))
    return kinds


def _of(stats: pd.DataFrame, target: str, lam: float | None) -> pd.DataFrame:
    return stats[(stats.target == target) & (stats["lambda"].isna() if lam is None else stats["lambda"] == lam)]


def _bar(ax, x, value, lo, hi, **style):
    """A point with its (asymmetric) 95 % interval as an error bar."""
    ax.errorbar([x], [value], yerr=[[value - lo], [hi - value]], capsize=3, ls="none", **style)


def _strongest_other(rows: pd.DataFrame) -> pd.Series | None:
    """The strongest membership attack other than NN (metric-based or label-only), by pooled accuracy."""
    others = rows[(rows.inference == MEMBERSHIP) & (rows.attack != NN_ATTACK)]
    return None if others.empty else others.sort_values(["accuracy", "attack"], ascending=[False, True]).iloc[0]


def _datasets(stats: pd.DataFrame) -> list[str]:
    datasets = list(dict.fromkeys(stats.dataset))
    if not datasets:
        raise ValueError("nothing to plot: no rows")
    return datasets


def _no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=8, color="dimgrey")


def _grid(stats: pd.DataFrame) -> tuple[plt.Figure, np.ndarray, list[str]]:
    """A row of three panels (task, membership, attribute) per dataset."""
    datasets = _datasets(stats)
    fig, axes = plt.subplots(len(datasets), 3, figsize=(15, 4.2 * len(datasets)), squeeze=False,
                             layout="constrained")
    return fig, axes, datasets


def privacy_figure(metrics: pd.DataFrame) -> plt.Figure:
    """Per dataset a row of three panels: task accuracy, membership inference accuracy (NN attack,
    and as a hollow square the strongest metric-based or label-only attack, named, on the task's
    model; a diamond: the NN attack on the membership task's model, where the run has one), attribute
    inference accuracy with the majority-class baseline (grey tick and bar); per model kind,
    pooled over repeats, 95 % intervals clustered by record as error bars."""
    stats = pool(metrics)
    fig, axes, datasets = _grid(stats)
    for row, dataset in enumerate(datasets):
        own = stats[stats.dataset == dataset]
        kinds = _kinds(own)
        task_ax, mia_ax, attr_ax = axes[row]
        n_task, n_mia, n_attr = [], [], []
        for x, (label, target, lam) in enumerate(kinds):
            rows, colour = _of(own, target, lam), COLOURS[target]
            model = rows.iloc[0]
            _bar(task_ax, x, model.task_accuracy, model.task_accuracy_lo, model.task_accuracy_hi, color=colour,
                 marker="o")
            n_task.append(model.n_test)
            nn = rows[(rows.attack == NN_ATTACK) & (rows.inference == MEMBERSHIP)]
            if not nn.empty:
                r = nn.iloc[0]
                _bar(mia_ax, x - 0.12, r.accuracy, r.accuracy_lo, r.accuracy_hi, color=colour, marker="o")
                n_mia.append(r.n)
            own_task = rows[(rows.attack == NN_ATTACK) & (rows.inference == MEMBERSHIP_TASK)]
            if not own_task.empty:  # the membership task's model (contrastive_report.py's membership claim)
                r = own_task.iloc[0]
                _bar(mia_ax, x, r.accuracy, r.accuracy_lo, r.accuracy_hi, color=colour, marker="D")
                n_mia.append(r.n)
            other = _strongest_other(rows)
            if other is not None:
                _bar(mia_ax, x + 0.12, other.accuracy, other.accuracy_lo, other.accuracy_hi, color=colour,
                     marker="s", mfc="white")
                mia_ax.annotate(other.attack.replace("_", " "), (x + 0.12, other.accuracy_hi), xytext=(0, 3),
                                textcoords="offset points", ha="center", va="bottom", fontsize=6, rotation=90)
                n_mia.append(other.n)
            attribute = rows[rows.attack == ATTRIBUTE_ATTACK]
            if not attribute.empty:
                r = attribute.iloc[0]
                _bar(attr_ax, x, r.accuracy, r.accuracy_lo, r.accuracy_hi, color=colour, marker="o")
                _bar(attr_ax, x + 0.2, r.baseline, r.baseline_lo, r.baseline_hi, color="grey", marker="_", ms=14)
                n_attr.append(r.n)
        labels = [k[0] for k in kinds]
        for ax in (task_ax, mia_ax, attr_ax):
            ax.set_xticks(range(len(kinds)), labels, fontsize=7)
            ax.set_xlim(-0.6, len(kinds) - 0.4)
        mia_ax.axhline(0.5, color="grey", ls="-.", lw=0.8, label="random guess", gid="chance")
        task_ax.set(ylabel="task accuracy (held-out test set)",
                    title=_title(dataset, "task accuracy", n_task, "test images"))
        mia_ax.set(ylabel="membership inference accuracy",
                   title=_title(dataset, "membership inference", n_mia, "records"))
        mia_ax.margins(y=0.3)  # room for the attack names above the bars
        attr_ax.set(ylabel="attribute inference accuracy",
                    title=_title(dataset, "attribute inference", n_attr, "records"))
        if not n_attr:
            _no_data(attr_ax, "no attribute inference on this dataset")
    key = [Line2D([], [], color=COLOURS[t], marker="o", ls="none", label=text)
           for t, text in (("supervised", "supervised"), ("contrastive", "contrastive (λ = 0)"),
                           ("talos", "Talos (λ > 0)"))]
    key += [Line2D([], [], color="black", marker="o", ls="none", label="NN attack / attribute MLP"),
            Line2D([], [], color="black", marker="D", ls="none", label="NN attack, the membership task's model"),
            Line2D([], [], color="black", marker="s", mfc="white", ls="none",
                   label="strongest metric / label-only membership attack (named)"),
            Line2D([], [], color="grey", marker="_", ms=14, ls="none", label="majority-class baseline"),
            Line2D([], [], color="grey", ls="-.", lw=0.8, label="random guess")]
    fig.legend(handles=key, loc="outside lower center", ncol=4, fontsize=8)
    fig.suptitle(f"Supervised vs contrastive vs Talos: every point over {_span(stats.repeats)} repeats; error bars: "
                 f"95 % CI, clustered by record (n records per point in each title)", fontsize=9)
    fit_width(fig)
    return fig


def _series(own: pd.DataFrame, attack: str | None) -> pd.DataFrame:
    """Contrastive (λ = 0) and Talos rows by λ: of `attack`, or one row per model (task accuracy)."""
    rows = own[own.target.isin(["contrastive", "talos"])]
    rows = rows.drop_duplicates(["lambda"]) if attack is None else rows[rows.attack == attack]
    return rows.sort_values("lambda")


def _curve(ax, x, value, lo, hi, colour: str, label: str) -> None:
    x, value, lo, hi = (np.asarray(v, float) for v in (x, value, lo, hi))
    ax.errorbar(x, value, yerr=[value - lo, hi - value], color=colour, marker="o", capsize=3, label=label)
    ax.fill_between(x, lo, hi, color=colour, alpha=0.15)
    if (x == 0).any():  # the contrastive model, in its own colour
        ax.plot(x[x == 0], value[x == 0], ls="none", marker="o", color=COLOURS["contrastive"], zorder=3,
                label="contrastive (λ = 0)")


def _reference(ax, row: pd.Series | None, value: str, label: str) -> None:
    """The supervised model as a horizontal line with its 95 % band."""
    if row is None:
        return
    v, lo, hi = row[value], row[f"{value}_lo"], row[f"{value}_hi"]
    ax.axhline(v, color=COLOURS["supervised"], ls="--", lw=1, label=label, gid="supervised")
    ax.axhspan(lo, hi, color=COLOURS["supervised"], alpha=0.12)


def _figure_legend(fig: plt.Figure) -> None:
    """One legend below the panels: each label once (the panels share their meaning)."""
    entries: dict[str, object] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if entries:
        fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncol=len(entries), fontsize=8)


def talos_lambda_figure(metrics: pd.DataFrame) -> plt.Figure:
    """Per dataset a row of three panels against the adversarial factor λ (λ = 0: the contrastive
    model): task accuracy, NN membership inference accuracy, attribute inference accuracy with the
    majority baseline; pooled over repeats, 95 % intervals clustered by record as bars and bands;
    the supervised model as a dashed horizontal line with its band."""
    stats = pool(metrics)
    fig, axes, datasets = _grid(stats)
    for row, dataset in enumerate(datasets):
        own = stats[stats.dataset == dataset]
        supervised = _of(own, "supervised", None)
        task_ax, mia_ax, attr_ax = axes[row]
        task = _series(own, None)
        if not task.empty:
            _curve(task_ax, task["lambda"], task.task_accuracy, task.task_accuracy_lo, task.task_accuracy_hi,
                   COLOURS["talos"], "Talos (λ > 0)")
        _reference(task_ax, None if supervised.empty else supervised.iloc[0], "task_accuracy", "supervised (band: 95 % CI)")
        mia = _series(own, NN_ATTACK)
        if not mia.empty:
            _curve(mia_ax, mia["lambda"], mia.accuracy, mia.accuracy_lo, mia.accuracy_hi, COLOURS["talos"],
                   "Talos (λ > 0)")
        nn = supervised[supervised.attack == NN_ATTACK]
        _reference(mia_ax, None if nn.empty else nn.iloc[0], "accuracy", "supervised (band: 95 % CI)")
        mia_ax.axhline(0.5, color="grey", ls="-.", lw=0.8, label="random guess", gid="chance")
        attribute = _series(own, ATTRIBUTE_ATTACK)
        if not attribute.empty:
            _curve(attr_ax, attribute["lambda"], attribute.accuracy, attribute.accuracy_lo, attribute.accuracy_hi,
                   COLOURS["talos"], "Talos (λ > 0)")
            x = attribute["lambda"].to_numpy(float)
            attr_ax.plot(x, attribute.baseline, color="grey", ls=":", marker="_", label="majority-class baseline")
            attr_ax.fill_between(x, attribute.baseline_lo, attribute.baseline_hi, color="grey", alpha=0.15)
        sup_attr = supervised[supervised.attack == ATTRIBUTE_ATTACK]
        _reference(attr_ax, None if sup_attr.empty else sup_attr.iloc[0], "accuracy", "supervised (band: 95 % CI)")
        if attribute.empty and sup_attr.empty:
            _no_data(attr_ax, "no attribute inference on this dataset")
        task_ax.set(ylabel="task accuracy (held-out test set)",
                    title=_title(dataset, "task accuracy", task.n_test, "test images"))
        mia_ax.set(ylabel="NN membership inference accuracy",
                   title=_title(dataset, "membership inference, NN attack", mia.n, "records"))
        attr_ax.set(ylabel="attribute inference accuracy",
                    title=_title(dataset, "attribute inference", attribute.n, "records"))
        positive = own.loc[own.target == "talos", "lambda"]
        for ax in (task_ax, mia_ax, attr_ax):
            ax.set_xlabel("adversarial factor λ (0: the contrastive model)")
            if not positive.empty and positive.max() / positive.min() > 20:  # a grid over decades
                ax.set_xscale("symlog", linthresh=float(positive.min()))
    _figure_legend(fig)
    fig.suptitle(f"Talos against λ: every point over {_span(stats.repeats)} repeats; bars and bands: 95 % CI, "
                 f"clustered by record (n records per point in each title)", fontsize=9)
    fit_width(fig)
    return fig
