"""The training-time branch's outputs: Fig. `fig_training_time_dp` (post-hoc releases against
DPCL and DPAdapter at equal ε), the DPAdapter table beside the paper's Table 1 claim, and the
DPCL accounting table beside the paper's settings.

Every accuracy is pooled over the draws of one release with its Clopper–Pearson 95 % interval
and its number of decisions; an ordering of two methods counts as shown only where their
intervals are disjoint.
"""

from __future__ import annotations

import pandas as pd

from privssl.attacks.statistics import accuracy_interval
from privssl.release.methods import METHODS, TRAINING_TIME_METHODS
from privssl.reports.plotting import _datasets, _draw, _figure_legend, _panels, _pooled
from privssl.reports.release_table import attach_kinds, paper_attack, point_kinds, pooled_accuracy

# The post-hoc side of the comparison: ALM, the certified head's releases and the DP-SGD head.
POST_HOC = ("alm", "certified_gaussian", "certified_pure", "dpsgd")
# DPAdapter, Table 1, DP-SGD rows, accuracy averaged over CIFAR-10, SVHN and STL-10 at the
# table's two privacy budgets (the budgets' values are lost in the seed text's extraction).
PAPER_TABLE1 = {"standard": (0.5677, 0.7292), "sam": (0.5961, 0.7625), "dpadapter": (0.6142, 0.7709)}
PRETRAINING_ORDER = ("standard", "sam", "dpadapter")


def pooled_test_accuracy(rows: pd.DataFrame, n_test: int) -> dict:
    """Accuracy over every test decision of the rows' draws, its interval and decisions."""
    decisions = n_test * len(rows)
    correct = int(round(float(rows.accuracy.sum() * n_test)))
    accuracy, lo, hi = accuracy_interval(correct, decisions)
    return {"mean": accuracy, "lo": lo, "hi": hi, "decisions": decisions}


def figure(utility: pd.DataFrame, mia: pd.DataFrame, n_test: dict[str, int]):
    """Per dataset: top, test accuracy vs ε (95 % band); bottom, the adaptive shadow-MLP MIA
    accuracy vs ε (95 % band), for the post-hoc and the training-time releases."""
    shown = set(POST_HOC) | set(TRAINING_TIME_METHODS)
    utility, mia = utility[utility.mechanism.isin(shown)], mia[mia.mechanism.isin(shown | {"none"})]
    kinds = point_kinds(utility)
    attacked, attacks = attach_kinds(paper_attack(mia), utility), paper_attack(mia)
    datasets = _datasets(utility)
    fig, axes = _panels(2, len(datasets), 8.8)
    for col, dataset in enumerate(datasets):
        top, bottom = axes[0, col], axes[1, col]
        rows = utility[utility.dataset == dataset]
        stats = pd.DataFrame([{"mechanism": m, "eps": e, **pooled_test_accuracy(g, n_test[dataset])}
                              for (m, e), g in rows.groupby(["mechanism", "eps"], sort=True)])
        stats = stats.merge(kinds[kinds.dataset == dataset], on=["mechanism", "eps"]).assign(std=0.0)
        for mechanism in sorted(stats.mechanism.unique(), key=METHODS.index):
            group = stats[stats.mechanism == mechanism]
            _draw(top, mechanism, group.eps, group, spread="interval")
        clean = rows.clean_accuracy.mean()
        top.axhline(clean, color="black", ls="-.", lw=1, label=f"non-private head ({clean:.3f})")
        top.set(xscale="log", xlabel="privacy budget ε", ylabel="test accuracy",
                title=f"{dataset} (band: 95 % CI over {n_test[dataset]} test records × draws)")
        for mechanism, group in _pooled(attacked[attacked.dataset == dataset]).groupby("mechanism", sort=False):
            _draw(bottom, mechanism, group.eps, group, spread="interval")
        unprotected = pooled_accuracy(attacks[(attacks.dataset == dataset) & (attacks.mechanism == "none")])
        bottom.axhline(unprotected["accuracy"], color="black", ls="-.", lw=1,
                       label=f"unprotected {unprotected['accuracy']:.3f} [{unprotected['lo']:.3f}, "
                             f"{unprotected['hi']:.3f}]")
        bottom.axhline(0.5, color="grey", ls="-.", lw=0.8, label="random guess")
        bottom.set(xscale="log", xlabel="privacy budget ε", ylabel="MIA accuracy (adaptive shadow MLP, 95 % CI)")
        for ax in (top, bottom):
            ax.legend(fontsize=7)
    _figure_legend(fig, sorted(set(utility.mechanism), key=METHODS.index))
    return fig


def dpadapter_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, pre-training, ρ, ε): downstream accuracy pooled over repeats with its
    interval, the downstream and pre-trained robust accuracy with theirs (test decisions × noise
    draws, counted as independent: the draws share the test records, so the interval is a little
    narrow), and the pre-trained accuracy."""
    rows = []
    for (dataset, kind, rho, eps), group in results.groupby(["dataset", "pretraining", "rho", "eps"], sort=True):
        pooled = pooled_test_accuracy(group, int(group.n_test.iloc[0]))
        n_test, draws = int(group.n_test.iloc[0]), int(group.robust_draws.iloc[0])
        robust = pooled_test_accuracy(pd.DataFrame({"accuracy": group.robust_accuracy}), n_test * draws)
        pretrain_robust = pooled_test_accuracy(
            pd.DataFrame({"accuracy": [group.pretrain_robust_accuracy.iloc[0]]}), n_test * draws)
        rows.append({"dataset": dataset, "pretraining": kind, "rho": rho, "eps": eps, "accuracy": pooled["mean"],
                     "accuracy_lo": pooled["lo"], "accuracy_hi": pooled["hi"], "decisions": pooled["decisions"],
                     "robust_accuracy": group.robust_accuracy.mean(), "robust_lo": robust["lo"], "robust_hi": robust["hi"],
                     "robust_noise": group.robust_noise.iloc[0], "robust_draws": draws,
                     "pretrain_accuracy": group.pretrain_accuracy.iloc[0],
                     "pretrain_robust_accuracy": group.pretrain_robust_accuracy.iloc[0],
                     "pretrain_robust_lo": pretrain_robust["lo"],
                     "pretrain_robust_hi": pretrain_robust["hi"],
                     "noise_multiplier": group.noise_multiplier.iloc[0], "repeats": len(group)})
    table = pd.DataFrame(rows)
    table["order"] = table.pretraining.map(PRETRAINING_ORDER.index)
    return table.sort_values(["dataset", "eps", "order", "rho"]).drop(columns="order").reset_index(drop=True)


def _compare(a: pd.Series, b: pd.Series) -> str:
    """'>' or '<' where the intervals are disjoint, else '≈' (not a finding)."""
    if a.accuracy_lo > b.accuracy_hi:
        return ">"
    if a.accuracy_hi < b.accuracy_lo:
        return "<"
    return "≈"


def dpadapter_comparisons(table: pd.DataFrame):
    """(dataset, ε, ρ, DPAdapter row, vanilla SAM row, standard row) of `dpadapter_table`, per
    dataset, ε and radius: the three pre-trainings the paper's Table 1 orders."""
    for (dataset, eps), group in table.groupby(["dataset", "eps"], sort=True):
        standard = group[group.pretraining == "standard"].iloc[0]
        for rho in sorted(group[group.pretraining == "dpadapter"].rho):
            adapter = group[(group.pretraining == "dpadapter") & (group.rho == rho)].iloc[0]
            sam = group[(group.pretraining == "sam") & (group.rho == rho)].iloc[0]
            yield dataset, eps, rho, adapter, sam, standard


def dpadapter_verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, ε, ρ): DPAdapter vs vanilla SAM and vanilla SAM vs standard pre-training,
    and whether the paper's order DPAdapter ≥ SAM ≥ standard is shown, contradicted or unresolved."""
    rows = []
    for dataset, eps, rho, adapter, sam, standard in dpadapter_comparisons(table):
        first, second = _compare(adapter, sam), _compare(sam, standard)
        verdict = ("contradicted" if "<" in (first, second) else
                   "shown" if (first, second) == (">", ">") else "not resolved (intervals overlap)")
        rows.append({"dataset": dataset, "eps": eps, "rho": rho, "dpadapter_vs_sam": first,
                     "sam_vs_standard": second, "claim": verdict})
    return pd.DataFrame(rows)


def dpadapter_markdown(table: pd.DataFrame, verdicts: pd.DataFrame) -> str:
    lines = ["| dataset | ε | pre-training | ρ | downstream accuracy, 95 % CI (decisions) | robust accuracy "
             "(downstream), 95 % CI | pre-trained accuracy | pre-trained robust accuracy, 95 % CI | σ |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in table.itertuples(index=False):
        lines.append(f"| {r.dataset} | {r.eps:g} | {r.pretraining} | {r.rho:g} | {r.accuracy:.3f} "
                     f"[{r.accuracy_lo:.3f}, {r.accuracy_hi:.3f}] ({r.decisions}) | {r.robust_accuracy:.3f} "
                     f"[{r.robust_lo:.3f}, {r.robust_hi:.3f}] | {r.pretrain_accuracy:.3f} "
                     f"| {r.pretrain_robust_accuracy:.3f} [{r.pretrain_robust_lo:.3f}, {r.pretrain_robust_hi:.3f}] "
                     f"| {r.noise_multiplier:.4g} |")
    noise = ", ".join(f"{v:g}" for v in sorted(table.robust_noise.unique()))
    draws = ", ".join(f"{v:g}" for v in sorted(table.robust_draws.unique()))
    lines += ["", f"Robust accuracy: mean test accuracy under i.i.d. Gaussian noise of std {noise} on every weight, "
              f"over {draws} noise draws; its interval counts test records × draws as independent decisions.",
              "", "The paper's claim (DPAdapter, Table 1, DP-SGD rows, average over CIFAR-10, SVHN and STL-10 at its two "
              "budgets): DPAdapter ≥ vanilla SAM ≥ standard pre-training — "
              + "; ".join(f"{kind} {a:.4f} / {b:.4f}" for kind, (a, b) in PAPER_TABLE1.items()) + ".", "",
              "| dataset | ε | ρ | DPAdapter vs SAM | SAM vs standard | the claim here |", "|---|---:|---:|:-:|:-:|---|"]
    for r in verdicts.itertuples(index=False):
        lines.append(f"| {r.dataset} | {r.eps:g} | {r.rho:g} | {r.dpadapter_vs_sam} | {r.sam_vs_standard} | {r.claim} |")
    lines += ["", "'>' and '<': the 95 % intervals are disjoint; '≈': they overlap, which is not a finding."]
    return "\n".join(lines) + "\n"


# What the two ε columns are, said once above each table (docs/training-time.md, "Reading the DPCL accounting").
ACCOUNTANTS_NOTE = (
    "Two accountants, substitution of one record, at the same noise multipliers: `eps_rdp_without_replacement` is "
    "the RDP accountant for the fixed-size batches sampled without replacement that the training draws — the "
    "claim, and an upper bound that is loose at small σ; `eps_pld_poisson` is the PLD accountant (dp_accounting) "
    "on the Poisson analogue (each record in each step's batch with probability |B|/n, same steps) — what the "
    "mechanisms would cost with Poisson sampling, no claim for this training. Neither is a lower bound on the "
    "privacy loss.")


def accounting_markdown(ours: pd.DataFrame, paper: pd.DataFrame) -> str:
    lines = [ACCOUNTANTS_NOTE, "", "Our runs (σ shared by every mechanism of a release, calibrated by the RDP "
             "accountant for sampling without replacement):", "",
             "| dataset | method | role | n | target ε | σ | mechanisms | encoder steps (|B|) | head steps (|B|) "
             "| ε, RDP, without replacement (the claim) | ε, PLD, Poisson analogue | kind | sensitivities |",
             "|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---|"]
    for r in ours.itertuples(index=False):
        target = "—" if pd.isna(r.eps_target) else f"{r.eps_target:g}"
        lines.append(f"| {r.dataset} | {r.method} | {r.role} | {r.n} | {target} | {r.noise_multiplier:.4g} "
                     f"| {r.mechanisms} | {r.encoder_steps} ({r.encoder_batch}) | {r.head_steps} ({r.head_batch}) "
                     f"| {r.eps_rdp_without_replacement:.4g} | {r.eps_pld_poisson:.4g} | {r.guarantee_kind} "
                     f"| {r.sensitivities.replace('|', '∣')} |")
    lines += ["", "The paper's settings (DPCL §5: CIFAR-10, n = 50000, |B| = 128, SimCLR 200 epochs, Barlow Twins 100, "
              "δ = 1e-5, ε = 1000), at the paper's noise multipliers: ε by both accountants with the mechanisms "
              "sharing each step's batch, as the training does, and `_separate` with each mechanism sampled on its own "
              "batch, as the paper accounts (which reproduces its ε = 1000 for the RDP accountant); then the "
              "multipliers the RDP accountant needs for ε = 1000 (same ratios between mechanisms) and its ε there "
              "(`eps_at`). Do not read DPCL's figures of 1e5 and more as the mechanisms' privacy loss: they are "
              "what the RDP bound for this sampling proves at the small effective σ of mechanisms that share a "
              "batch, an upper bound that is loose there; the true loss of the training lies below it and neither "
              "accountant computes it, while on the Poisson analogue the PLD accountant gives over three orders of "
              "magnitude less.", "",
              "| " + " | ".join(paper.columns) + " |", "|" + "---|" * len(paper.columns)]
    for row in paper.itertuples(index=False):
        lines.append("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row) + " |")
    return "\n".join(lines) + "\n"
