"""The paper's figures, drawn from the tidy CSVs of the protect and attack rules only.

Every method of the release-method registry keeps its colour and marker in every figure; the
line style says what its ε means at that point (`KIND_LINESTYLE`: solid proven DP, dashed random
DP, dash-dot heuristic DP, dotted no guarantee), so a curve whose claim changes along ε changes style there."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from privssl.io import atomic_path  # noqa: E402
from privssl.release.methods import KIND_LINESTYLE, METHODS, REGISTRY, release_method  # noqa: E402
from privssl.reports.release_table import (  # noqa: E402
    attach_kinds,
    noise_free,
    paper_attack,
    point_kinds,
    pooled_accuracy,
    releases,
)

KIND_KEY = {"-": "proven DP (ε-DP, (ε, δ)-DP)", "--": "random DP (sampled Δ)", "-.": "heuristic DP (Δ not proven)",
            ":": "no guarantee"}


# Metadata that keeps a figure's bytes a function of the figure: a PDF's CreationDate is the time
# of writing unless removed; a PNG carries no time (only the Matplotlib version, as both do).
FIGURE_METADATA = {"pdf": {"CreationDate": None}, "png": {}}


def save_figure(fig: plt.Figure, paths: list[str]) -> None:
    """Write the figure to each path (its format from the suffix: png, pdf) atomically, then close it."""
    for path in paths:
        fmt = str(path).rsplit(".", 1)[-1]
        if fmt not in FIGURE_METADATA:
            raise ValueError(f"{path}: figures are written as {' or '.join(FIGURE_METADATA)} only")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=150, format=fmt, metadata=FIGURE_METADATA[fmt])
    plt.close(fig)


def _mean_std(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Mean and std over draws per (mechanism, ε), sorted by ε; one draw has no spread (std 0)."""
    return frame.groupby(["mechanism", "eps"])[column].agg(["mean", "std"]).fillna(0.0).reset_index()


def _with_kinds(stats: pd.DataFrame, kinds: pd.DataFrame, dataset: str) -> pd.DataFrame:
    return stats.merge(kinds[kinds.dataset == dataset].drop(columns="dataset"), on=["mechanism", "eps"],
                       how="left", validate="one_to_one")


def kind_runs(kinds) -> list[tuple[str, slice]]:
    """Maximal runs of consecutive points with one guarantee kind, as (kind, slice)."""
    kinds, runs, start = list(kinds), [], 0
    for i in range(1, len(kinds) + 1):
        if i == len(kinds) or kinds[i] != kinds[start]:
            runs.append((kinds[start], slice(start, i)))
            start = i
    return runs


def _draw(ax, mechanism: str, x, stats: pd.DataFrame, spread: str | None = "band") -> None:
    """One method's curve in its registry colour and marker, a segment per run of one guarantee
    kind in that kind's line style, so a change of claim along ε shows on the curve itself."""
    method = release_method(mechanism)
    x, mean, std = np.asarray(x, float), stats["mean"].to_numpy(float), stats["std"].to_numpy(float)
    for kind, run in kind_runs(stats.guarantee_kind):
        ax.plot(x[run], mean[run], color=method.colour, marker=method.marker, ls=KIND_LINESTYLE[kind],
                label=f"_{mechanism} ({kind})", gid=f"{mechanism}:{kind}")
        if spread == "band":
            ax.fill_between(x[run], mean[run] - std[run], mean[run] + std[run], color=method.colour, alpha=0.2)
        elif spread == "bars":
            ax.errorbar(x[run], mean[run], std[run], fmt="none", ecolor=method.colour)
        elif spread == "interval":
            ax.fill_between(x[run], stats["lo"].to_numpy()[run], stats["hi"].to_numpy()[run], color=method.colour,
                            alpha=0.2)
        elif spread == "interval_bars":
            lo, hi = stats["lo"].to_numpy()[run], stats["hi"].to_numpy()[run]
            ax.errorbar(x[run], mean[run], [mean[run] - lo, hi - mean[run]], fmt="none", ecolor=method.colour)


def _noise_free_lines(ax, utility: pd.DataFrame, dataset: str, column: str) -> None:
    """Each method's noise-free limit (its ε = ∞ rows) as a thin dotted line in its colour, so
    that a reader sees what the method loses to its training and what to its noise."""
    for row in noise_free(utility[utility.dataset == dataset]).itertuples(index=False):
        ax.axhline(getattr(row, column), color=release_method(row.mechanism).colour, ls=(0, (1, 3)), lw=1.2,
                   gid=f"noise_free/{row.mechanism}")


NOISE_FREE_KEY = "dotted, thin, in a method's colour: its noise-free limit (ε = ∞)"


def _methods(frame: pd.DataFrame) -> list[str]:
    """The methods present, in registry order (an unknown name is an error, not a default style)."""
    return sorted({release_method(m).name for m in frame.mechanism if m != "none"}, key=METHODS.index)


def _figure_legend(fig: plt.Figure, methods: list[str], title: str = "line style: guarantee") -> None:
    """Below the panels: colour and marker name the method, line style the kind of its claim."""
    handles = [Line2D([], [], color=REGISTRY[m].colour, marker=REGISTRY[m].marker, ls="none", label=REGISTRY[m].label)
               for m in methods]
    key = [Line2D([], [], color="dimgrey", ls=style, label=text) for style, text in KIND_KEY.items()]
    # One legend below the panels (two figure legends overlap on a one-panel figure): the
    # methods first, then the line-style key under its own heading.
    heading = Line2D([], [], ls="none", label=f"— {title} —")
    key.append(Line2D([], [], color="dimgrey", ls=(0, (1, 3)), lw=1.2, label=NOISE_FREE_KEY))
    fig.legend(handles=handles + [heading] + key, loc="outside lower center", ncol=2, fontsize=7,
               title="method (colour, marker)", title_fontsize=7)


def _panels(rows: int, cols: int, height: float) -> tuple[plt.Figure, np.ndarray]:
    # constrained layout keeps the figure legends ("outside ...") clear of the panels
    return plt.subplots(rows, cols, figsize=(5 * cols, height), squeeze=False, layout="constrained")


def _datasets(frame: pd.DataFrame) -> list[str]:
    datasets = list(dict.fromkeys(frame.dataset))
    if not datasets:
        raise ValueError("nothing to plot: no rows")
    return datasets


def figure1(utility: pd.DataFrame) -> plt.Figure:
    """Fig. 1: utility loss vs ε per method, mean ± std over noise draws, a panel per dataset."""
    kinds = point_kinds(utility)
    datasets = _datasets(utility)
    fig, axes = _panels(1, len(datasets), 4.8)
    for ax, dataset in zip(axes[0], datasets):
        stats = _with_kinds(_mean_std(releases(utility[utility.dataset == dataset]), "utility_loss"), kinds, dataset)
        for mechanism, group in stats.groupby("mechanism", sort=False):
            _draw(ax, mechanism, group.eps, group)
        _noise_free_lines(ax, utility, dataset, "utility_loss")
        ax.set(xscale="log", xlabel="privacy budget ε", ylabel="utility loss", title=dataset)
        ax.axhline(0, color="grey", lw=0.8)
    _figure_legend(fig, _methods(utility))
    return fig


def _pooled(attacked: pd.DataFrame) -> pd.DataFrame:
    """Per (mechanism, ε): accuracy over every decision of every draw, its 95 % interval as
    `lo`/`hi`, and the guarantee kind; mean = the pooled accuracy (for `_draw`)."""
    rows = [{"mechanism": m, "eps": e, "guarantee_kind": g.guarantee_kind.iloc[0], **pooled_accuracy(g)}
            for (m, e), g in attacked.groupby(["mechanism", "eps"], sort=True)]
    return pd.DataFrame(rows).rename(columns={"accuracy": "mean"}).assign(std=0.0)


def figure2(utility: pd.DataFrame, mia: pd.DataFrame) -> plt.Figure:
    """Fig. 2: top, MIA accuracy vs ε with its 95 % Clopper–Pearson band (decisions of all draws
    pooled); bottom, MIA accuracy vs utility loss. The paper's shadow-MLP attack, adaptive."""
    attacked, mia = attach_kinds(paper_attack(mia), utility), paper_attack(mia)
    datasets = _datasets(mia)
    fig, axes = _panels(2, len(datasets), 8.8)
    for col, dataset in enumerate(datasets):
        top, bottom = axes[0, col], axes[1, col]
        clean = pooled_accuracy(mia[(mia.dataset == dataset) & (mia.mechanism == "none")])
        attack_stats = _pooled(attacked[attacked.dataset == dataset])
        loss_stats = _mean_std(releases(utility[utility.dataset == dataset]), "utility_loss")
        for mechanism, group in attack_stats.groupby("mechanism", sort=False):
            _draw(top, mechanism, group.eps, group, spread="interval")
            joined = group.merge(loss_stats, on=["mechanism", "eps"], suffixes=("", "_loss"))
            _draw(bottom, mechanism, joined.mean_loss, joined, spread="interval_bars")
        for ax in (top, bottom):
            ax.axhline(clean["accuracy"], color="black", ls="-.", lw=1, gid="unprotected",
                       label=f"unprotected {clean['accuracy']:.3f} [{clean['lo']:.3f}, {clean['hi']:.3f}]")
            ax.axhline(0.5, color="grey", ls="-.", lw=0.8, label="random guess", gid="chance")
            ax.set_ylabel("MIA accuracy (adaptive shadow MLP)")
            ax.legend(fontsize=7)
        low, high = int(attack_stats.decisions.min()), int(attack_stats.decisions.max())
        top.set(xscale="log", xlabel="privacy budget ε", title=f"{dataset} (band: 95 % CI, "
                f"{low if low == high else f'{low}–{high}'} decisions per point)")
        bottom.set(xlabel="utility loss")
    _figure_legend(fig, _methods(attacked))
    return fig


def figure3(utility: pd.DataFrame) -> plt.Figure:
    """Fig. 3, the privacy-utility frontier: test accuracy vs ε per method, mean ± std over draws,
    a panel per dataset, with the non-private head's accuracy as the reference line."""
    kinds = point_kinds(utility)
    datasets = _datasets(utility)
    fig, axes = _panels(1, len(datasets), 4.8)
    for ax, dataset in zip(axes[0], datasets):
        rows = utility[utility.dataset == dataset]
        stats = _with_kinds(_mean_std(releases(rows), "accuracy"), kinds, dataset)
        for mechanism, group in stats.groupby("mechanism", sort=False):
            _draw(ax, mechanism, group.eps, group)
        _noise_free_lines(ax, utility, dataset, "accuracy")
        # Every release of a dataset is measured against the same non-private head (protect rule).
        clean = rows.clean_accuracy.mean()
        ax.axhline(clean, color="black", ls="-.", lw=1, label=f"non-private head ({clean:.3f})", gid="non_private")
        ax.set(xscale="log", xlabel="privacy budget ε", ylabel="test accuracy", title=dataset)
        ax.legend(fontsize=7)
    _figure_legend(fig, _methods(utility))
    return fig


LINK_ATTACKS = {  # rows of link_protection.csv drawn: (attack, distance) -> (label, line style)
    ("attack-0", "correlation"): ("Attack-0 (correlation distance)", "-"),
    ("attack-3", None): ("Attack-3 (partial graph)", "--"),
}


def graph_protection_figure(utility: pd.DataFrame, mia: pd.DataFrame, links: pd.DataFrame) -> plt.Figure:
    """Part B of the graph track: per graph (column), utility loss, node MIA accuracy and
    link-stealing AUC vs ε per mechanism; the unprotected head's value as a dash-dot line.
    In the utility and MIA rows the line style is the guarantee kind; in the link row, the attack."""
    kinds = point_kinds(utility)
    attacked, mia = attach_kinds(paper_attack(mia), utility), paper_attack(mia)
    datasets = _datasets(utility)
    fig, axes = _panels(3, len(datasets), 12)
    for col, dataset in enumerate(datasets):
        loss_ax, mia_ax, link_ax = axes[:, col]
        loss_stats = _with_kinds(_mean_std(releases(utility[utility.dataset == dataset]), "utility_loss"), kinds,
                                 dataset)
        for mechanism, group in loss_stats.groupby("mechanism", sort=False):
            _draw(loss_ax, mechanism, group.eps, group, spread="bars")
        _noise_free_lines(loss_ax, utility, dataset, "utility_loss")
        mia_stats = _with_kinds(_mean_std(attacked[attacked.dataset == dataset], "accuracy"), kinds, dataset)
        for mechanism, group in mia_stats.groupby("mechanism", sort=False):
            _draw(mia_ax, mechanism, group.eps, group, spread="bars")
        clean = mia[(mia.dataset == dataset) & (mia.mechanism == "none")].accuracy.mean()
        mia_ax.axhline(clean, color="black", ls="-.", lw=1, label="unprotected")
        mia_ax.axhline(0.5, color="grey", ls="-.", lw=0.8, label="random guess")
        graph_links = links[links.dataset == dataset]
        for (attack, distance), (attack_label, style) in LINK_ATTACKS.items():
            rows = graph_links[(graph_links.attack == attack)
                               & (graph_links.distance.isna() if distance is None else graph_links.distance == distance)]
            for mechanism, group in _mean_std(rows[rows.mechanism != "none"], "auc").groupby("mechanism", sort=False):
                method = release_method(mechanism)
                link_ax.errorbar(group.eps, group["mean"], group["std"], marker=method.marker, color=method.colour,
                                 ls=style)
            link_ax.plot([], [], color="dimgrey", ls=style, label=attack_label)  # legend key of the attack
            link_ax.axhline(rows[rows.mechanism == "none"].auc.mean(), color="black", ls=style, lw=1,
                            label=f"unprotected, {attack_label}")
        link_ax.axhline(0.5, color="grey", ls="-.", lw=0.8)
        loss_ax.set(xscale="log", ylabel="utility loss", title=dataset)
        mia_ax.set(xscale="log", ylabel="node MIA accuracy (adaptive shadow MLP)")
        link_ax.set(xscale="log", xlabel="privacy budget ε", ylabel="link-stealing AUC")
        for ax in (mia_ax, link_ax):
            ax.legend(fontsize=6)
    _figure_legend(fig, _methods(utility), title="line style in the utility and MIA rows: guarantee")
    return fig


def link_stealing_figure(table: pd.DataFrame) -> plt.Figure:
    """Link-stealing AUC (mean ± std over runs) per attack, a panel per graph; the thesis's AUC
    for the same cell as a black tick. Transfer attacks show their best shadow graph."""
    best = table.loc[table.groupby(["dataset", "attack"], sort=False).auc_mean.idxmax()]
    datasets = list(dict.fromkeys(best.dataset))
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        rows = best[best.dataset == dataset].sort_values("attack")
        positions = range(len(rows))
        ax.bar(positions, rows.auc_mean, yerr=rows.auc_std.fillna(0), color="tab:purple", alpha=0.7, label="measured")
        ax.scatter(positions, rows.thesis_auc, marker="_", s=400, color="black", zorder=3, label="thesis")
        labels = [a + (f" ({d})" if a == "attack-0" else "") + (f"\n({s})" if s else "")
                  for a, d, s in zip(rows.attack, rows.distance, rows.shadow)]
        ax.set_xticks(list(positions), labels, rotation=60, ha="right", fontsize=7)
        ax.axhline(0.5, color="grey", ls=":", lw=1)
        ax.set(ylim=(0, 1.02), ylabel="AUC", title=dataset)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig
