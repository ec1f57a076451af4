"""The training-time branch's outputs: Fig. `fig_training_time_dp` (post-hoc releases against
DPCL and DPAdapter at equal ε), the DPAdapter table beside the paper's Table 1 claim, and the
DPCL accounting table beside the paper's settings.

Every accuracy is over the draws (noise draws, repeats) of one release with its 95 % interval
clustered by record (privssl.attacks.repeated: the draws decide the same test records); an
ordering of two methods is read from their difference paired on the test records
(privssl.reports.verdicts).
"""

from __future__ import annotations

import pandas as pd

from privssl.attacks.statistics import accuracy_interval
from privssl.release.methods import METHODS, TRAINING_TIME_METHODS
from privssl.reports.decisions import estimate, paired
from privssl.reports.plotting import (
    PANEL_HEIGHT,
    _datasets,
    _draw,
    _figure_legend,
    _noise_free_lines,
    _panels,
    _title,
    estimates,
    interval_note,
)
from privssl.reports.release_table import (
    attach_kinds,
    mia_accuracy,
    paper_attack,
    point_kinds,
    pooled_accuracy,
    releases,
    test_accuracy,
)
from privssl.reports.claims_spec import MIN_TRAININGS
from privssl.reports.verdicts import combined, directional

# The post-hoc side of the comparison: ALM, the certified head's releases and the DP-SGD head.
POST_HOC = ("alm", "certified_gaussian", "certified_pure", "dpsgd")
# DPAdapter, Table 1, DP-SGD rows, accuracy averaged over CIFAR-10, SVHN and STL-10 at the
# table's two privacy budgets (the budgets' values are lost in the seed text's extraction).
PAPER_TABLE1 = {"standard": (0.5677, 0.7292), "sam": (0.5961, 0.7625), "dpadapter": (0.6142, 0.7709)}
PRETRAINING_ORDER = ("standard", "sam", "dpadapter")


def figure(utility: pd.DataFrame, mia: pd.DataFrame, n_test: dict[str, int]):
    """Per dataset: top, test accuracy vs ε (each method's noise-free limit a dotted line);
    bottom, the adaptive shadow-MLP MIA accuracy vs ε;
    for the post-hoc and the training-time releases, each point over every draw of its release
    with its 95 % interval clustered by record (release_table's test_accuracy and mia_accuracy).
    `n_test`: each dataset's test-set size from its splits, which every release must have decided."""
    shown = set(POST_HOC) | set(TRAINING_TIME_METHODS)
    with_limits = utility[utility.mechanism.isin(shown)]  # the ε = ∞ rows: each method's noise-free limit
    utility, mia = releases(with_limits), mia[mia.mechanism.isin(shown | {"none"})]
    point_kinds(utility)
    attacked, attacks = attach_kinds(paper_attack(mia), utility), paper_attack(mia)
    datasets = _datasets(utility)
    fig, axes = _panels(2, len(datasets), 2 * PANEL_HEIGHT)
    for col, dataset in enumerate(datasets):
        top, bottom = axes[0, col], axes[1, col]
        rows = utility[utility.dataset == dataset]
        decided = sorted(set(rows.n_test.astype(int)))
        if decided != [n_test[dataset]]:
            raise ValueError(f"{dataset}: the releases decided {decided} test records, its test split has "
                             f"{n_test[dataset]}")
        stats = estimates(rows, test_accuracy)
        for mechanism in sorted(stats.mechanism.unique(), key=METHODS.index):
            group = stats[stats.mechanism == mechanism]
            _draw(top, mechanism, group.eps, group)
        _noise_free_lines(top, with_limits, dataset, "accuracy")  # its loss to the machinery, and to the noise
        clean = rows.clean_accuracy.mean()
        top.axhline(clean, color="black", ls="-.", lw=1, label=f"non-private head ({clean:.3f})")
        top.set(xscale="log", xlabel="privacy budget ε", ylabel="test accuracy")
        _title(top, f"{dataset}: test accuracy", interval_note(stats, "test records"))
        mia_stats = estimates(attacked[attacked.dataset == dataset], mia_accuracy)
        for mechanism, group in mia_stats.groupby("mechanism", sort=False):
            _draw(bottom, mechanism, group.eps, group)
        unprotected = pooled_accuracy(attacks[(attacks.dataset == dataset) & (attacks.mechanism == "none")])
        bottom.axhline(unprotected["accuracy"], color="black", ls="-.", lw=1,
                       label=f"unprotected {unprotected['accuracy']:.3f} [{unprotected['lo']:.3f}, "
                             f"{unprotected['hi']:.3f}]")
        bottom.axhline(0.5, color="grey", ls="-.", lw=0.8, label="random guess")
        bottom.set(xscale="log", xlabel="privacy budget ε", ylabel="MIA accuracy (adaptive shadow MLP)")
        _title(bottom, f"{dataset}: membership inference", interval_note(mia_stats, "queried records"))
        for ax in (top, bottom):
            ax.legend(fontsize=7)
    _figure_legend(fig, sorted(set(utility.mechanism), key=METHODS.index))
    return fig


def dpadapter_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, pre-training, ρ, ε): downstream accuracy over the repeats with its interval
    clustered by test record (the repeats are independent trainings deciding the same test
    records), the downstream and pre-trained robust accuracy with a Clopper–Pearson interval over
    the test records (a mean over the noise draws of each record, the records as the unit), and the
    pre-trained accuracy."""
    rows = []
    for (dataset, kind, rho, eps), group in results.groupby(["dataset", "pretraining", "rho", "eps"], sort=True):
        accuracy = estimate(group, "n_test")
        n_test, draws = int(group.n_test.iloc[0]), int(group.robust_draws.iloc[0])
        robust_lo, robust_hi = _record_interval(group.robust_accuracy.mean(), n_test)
        pretrain_lo, pretrain_hi = _record_interval(group.pretrain_robust_accuracy.iloc[0], n_test)
        rows.append({"dataset": dataset, "pretraining": kind, "rho": rho, "eps": eps, "accuracy": accuracy.value,
                     "accuracy_lo": accuracy.lo, "accuracy_hi": accuracy.hi, "records": accuracy.n,
                     "robust_accuracy": group.robust_accuracy.mean(), "robust_lo": robust_lo, "robust_hi": robust_hi,
                     "robust_noise": group.robust_noise.iloc[0], "robust_draws": draws,
                     "pretrain_accuracy": group.pretrain_accuracy.iloc[0],
                     "pretrain_robust_accuracy": group.pretrain_robust_accuracy.iloc[0],
                     "pretrain_robust_lo": pretrain_lo, "pretrain_robust_hi": pretrain_hi,
                     "noise_multiplier": group.noise_multiplier.iloc[0], "repeats": len(group)})
    table = pd.DataFrame(rows)
    table["order"] = table.pretraining.map(PRETRAINING_ORDER.index)
    return table.sort_values(["dataset", "eps", "order", "rho"]).drop(columns="order").reset_index(drop=True)


def _record_interval(mean: float, records: int) -> tuple[float, float]:
    """Clopper–Pearson over the records for a mean of per-record rates: every noise draw of a
    record counted as one decision of that record (the records are the independent units)."""
    return accuracy_interval(int(round(mean * records)), records)[1:]


def dpadapter_comparisons(results: pd.DataFrame):
    """(dataset, ε, ρ, {pre-training: its repeats' rows}) per dataset, ε and radius: the three
    pre-trainings the paper's Table 1 orders (standard pre-training has no radius: its rows at
    every ρ)."""
    for (dataset, eps), group in results.groupby(["dataset", "eps"], sort=True):
        standard = group[group.pretraining == "standard"]
        for rho in sorted(group[group.pretraining == "dpadapter"].rho.unique()):
            yield dataset, eps, rho, {"dpadapter": group[(group.pretraining == "dpadapter") & (group.rho == rho)],
                                      "sam": group[(group.pretraining == "sam") & (group.rho == rho)],
                                      "standard": standard}


def distinct_pretrainings(rows: pd.DataFrame) -> int:
    """An arm's independent pre-trainings: its distinct seeds, each counted once only if its
    network's test accuracy, clean and under weight noise, differs from every other's (a seed
    that was recorded but not used gives the same network again)."""
    networks = rows[["pretrain_accuracy", "pretrain_robust_accuracy"]].drop_duplicates()
    return min(rows.pretraining_seed.nunique(), len(networks))


def dpadapter_verdicts(results: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, ε, ρ): DPAdapter − vanilla SAM and vanilla SAM − standard downstream accuracy,
    paired on the test records, each with its 95 % interval and verdict (privssl.reports.verdicts:
    reproduced when the interval lies above 0), and the paper's order DPAdapter ≥ SAM ≥ standard
    as both together; `pretrainings`: the independent pre-trainings of the fewest-trained of the
    three arms, which the claims ledger's rule for a claim about a training procedure reads."""
    rows = []
    for dataset, eps, rho, sides in dpadapter_comparisons(results):
        row = {"dataset": dataset, "eps": eps, "rho": rho,
               "pretrainings": min(distinct_pretrainings(arm) for arm in sides.values())}
        parts = []
        for name, high, low in (("dpadapter_vs_sam", "dpadapter", "sam"), ("sam_vs_standard", "sam", "standard")):
            d = paired(sides[high], sides[low], "n_test")
            verdict, _ = directional(d)
            parts.append(verdict)
            row |= {name: d.value, f"{name}_lo": d.lo, f"{name}_hi": d.hi, f"{name}_verdict": verdict}
        rows.append(row | {"claim": combined(parts)})
    return pd.DataFrame(rows)


def dpadapter_markdown(table: pd.DataFrame, verdicts: pd.DataFrame) -> str:
    lines = ["| dataset | ε | pre-training | ρ | downstream accuracy, 95 % CI (test records × repeats) | robust accuracy "
             "(downstream), 95 % CI | pre-trained accuracy | pre-trained robust accuracy, 95 % CI | σ |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in table.itertuples(index=False):
        lines.append(f"| {r.dataset} | {r.eps:g} | {r.pretraining} | {r.rho:g} | {r.accuracy:.3f} "
                     f"[{r.accuracy_lo:.3f}, {r.accuracy_hi:.3f}] ({r.records} × {r.repeats}) | {r.robust_accuracy:.3f} "
                     f"[{r.robust_lo:.3f}, {r.robust_hi:.3f}] | {r.pretrain_accuracy:.3f} "
                     f"| {r.pretrain_robust_accuracy:.3f} [{r.pretrain_robust_lo:.3f}, {r.pretrain_robust_hi:.3f}] "
                     f"| {r.noise_multiplier:.4g} |")
    noise = ", ".join(f"{v:g}" for v in sorted(table.robust_noise.unique()))
    draws = ", ".join(f"{v:g}" for v in sorted(table.robust_draws.unique()))
    lines += ["", f"Downstream accuracy: over the repeats (independent trainings), its interval clustered by test record "
              f"(privssl.attacks.repeated). Robust accuracy: mean test accuracy under i.i.d. Gaussian noise of std "
              f"{noise} on every weight, over {draws} noise draws; its interval counts the test records only.",
              "", "The paper's claim (DPAdapter, Table 1, DP-SGD rows, average over CIFAR-10, SVHN and STL-10 at its two "
              "budgets): DPAdapter ≥ vanilla SAM ≥ standard pre-training — "
              + "; ".join(f"{kind} {a:.4f} / {b:.4f}" for kind, (a, b) in PAPER_TABLE1.items()) + ".", "",
              "| dataset | ε | ρ | pre-trainings per arm | DPAdapter − SAM, 95 % CI | SAM − standard, 95 % CI "
              "| the claim here |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for r in verdicts.itertuples(index=False):
        lines.append(f"| {r.dataset} | {r.eps:g} | {r.rho:g} | {r.pretrainings} "
                     f"| {r.dpadapter_vs_sam:+.3f} [{r.dpadapter_vs_sam_lo:+.3f}, {r.dpadapter_vs_sam_hi:+.3f}] "
                     f"({r.dpadapter_vs_sam_verdict}) | {r.sam_vs_standard:+.3f} [{r.sam_vs_standard_lo:+.3f}, "
                     f"{r.sam_vs_standard_hi:+.3f}] ({r.sam_vs_standard_verdict}) | {r.claim} |")
    lines += ["", "Differences paired on the test records (the same records decide every pre-training); a part is "
              "reproduced when its interval lies above 0, contradicted when below, otherwise unresolved. This table "
              "reads the data as if one pre-training sufficed; the claims ledger leaves a comparison with fewer than "
              f"{MIN_TRAININGS} independent pre-trainings per arm unresolved (a claim about a training procedure)."]
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
