"""The semi-supervised branch's figures (thesis Ch. 3), from metrics.csv only. Every error bar or
band is a 95 % interval: AUC and JS distance by the attack rule's bootstrap, accuracies
Clopper–Pearson, the over-fitting Newcombe's hybrid score interval (`semileak_report.models`).

`attacks_figure` (Fig. 3.3): the AUC of every attack at the last step, per member kind and algorithm.
`steps_figure` (Fig. 3.4): over-fitting, JS distance (entropy) and A_DA's AUC against the step.
`ablations_figure` (Figs. 3.5-3.6, Table 3.4): A_DA's AUC against the views and per similarity, and
the defences as test accuracy against A_DA's AUC."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from privssl.attacks.semi_leak_spec import DA_ATTACK  # noqa: E402
from privssl.reports.contrastive_plots import _no_data  # noqa: E402
from privssl.reports.plotting import fit_width  # noqa: E402
from privssl.reports.semileak_report import (  # noqa: E402
    ATTACK_LABELS,
    BASELINES,
    ada,
    algorithms,
    check_metrics,
    last_step,
    models,
    of,
)
from privssl.training.semi_supervised_spec import DPSGD_TARGET, MEMBER_KINDS, SIMILARITIES  # noqa: E402

COLOURS = {"fixmatch": "tab:blue", "flexmatch": "tab:orange", "uda": "tab:green", DPSGD_TARGET: "tab:red"}
KIND_COLOURS = {"all": "black", "labelled": "tab:purple", "unlabelled": "tab:cyan"}
ATTACK_ORDER = (*BASELINES, DA_ATTACK)
DEFENCE_MARKERS = {"none (last step)": "o", "early stopping": "s", "top-1 answer": "^", "DP-SGD (FixMatch)": "D"}


def first_training(metrics: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows of the first training (the lowest repeat) and, where there are several, the line a
    figure's title says so with: a figure of one training's points keeps each its own interval;
    the claims table pools the trainings."""
    check_metrics(metrics)
    first = metrics[metrics.repeat == metrics.repeat.min()]
    trainings = metrics.repeat.nunique()
    return first, ("" if trainings == 1 else
                   f"\ntraining {int(first.repeat.iloc[0])} of {trainings} (the claims table pools them)")


def _datasets(metrics: pd.DataFrame) -> list[str]:
    check_metrics(metrics)
    datasets = list(dict.fromkeys(metrics.dataset))
    if not any(algorithms(metrics[metrics.dataset == d]) for d in datasets):
        raise ValueError("nothing to plot: no FixMatch, FlexMatch or UDA rows")
    return datasets


def _grid(rows: int, columns: int, width: float = 4.4, height: float = 3.3):
    return plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False, layout="constrained")


def _errorbar(ax, x, value, lo, hi, **style) -> None:
    """Points with their (asymmetric) 95 % intervals as error bars."""
    x, value, lo, hi = (np.atleast_1d(np.asarray(v, float)) for v in (x, value, lo, hi))
    ax.errorbar(x, value, yerr=[np.maximum(value - lo, 0), np.maximum(hi - value, 0)], capsize=3, **style)


def _curve(ax, frame: pd.DataFrame, column: str, colour: str, label: str, marker: str = "o") -> None:
    """A quantity against the step: the line, its interval as error bars and a band."""
    frame = frame.sort_values("step")
    _errorbar(ax, frame.step, frame[column], frame[f"{column}_lo"], frame[f"{column}_hi"], color=colour,
              marker=marker, label=label)
    ax.fill_between(frame.step.to_numpy(float), frame[f"{column}_lo"], frame[f"{column}_hi"], color=colour, alpha=0.12)


def _legend(fig: plt.Figure, columns: int = 4) -> None:
    """One legend below the panels, each label once (the panels share their meaning)."""
    entries: dict[str, object] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncol=columns, fontsize=8)


def _chance(ax) -> None:
    ax.axhline(0.5, color="grey", ls="--", lw=0.9, label="AUC 0.5 (chance)", gid="chance")


def _members(rows: pd.DataFrame) -> str:
    """'n = a members / b non-members' over the rows (one value or the range)."""
    def span(values):
        values = sorted({int(v) for v in values if pd.notna(v)})
        return "?" if not values else str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"
    return f"n = {span(rows.n_members)} members / {span(rows.n_nonmembers)} non-members"


def attacks_figure(metrics: pd.DataFrame) -> plt.Figure:
    """Fig. 3.3: per dataset, rows = member kinds (all, labelled, unlabelled), columns = algorithms;
    the AUC of A_NN, the four metric attacks and A_DA (default views and similarity) at the last
    step without defence, each a bar from 0.5 (chance) to its AUC with its 95 % interval."""
    metrics, which = first_training(metrics)
    datasets = _datasets(metrics)
    width = max(len(algorithms(metrics[metrics.dataset == d])) for d in datasets)
    fig, axes = _grid(len(MEMBER_KINDS) * len(datasets), width)
    for d, dataset in enumerate(datasets):
        own = metrics[metrics.dataset == dataset]
        present = algorithms(own)
        for col, algorithm in enumerate(present):
            final = last_step(of(own, algorithm, defence="none"))
            final = final[final.is_default.astype(bool)]
            for r, kind in enumerate(MEMBER_KINDS):
                ax = axes[len(MEMBER_KINDS) * d + r, col]
                rows = final[final.member_kind == kind].set_index("attack")
                attacks = [a for a in ATTACK_ORDER if a in rows.index]
                if not attacks:
                    _no_data(ax, f"no {kind}-member rows")
                    continue
                rows = rows.loc[attacks]
                colours = ["tab:red" if a == DA_ATTACK else "tab:blue" for a in attacks]
                ax.bar(range(len(attacks)), rows.auc - 0.5, bottom=0.5, color=colours, alpha=0.6)
                _errorbar(ax, range(len(attacks)), rows.auc, rows.auc_lo, rows.auc_hi, color="black", ls="none",
                          marker="_")
                _chance(ax)
                ax.set_xticks(range(len(attacks)), [ATTACK_LABELS.get(a, a) for a in attacks], fontsize=8)
                ax.set(ylabel="membership AUC", title=f"{dataset}, {algorithm}, step {int(rows.step.iloc[0])}: "
                       f"{kind} members\n({_members(rows)})")
                ax.title.set_fontsize(8)
        for col in range(len(present), width):
            for r in range(len(MEMBER_KINDS)):
                axes[len(MEMBER_KINDS) * d + r, col].axis("off")
    fig.suptitle("Membership AUC per attack at the last step, no defence\n(bars from 0.5; error bars: 95 % bootstrap "
                 "intervals;\nred: A_DA at its default views and similarity)" + which, fontsize=9)
    fit_width(fig)
    return fig


def steps_figure(metrics: pd.DataFrame, early_stopping: int | None) -> plt.Figure:
    """Fig. 3.4: per dataset, columns = algorithms; against the checkpoint step (no defence): the
    train and test accuracy and the over-fitting (train − test, Newcombe interval; grey band: the
    report's ±0.05 tolerance), the JS distance of the members' and non-members' prediction
    entropies, and A_DA's AUC for all, labelled and unlabelled members. Dotted: early stopping."""
    metrics, which = first_training(metrics)
    datasets = _datasets(metrics)
    width = max(len(algorithms(metrics[metrics.dataset == d])) for d in datasets)
    fig, axes = _grid(3 * len(datasets), width)
    for d, dataset in enumerate(datasets):
        own = metrics[metrics.dataset == dataset]
        model_rows = models(own)
        present = algorithms(own)
        for col, algorithm in enumerate(present):
            fit_ax, js_ax, auc_ax = axes[3 * d:3 * d + 3, col]
            model = of(model_rows, algorithm, defence="none")
            _curve(fit_ax, model, "train_accuracy", "tab:blue", "train accuracy")
            _curve(fit_ax, model, "test_accuracy", "tab:orange", "test accuracy")
            _curve(fit_ax, model, "overfitting", "black", "over-fitting (train − test)", marker="s")
            for bound in (-0.05, 0.05):
                fit_ax.axhline(bound, color="tab:red", ls="--", lw=0.8, label="±0.05 (over-fitting tolerance)")
            _curve(js_ax, model, "js_entropy", "tab:brown", "JS distance (entropy)")
            attack = ada(of(own, algorithm, defence="none"))
            for kind in MEMBER_KINDS:
                _curve(auc_ax, attack[attack.member_kind == kind], "auc", KIND_COLOURS[kind], f"A_DA, {kind} members")
            _chance(auc_ax)
            n_test = int(model.n_test.max()) if not model.empty else 0
            fit_ax.set(ylabel="accuracy / over-fitting", title=f"{dataset}, {algorithm}: accuracy and over-fitting\n"
                       f"(n = {int(model.n_train.max()) if not model.empty else 0} train / {n_test} test images)")
            js_ax.set(ylabel="JS distance (entropy)", title=f"{dataset}, {algorithm}: JS distance (entropy)")
            auc_ax.set(ylabel="A_DA AUC", xlabel="training step",
                       title=f"{dataset}, {algorithm}: A_DA AUC\n({_members(attack[attack.member_kind == 'all'])})")
            for ax in (fit_ax, js_ax, auc_ax):
                ax.title.set_fontsize(8)
                ax.set_xticks(sorted(model.step.unique()))
                if early_stopping is not None:
                    ax.axvline(early_stopping, color="dimgrey", ls=":", lw=1.2, label="early-stopping step",
                               gid="early_stopping")
        for col in range(len(present), width):
            for ax in axes[3 * d:3 * d + 3, col]:
                ax.axis("off")
    _legend(fig, columns=min(4, 2 * width))  # two columns of entries per column of panels
    fig.suptitle("Along training, no defence\n(error bars and bands: 95 % intervals; Clopper–Pearson accuracies,\n"
                 "Newcombe over-fitting, bootstrap JS distance and AUC)" + which, fontsize=9)
    fit_width(fig)
    return fig


def _defaults(own: pd.DataFrame) -> tuple[int, str]:
    """A_DA's default views and similarity: those of its is_default rows."""
    row = ada(own).iloc[0]
    return int(row.views), str(row.similarity)


def _defence_point(ax, row, colour: str, marker: str, label: str | None = None) -> None:
    """Test accuracy (x) against A_DA's AUC (y), both with their 95 % intervals."""
    ax.errorbar([row.test_accuracy], [row.auc], xerr=[[row.test_accuracy - row.test_accuracy_lo],
                                                     [row.test_accuracy_hi - row.test_accuracy]],
                yerr=[[max(row.auc - row.auc_lo, 0)], [max(row.auc_hi - row.auc, 0)]], color=colour, marker=marker,
                capsize=3, ls="none")
    if label:
        ax.annotate(label, (row.test_accuracy, row.auc_hi), xytext=(0, 3), textcoords="offset points", ha="center",
                    va="bottom", fontsize=6, color=colour)


def ablations_figure(metrics: pd.DataFrame, early_stopping: int | None = None) -> plt.Figure:
    """Per dataset a row: A_DA's AUC (all members, last step) against the views (log x, default
    similarity) and per similarity (default views), one colour per algorithm; and the defences:
    test accuracy against A_DA's AUC for no defence, early stopping (at `early_stopping`), the
    top-1 answer and FixMatch by DP-SGD at each ε, both with 95 % intervals."""
    metrics, which = first_training(metrics)
    datasets = _datasets(metrics)
    fig, axes = _grid(len(datasets), 3, width=5.0, height=4.0)
    for d, dataset in enumerate(datasets):
        own = metrics[metrics.dataset == dataset]
        views, similarity = _defaults(own)
        views_ax, similarity_ax, defence_ax = axes[d]
        present = algorithms(own)
        for i, algorithm in enumerate(present):
            colour, shift = COLOURS[algorithm], (i - (len(present) - 1) / 2) * 0.08
            grid = last_step(of(own, algorithm, defence="none", member_kind="all", attack=DA_ATTACK))
            by_views = grid[grid.similarity == similarity].sort_values("views")
            _errorbar(views_ax, by_views.views * (1 + shift), by_views.auc, by_views.auc_lo, by_views.auc_hi,
                      color=colour, marker="o", label=algorithm)
            by_similarity = grid[grid.views == views].set_index("similarity")
            names = [s for s in SIMILARITIES if s in by_similarity.index]
            if names:
                rows = by_similarity.loc[names]
                _errorbar(similarity_ax, np.arange(len(names)) + shift * 2, rows.auc, rows.auc_lo, rows.auc_hi,
                          color=colour, marker="o", ls="none", label=algorithm)
                similarity_ax.set_xticks(range(len(names)), names)
            default = ada(of(own, algorithm, member_kind="all"))
            for defence, rows in (("none (last step)", last_step(default[default.defence == "none"])),
                                  ("early stopping", default[(default.defence == "none")
                                                             & (default.step == early_stopping)
                                                             & (default.step != default.steps)]),
                                  ("top-1 answer", last_step(default[default.defence == "top1"]))):
                if not rows.empty:
                    _defence_point(defence_ax, rows.iloc[0], colour, DEFENCE_MARKERS[defence])
        private = last_step(ada(own[(own.target == DPSGD_TARGET) & (own.member_kind == "all")]))
        for _, row in private.sort_values("eps").iterrows():
            _defence_point(defence_ax, row, COLOURS[DPSGD_TARGET], DEFENCE_MARKERS["DP-SGD (FixMatch)"],
                           f"DP-SGD ε = {row.eps:g}")
        for ax in (views_ax, similarity_ax, defence_ax):
            _chance(ax)
        ticks = sorted(own.loc[own.attack == DA_ATTACK, "views"].dropna().astype(int).unique())
        views_ax.set_xscale("log")
        views_ax.set_xticks(ticks, [str(k) for k in ticks])
        views_ax.minorticks_off()
        views_ax.axvline(views, color="dimgrey", ls=":", lw=1, gid="default_views")  # A_DA's default K
        defence_ax.margins(x=0.15, y=0.1)  # room for the DP-SGD labels
        views_ax.set( xlabel="number of views K", ylabel="A_DA AUC (all members)",
                     title=f"{dataset}: A_DA AUC against the views ({similarity})\n"
                           f"({_members(own[own.member_kind == 'all'])})")
        similarity_ax.set(xlabel="similarity function", ylabel="A_DA AUC (all members)",
                          title=f"{dataset}: A_DA AUC per similarity (K = {views})")
        defence_ax.set(xlabel="test accuracy", ylabel="A_DA AUC (all members)",
                       title=f"{dataset}: defences (utility against leakage)")
        for ax in axes[d]:
            ax.title.set_fontsize(8)
    handles = [Line2D([], [], color=c, marker="o", label=a) for a, c in COLOURS.items() if a != DPSGD_TARGET
               and (metrics.target == a).any()]
    handles += [Line2D([], [], color=COLOURS[DPSGD_TARGET] if "DP" in name else "dimgrey", marker=marker, ls="none",
                       label=name) for name, marker in DEFENCE_MARKERS.items()]
    handles += [Line2D([], [], color="grey", ls="--", label="AUC 0.5 (chance)"),
                Line2D([], [], color="dimgrey", ls=":", label="default number of views")]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=7)
    fig.suptitle("A_DA ablations and defences at the last step; error bars: 95 % intervals (bootstrap AUC, "
                 "Clopper–Pearson test accuracy)" + which, fontsize=9)
    fit_width(fig)
    return fig
