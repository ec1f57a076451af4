"""The paper's figures, drawn from the tidy CSVs of the protect and attack rules only."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

STYLE = {  # mechanism: (label, colour, marker)
    "alm": ("ALM (logistic)", "tab:red", "o"),
    "laplace": ("Laplace", "tab:blue", "s"),
    "gaussian": ("Gaussian (classical; no proof for ε ≥ 1)", "tab:green", "^"),
    "gaussian_analytic": ("Gaussian (analytic)", "tab:olive", "v"),
}
PAPER_ATTACK = "shadow_mlp"


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
