"""Table 2: what each release method gives at a few target budgets ε, from the tidy CSVs only.

Per dataset and method, at each target ε, the point of the method's own ε grid nearest to the
target in log distance (DP-SGD may lack some ε of the grid): test accuracy and utility loss, the
paper's shadow-MLP membership-inference accuracy in its adaptive form, each over every draw with
its 95 % interval clustered by record (privssl.attacks.repeated: the draws of one release decide
the same records, so the records are the independent units), the mean AUC, and the exact claim
the release supports (`guarantee_kind`, `guarantee`). The non-private head is one row per
dataset, method `none`.

The figures use the same checks and the same (dataset, mechanism, ε) -> guarantee_kind join:
mia.csv carries no kind, so it takes the kind of the utility rows of the same release.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from privssl.attacks.repeated import Estimate, paired_ratio
from privssl.release.methods import GUARANTEE_KINDS, METHODS, release_method
from privssl.reports.decisions import estimate, layout

PAPER_ATTACK = "shadow_mlp"
POINT = ["dataset", "mechanism", "eps"]
UTILITY_COLUMNS = POINT + ["repeat", "guarantee_kind", "guarantee", "clean_accuracy", "accuracy", "utility_loss",
                           "n_test", "decisions"]
MIA_COLUMNS = POINT + ["repeat", "attack", "adaptive", "accuracy", "auc", "n_members", "n_nonmembers", "decisions"]
TEST_RECORDS = "n_test"  # a utility row's decisions: one per test record
MIA_RECORDS = ("n_members", "n_nonmembers")  # an attack row's: one per member, then per non-member
TABLE2_COLUMNS = ["dataset", "method", "label", "eps_target", "eps", "accuracy", "accuracy_lo", "accuracy_hi",
                  "utility_loss", "utility_loss_lo", "utility_loss_hi", "utility_loss_best", "utility_loss_best_lo",
                  "utility_loss_best_hi", "test_records",
                  "mia_accuracy", "mia_accuracy_lo", "mia_accuracy_hi", "mia_records", "mia_auc_mean",
                  "guarantee_kind", "guarantee", "n_draws"]
KIND_NOTE = ("pure_dp: ε-DP and approx_dp: (ε, δ)-DP, both proven for every neighbouring pair; "
             "random_dp: (ε, [δ,] γ)-random DP, the sensitivity is sampled from a reference distribution; "
             "heuristic_dp: the accountant's (ε, δ) over a sensitivity that is argued, not proven (DPCL's gradient); "
             "none: no guarantee at this ε (e.g. the classical Gaussian for ε ≥ 1, or a sensitivity estimated "
             "from the private data).")


def check_frame(frame: pd.DataFrame, columns: list[str], name: str) -> None:
    """A clear error for an empty table or one that lacks a column the protocol reads."""
    if frame.empty:
        raise ValueError(f"{name} has no rows")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks the column(s) {', '.join(missing)}")


def point_kinds(utility: pd.DataFrame) -> pd.DataFrame:
    """One guarantee kind per (dataset, mechanism, ε): every draw of a release shares its claim."""
    check_frame(utility, UTILITY_COLUMNS, "utility.csv")
    unknown = set(utility.guarantee_kind) - set(GUARANTEE_KINDS)
    if unknown:
        raise ValueError(f"unknown guarantee_kind {sorted(map(str, unknown))}; allowed: {', '.join(GUARANTEE_KINDS)}")
    kinds = utility.groupby(POINT)["guarantee_kind"].agg(["nunique", "first"]).reset_index()
    mixed = kinds[kinds["nunique"] > 1]
    if not mixed.empty:
        raise ValueError(f"draws of one release disagree on guarantee_kind: {mixed[POINT].to_dict('records')}")
    return kinds.drop(columns="nunique").rename(columns={"first": "guarantee_kind"})


def releases(utility: pd.DataFrame) -> pd.DataFrame:
    """The rows of released heads: every finite ε (ε = ∞ is a method's noise-free limit)."""
    return utility[np.isfinite(utility.eps.to_numpy(float))]


def noise_free(utility: pd.DataFrame) -> pd.DataFrame:
    """Each method's noise-free limit (the ε = ∞ rows): mean accuracy and utility loss over its
    draws, per (dataset, mechanism)."""
    limits = utility[np.isinf(utility.eps.to_numpy(float))]
    return limits.groupby(["dataset", "mechanism"], sort=False)[["accuracy", "utility_loss"]].mean().reset_index()


def paper_attack(mia: pd.DataFrame) -> pd.DataFrame:
    """The rows of the paper's shadow-MLP attack in its adaptive form (shadow released like the
    victim; for the clean head, the one attack there is)."""
    check_frame(mia, MIA_COLUMNS, "mia.csv")
    return mia[(mia.attack == PAPER_ATTACK) & mia.adaptive.astype(bool)]


def test_accuracy(rows: pd.DataFrame) -> Estimate:
    """The test accuracy of the draws of one release, its interval clustered by test record."""
    return estimate(rows, TEST_RECORDS)


# The two non-private heads a utility loss divides by, each decided on the test records: the
# released head (A_S chosen for its noise, rule tune) and the grid's best noise-free head (the
# paper's baseline is its best head, not its most stable one; rule finetune trains both).
RELEASED_BASELINE, BEST_BASELINE = "clean_decisions", "best_clean_decisions"


def utility_loss(rows: pd.DataFrame, baseline: str = RELEASED_BASELINE) -> Estimate:
    """Definition 6.1's utility loss 1 − accuracy / clean accuracy of the draws of one release,
    the clean head (`baseline`: the released non-private head, or the tuning grid's best) decided
    on the same test records: the ratio's interval by the delta method on the paired records
    (privssl.attacks.repeated.paired_ratio)."""
    if rows[baseline].nunique(dropna=False) != 1:
        raise ValueError(f"the draws of one release carry different {baseline} cells "
                         f"({rows[baseline].nunique(dropna=False)} distinct): they were not measured against one "
                         "non-private head on the same test records")
    ratio = paired_ratio(layout(rows, TEST_RECORDS), layout(rows.iloc[:1], TEST_RECORDS, baseline))
    return Estimate(1 - ratio.value, 1 - ratio.hi, 1 - ratio.lo, ratio.n, ratio.draws, ratio.var_records,
                    ratio.var_draws, ratio.df)


def baseline_accuracy(post_hoc: pd.DataFrame, baseline: str = RELEASED_BASELINE) -> Estimate:
    """The test accuracy of a non-private head (`baseline`), from any post-hoc release's row."""
    return estimate(post_hoc.iloc[:1], TEST_RECORDS, baseline)


def release_utility_loss(rows: pd.DataFrame, baseline: str = RELEASED_BASELINE,
                         baseline_value: float | None = None) -> Estimate:
    """The utility loss of one release's draws with its 95 % interval clustered by test record. A
    post-hoc release is paired with the non-private head on the same test records (`utility_loss`,
    from the rows' `baseline` decisions); a training-time release (DPCL, DPAdapter) trains its own
    network and its rows carry no clean decisions, so its accuracy's interval is mapped through
    1 − accuracy / clean accuracy, the clean accuracy taken as exact: its own `clean_accuracy`, or
    `baseline_value` (the best head's accuracy, read off a post-hoc row)."""
    if release_method(rows.mechanism.iloc[0]).release != "training_time":
        return utility_loss(rows, baseline)
    clean = float(rows.clean_accuracy.iloc[0]) if baseline == RELEASED_BASELINE else baseline_value
    if clean is None:
        raise ValueError(f"a training-time release's utility loss against {baseline} needs that head's accuracy")
    accuracy = test_accuracy(rows)
    return Estimate(1 - accuracy.value / clean, 1 - accuracy.hi / clean, 1 - accuracy.lo / clean, accuracy.n,
                    accuracy.draws, accuracy.var_records / clean ** 2, accuracy.var_draws / clean ** 2, accuracy.df)


def mia_accuracy(rows: pd.DataFrame) -> Estimate:
    """An attack's accuracy over the draws of one release, its interval clustered by queried record."""
    return estimate(rows, MIA_RECORDS)


def pooled_accuracy(rows: pd.DataFrame) -> dict:
    """`mia_accuracy` as the dict the figures and tables read: accuracy, lo, hi, records, draws."""
    e = mia_accuracy(rows)
    return {"accuracy": e.value, "lo": e.lo, "hi": e.hi, "records": e.n, "draws": e.draws}


def attach_kinds(mia: pd.DataFrame, utility: pd.DataFrame) -> pd.DataFrame:
    """The protected heads' MIA rows with the guarantee_kind of the release they attacked."""
    check_frame(mia, MIA_COLUMNS, "mia.csv")
    attacked = mia[mia.mechanism != "none"]
    joined = attacked.merge(point_kinds(utility), on=POINT, how="left")
    orphans = joined[joined.guarantee_kind.isna()][POINT].drop_duplicates()
    if not orphans.empty:
        raise ValueError(f"mia.csv has releases that utility.csv lacks: {orphans.to_dict('records')}")
    return joined


def nearest_eps(grid, target: float) -> float:
    """The ε of `grid` nearest to `target` in log distance; a tie goes to the smaller (more private) ε."""
    grid = sorted(float(e) for e in grid if e > 0)
    if not grid or target <= 0:
        raise ValueError(f"no positive ε to match target {target} in grid {grid}")
    # rounded so that a tie up to float error (0.1 and 10 around 1) is still a tie
    return min(grid, key=lambda e: (round(abs(math.log(e) - math.log(target)), 9), e))


def _mia_stats(rows: pd.DataFrame, what: str) -> dict:
    if rows.empty:
        raise ValueError(f"mia.csv has no adaptive {PAPER_ATTACK} rows for {what}")
    e = mia_accuracy(rows)
    return {"mia_accuracy": e.value, "mia_accuracy_lo": e.lo, "mia_accuracy_hi": e.hi, "mia_records": e.n,
            "mia_auc_mean": rows.auc.mean()}


def _utility_stats(draws: pd.DataFrame, best_accuracy: float) -> dict:
    accuracy, loss = test_accuracy(draws), release_utility_loss(draws)
    best = release_utility_loss(draws, BEST_BASELINE, best_accuracy)
    return {"accuracy": accuracy.value, "accuracy_lo": accuracy.lo, "accuracy_hi": accuracy.hi,
            "utility_loss": loss.value, "utility_loss_lo": loss.lo, "utility_loss_hi": loss.hi,
            "utility_loss_best": best.value, "utility_loss_best_lo": best.lo, "utility_loss_best_hi": best.hi,
            "test_records": accuracy.n}


def _clean_stats(with_clean: pd.DataFrame) -> dict:
    """The non-private head: one head, its accuracy on the test records (any release's row holds
    its decisions), no loss against itself, and its loss against the grid's best noise-free head
    (the same records: the released head's decisions in the place of a release's)."""
    e = baseline_accuracy(with_clean)
    best = utility_loss(with_clean.iloc[:1].assign(decisions=with_clean.clean_decisions.iloc[0]), BEST_BASELINE)
    return {"accuracy": e.value, "accuracy_lo": e.lo, "accuracy_hi": e.hi, "utility_loss": 0.0,
            "utility_loss_lo": 0.0, "utility_loss_hi": 0.0, "utility_loss_best": best.value,
            "utility_loss_best_lo": best.lo, "utility_loss_best_hi": best.hi, "test_records": e.n}


def table2(utility: pd.DataFrame, mia: pd.DataFrame, targets=(1.0, 10.0)) -> pd.DataFrame:
    """Table 2 rows: per dataset the non-private head, then per target ε each method in registry order."""
    kinds = point_kinds(utility)  # also checks utility's columns and kinds
    check_frame(mia, MIA_COLUMNS, "mia.csv")
    datasets = list(dict.fromkeys(utility.dataset))
    if set(mia.dataset) != set(datasets):
        raise ValueError(f"utility.csv datasets {sorted(datasets)} differ from "
                         f"mia.csv datasets {sorted(set(mia.dataset))}")
    attach_kinds(mia, utility)  # every attacked release must be one utility.csv has
    shadow = paper_attack(mia)
    rows, utility = [], releases(utility)
    for dataset in datasets:
        measured, attacks = utility[utility.dataset == dataset], shadow[shadow.dataset == dataset]
        with_clean = measured[measured.clean_decisions.notna()]
        best_accuracy = baseline_accuracy(with_clean, BEST_BASELINE).value
        rows.append({"dataset": dataset, "method": "none", "label": "non-private head",
                     "eps_target": np.nan, "eps": np.nan, **_clean_stats(with_clean),
                     **_mia_stats(attacks[attacks.mechanism == "none"], f"the non-private head of {dataset}"),
                     "guarantee_kind": "none", "guarantee": "none: the head is released without noise",
                     "n_draws": 1})
        methods = sorted({release_method(m).name for m in measured.mechanism}, key=METHODS.index)
        for target in targets:
            for method in methods:
                own = measured[measured.mechanism == method]
                eps = nearest_eps(own.eps.unique(), target)
                draws = own[own.eps == eps]
                point = kinds[(kinds.dataset == dataset) & (kinds.mechanism == method) & (kinds.eps == eps)]
                rows.append({"dataset": dataset, "method": method, "label": release_method(method).label,
                             "eps_target": float(target), "eps": eps, **_utility_stats(draws, best_accuracy),
                             **_mia_stats(attacks[(attacks.mechanism == method) & (attacks.eps == eps)],
                                          f"{method} at ε = {eps:g} on {dataset}"),
                             "guarantee_kind": point.guarantee_kind.iloc[0], "guarantee": draws.guarantee.iloc[0],
                             "n_draws": len(draws)})
    return pd.DataFrame(rows, columns=TABLE2_COLUMNS)


def _ci(value: float, lo: float, hi: float) -> str:
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"


def markdown(table: pd.DataFrame) -> str:
    """Table 2 as a Markdown table, with what the intervals and the guarantee kinds mean."""
    lines = ["| dataset | method | target ε | ε used | test accuracy, 95 % CI | utility loss, 95 % CI "
             "| utility loss against the grid's best head, 95 % CI | test records "
             "| MIA accuracy (adaptive shadow MLP), 95 % CI | queried records | MIA AUC | guarantee kind | guarantee "
             "| draws |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|"]
    for r in table.itertuples(index=False):
        eps = "∞ (no noise)" if np.isnan(r.eps) else f"{r.eps:g}"
        target = "—" if np.isnan(r.eps_target) else f"{r.eps_target:g}"
        # "|d|" in an adjacency, "4|B|C" in a label: a bare | would split the cell
        guarantee, label = (str(text).replace("|", "\\|") for text in (r.guarantee, r.label))
        lines.append(f"| {r.dataset} | {label} | {target} | {eps} | {_ci(r.accuracy, r.accuracy_lo, r.accuracy_hi)} "
                     f"| {_ci(r.utility_loss, r.utility_loss_lo, r.utility_loss_hi)} "
                     f"| {_ci(r.utility_loss_best, r.utility_loss_best_lo, r.utility_loss_best_hi)} | {r.test_records} "
                     f"| {_ci(r.mia_accuracy, r.mia_accuracy_lo, r.mia_accuracy_hi)} | {r.mia_records} "
                     f"| {r.mia_auc_mean:.3f} | {r.guarantee_kind} | {guarantee} | {r.n_draws} |")
    return "\n".join(lines) + "\n\nEvery interval is over all draws of a release with the record as its independent " \
        "unit (the draws decide the same records: privssl.attacks.repeated, docs/claims.md); the records columns " \
        "count those units. Utility loss is measured against the non-private head on the same test records: the " \
        "released one (chosen for its noise by rule tune), and the tuning grid's best noise-free head. " \
        "ε used is the grid's ε nearest to the target (log distance). Guarantee kinds: " + KIND_NOTE + "\n"
