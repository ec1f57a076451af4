"""The paper's figures, drawn from the tidy CSVs of the protect and attack rules only."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from privssl.io import atomic_path  # noqa: E402

STYLE = {  # mechanism: (label, colour, marker)
    "alm": ("ALM (logistic)", "tab:red", "o"),
    "laplace": ("Laplace", "tab:blue", "s"),
    "gaussian": ("Gaussian (classical; no proof for ε ≥ 1)", "tab:green", "^"),
    "gaussian_analytic": ("Gaussian (analytic)", "tab:olive", "v"),
}
PAPER_ATTACK = "shadow_mlp"


def save_figure(fig: plt.Figure, paths: list[str]) -> None:
    """Write the figure to each path (its format from the suffix: png, pdf) atomically, then close it."""
    for path in paths:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=150, format=str(path).rsplit(".", 1)[-1])
    plt.close(fig)


def _mean_std(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    return frame.groupby(["mechanism", "eps"])[column].agg(["mean", "std"]).fillna(0.0).reset_index()


def figure1(utility: pd.DataFrame) -> plt.Figure:
    """Fig. 1: utility loss vs ε per mechanism, mean ± std over noise draws, a panel per dataset."""
    datasets = list(dict.fromkeys(utility.dataset))
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        stats = _mean_std(utility[utility.dataset == dataset], "utility_loss")
        for mechanism, group in stats.groupby("mechanism", sort=False):
            label, colour, marker = STYLE[mechanism]
            ax.plot(group.eps, group["mean"], marker=marker, color=colour, label=label)
            ax.fill_between(group.eps, group["mean"] - group["std"], group["mean"] + group["std"],
                            color=colour, alpha=0.2)
        ax.set(xscale="log", xlabel="privacy budget ε", ylabel="utility loss", title=dataset)
        ax.axhline(0, color="grey", lw=0.8)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def figure2(utility: pd.DataFrame, mia: pd.DataFrame) -> plt.Figure:
    """Fig. 2: top, MIA accuracy vs ε; bottom, MIA accuracy vs utility loss (paper's shadow attack)."""
    mia = mia[mia.attack == PAPER_ATTACK]
    datasets = list(dict.fromkeys(mia.dataset))
    fig, axes = plt.subplots(2, len(datasets), figsize=(5 * len(datasets), 8), squeeze=False)
    for col, dataset in enumerate(datasets):
        top, bottom = axes[0, col], axes[1, col]
        attacks = mia[mia.dataset == dataset]
        clean = attacks[attacks.mechanism == "none"].accuracy.mean()
        attack_stats = _mean_std(attacks[attacks.mechanism != "none"], "accuracy")
        loss_stats = _mean_std(utility[utility.dataset == dataset], "utility_loss")
        for mechanism, group in attack_stats.groupby("mechanism", sort=False):
            label, colour, marker = STYLE[mechanism]
            top.plot(group.eps, group["mean"], marker=marker, color=colour, label=label)
            top.fill_between(group.eps, group["mean"] - group["std"], group["mean"] + group["std"],
                             color=colour, alpha=0.2)
            joined = group.merge(loss_stats[loss_stats.mechanism == mechanism], on=["mechanism", "eps"],
                                 suffixes=("_mia", "_loss"))
            bottom.plot(joined.mean_loss, joined.mean_mia, marker=marker, color=colour, label=label)
        for ax in (top, bottom):
            ax.axhline(clean, color="black", ls="--", lw=1, label=f"unprotected ({clean:.3f})")
            ax.axhline(0.5, color="grey", ls=":", lw=1, label="random guess")
            ax.set_ylabel("MIA accuracy")
        top.set(xscale="log", xlabel="privacy budget ε", title=dataset)
        bottom.set(xlabel="utility loss")
        top.legend(fontsize=8)
    fig.tight_layout()
    return fig


LINK_ATTACKS = {  # rows of link_protection.csv drawn: (attack, distance) -> (label, line style)
    ("attack-0", "correlation"): ("Attack-0 (correlation distance)", "-"),
    ("attack-3", None): ("Attack-3 (partial graph)", "--"),
}


def graph_protection_figure(utility: pd.DataFrame, mia: pd.DataFrame, links: pd.DataFrame) -> plt.Figure:
    """Part B of the graph track: per graph (column), utility loss, node MIA accuracy and
    link-stealing AUC vs ε per mechanism; the unprotected head's value as a dashed line."""
    mia = mia[mia.attack == PAPER_ATTACK]
    datasets = list(dict.fromkeys(utility.dataset))
    fig, axes = plt.subplots(3, len(datasets), figsize=(5 * len(datasets), 11), squeeze=False)
    for col, dataset in enumerate(datasets):
        loss_ax, mia_ax, link_ax = axes[:, col]
        for mechanism, group in _mean_std(utility[utility.dataset == dataset], "utility_loss").groupby(
                "mechanism", sort=False):
            label, colour, marker = STYLE[mechanism]
            loss_ax.errorbar(group.eps, group["mean"], group["std"], marker=marker, color=colour, label=label)
        attacks = mia[mia.dataset == dataset]
        for mechanism, group in _mean_std(attacks[attacks.mechanism != "none"], "accuracy").groupby(
                "mechanism", sort=False):
            label, colour, marker = STYLE[mechanism]
            mia_ax.errorbar(group.eps, group["mean"], group["std"], marker=marker, color=colour, label=label)
        mia_ax.axhline(attacks[attacks.mechanism == "none"].accuracy.mean(), color="black", ls="--", lw=1,
                       label="unprotected")
        mia_ax.axhline(0.5, color="grey", ls=":", lw=1, label="random guess")
        graph_links = links[links.dataset == dataset]
        for (attack, distance), (attack_label, style) in LINK_ATTACKS.items():
            rows = graph_links[(graph_links.attack == attack)
                               & (graph_links.distance.isna() if distance is None else graph_links.distance == distance)]
            for mechanism, group in _mean_std(rows[rows.mechanism != "none"], "auc").groupby("mechanism", sort=False):
                label, colour, marker = STYLE[mechanism]
                link_ax.errorbar(group.eps, group["mean"], group["std"], marker=marker, color=colour, ls=style,
                                 label=f"{label}, {attack_label}" if col == 0 else None)
            link_ax.axhline(rows[rows.mechanism == "none"].auc.mean(), color="black", ls=style, lw=1,
                            label=f"unprotected, {attack_label}")
        link_ax.axhline(0.5, color="grey", ls=":", lw=1)
        loss_ax.set(xscale="log", ylabel="utility loss", title=dataset)
        mia_ax.set(xscale="log", ylabel="node MIA accuracy (shadow MLP)")
        link_ax.set(xscale="log", xlabel="privacy budget ε", ylabel="link-stealing AUC")
        for ax in (loss_ax, mia_ax, link_ax):
            ax.legend(fontsize=6)
    fig.tight_layout()
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
