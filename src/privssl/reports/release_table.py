"""Table 2: what each release method gives at a few target budgets ε, from the tidy CSVs only.

Per dataset and method, at each target ε, the point of the method's own ε grid nearest to the
target in log distance (DP-SGD may lack some ε of the grid): test accuracy (mean ± std over noise
draws), mean utility loss, the paper's shadow-MLP membership-inference accuracy in its adaptive form, pooled over
draws with its Clopper–Pearson interval, and
AUC, and the exact claim the release supports (`guarantee_kind`, `guarantee`). The non-private
head is one row per dataset, method `none`.

The figures use the same checks and the same (dataset, mechanism, ε) -> guarantee_kind join:
mia.csv carries no kind, so it takes the kind of the utility rows of the same release.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from privssl.attacks.statistics import accuracy_interval
from privssl.release.methods import GUARANTEE_KINDS, METHODS, release_method

PAPER_ATTACK = "shadow_mlp"
POINT = ["dataset", "mechanism", "eps"]
UTILITY_COLUMNS = POINT + ["repeat", "guarantee_kind", "guarantee", "clean_accuracy", "accuracy", "utility_loss"]
MIA_COLUMNS = POINT + ["repeat", "attack", "adaptive", "accuracy", "auc", "n_members", "n_nonmembers"]
TABLE2_COLUMNS = ["dataset", "method", "label", "eps_target", "eps", "accuracy_mean", "accuracy_std",
                  "utility_loss_mean", "mia_accuracy", "mia_accuracy_lo", "mia_accuracy_hi", "mia_decisions",
                  "mia_auc_mean",
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


def pooled_accuracy(rows: pd.DataFrame) -> dict:
    """Accuracy over every decision of the rows (draws of one release) with its Clopper–Pearson
    95 % interval and the number of decisions behind it."""
    decisions = (rows.n_members + rows.n_nonmembers).to_numpy()
    correct = int(round(float((rows.accuracy.to_numpy() * decisions).sum())))
    accuracy, lo, hi = accuracy_interval(correct, int(decisions.sum()))
    return {"accuracy": accuracy, "lo": lo, "hi": hi, "decisions": int(decisions.sum())}


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
    pooled = pooled_accuracy(rows)
    return {"mia_accuracy": pooled["accuracy"], "mia_accuracy_lo": pooled["lo"], "mia_accuracy_hi": pooled["hi"],
            "mia_decisions": pooled["decisions"], "mia_auc_mean": rows.auc.mean()}


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
        rows.append({"dataset": dataset, "method": "none", "label": "non-private head",
                     "eps_target": np.nan, "eps": np.nan,
                     # The clean head is one head: its accuracy has no spread over draws.
                     "accuracy_mean": measured.clean_accuracy.mean(), "accuracy_std": np.nan,
                     "utility_loss_mean": 0.0,
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
                             "eps_target": float(target), "eps": eps,
                             "accuracy_mean": draws.accuracy.mean(), "accuracy_std": draws.accuracy.std(),
                             "utility_loss_mean": draws.utility_loss.mean(),
                             **_mia_stats(attacks[(attacks.mechanism == method) & (attacks.eps == eps)],
                                          f"{method} at ε = {eps:g} on {dataset}"),
                             "guarantee_kind": point.guarantee_kind.iloc[0], "guarantee": draws.guarantee.iloc[0],
                             "n_draws": len(draws)})
    return pd.DataFrame(rows, columns=TABLE2_COLUMNS)


def _pm(mean: float, std: float) -> str:
    return f"{mean:.3f}" if np.isnan(std) else f"{mean:.3f} ± {std:.3f}"


def markdown(table: pd.DataFrame) -> str:
    """Table 2 as a Markdown table, with what the guarantee kinds mean."""
    lines = ["| dataset | method | target ε | ε used | test accuracy | utility loss | MIA accuracy (adaptive shadow "
             "MLP), 95 % CI [decisions] | MIA AUC | guarantee kind | guarantee | draws |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|"]
    for r in table.itertuples(index=False):
        eps = "∞ (no noise)" if np.isnan(r.eps) else f"{r.eps:g}"
        target = "—" if np.isnan(r.eps_target) else f"{r.eps_target:g}"
        # "|d|" in an adjacency, "4|B|C" in a label: a bare | would split the cell
        guarantee, label = (str(text).replace("|", "\\|") for text in (r.guarantee, r.label))
        lines.append(f"| {r.dataset} | {label} | {target} | {eps} | {_pm(r.accuracy_mean, r.accuracy_std)} "
                     f"| {r.utility_loss_mean:.3f} | {r.mia_accuracy:.3f} [{r.mia_accuracy_lo:.3f}, "
                     f"{r.mia_accuracy_hi:.3f}] ({r.mia_decisions}) "
                     f"| {r.mia_auc_mean:.3f} | {r.guarantee_kind} | {guarantee} | {r.n_draws} |")
    return "\n".join(lines) + "\n\nAccuracy: means ± std over noise draws; MIA accuracy: over every decision of " \
        "every draw, with its Clopper–Pearson interval; ε used is the grid's ε nearest to the target " \
        "(log distance). Guarantee kinds: " + KIND_NOTE + "\n"
