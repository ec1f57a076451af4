"""The AUC of two attacks on the same members and non-members, compared by DeLong's paired test.

DeLong, DeLong & Clarke-Pearson (1988, *Biometrics* 44:837): the AUC is the mean of the members'
placement values V10(x) = P(Y < x) + ½ P(Y = x) over the non-member scores Y, and the mean of the
non-members' V01(y) = P(X > y) + ½ P(X = y) over the member scores X. Both are per-record
quantities, so the variance of a difference of two AUCs on the same records is that of the
per-record differences:

    Var(AUC_a − AUC_b) = Var(V10_a − V10_b) / m + Var(V01_a − V01_b) / n,

with m members and n non-members: the records are the independent units, and two attacks (or two
models) queried on the same records pair. Placement values follow from the average ranks of
each row's scores alone (privssl.artefacts.semileak.attach_score_ranks, from the attack rule's
scores.parquet).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from privssl.attacks.repeated import Estimate
from privssl.attacks.statistics import check_confidence


def placements(ranks, n_members: int) -> tuple[np.ndarray, np.ndarray]:
    """(V10 of each member, V01 of each non-member) from the average ranks of all records' scores,
    members first."""
    ranks = np.asarray(ranks, dtype=float)
    m, n = n_members, ranks.size - n_members
    if m < 2 or n < 2:
        raise ValueError(f"DeLong's variance needs at least 2 members and 2 non-members, got {m} and {n}")
    members, nonmembers = ranks[:m], ranks[m:]
    # a record's rank among all minus its rank within its own class counts the other class below it
    v10 = (members - stats.rankdata(members)) / n
    v01 = 1 - (nonmembers - stats.rankdata(nonmembers)) / m
    return v10, v01


def auc_from_ranks(ranks, n_members: int) -> float:
    return float(placements(ranks, n_members)[0].mean())


def auc_contrast(ranks: list, weights, n_members: int, confidence: float = 0.95) -> Estimate:
    """Σ_k w_k AUC_k of K score vectors on the same records (members first, in the same order; the
    weights summing to 0, a contrast), with DeLong's normal interval: the contrast of the placement
    values is a per-record quantity, so its variance is that of those per-record values over the
    m members plus over the n non-members. `n` counts the members."""
    confidence = check_confidence(confidence)
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 1 or weights.size != len(ranks) or weights.size < 2:
        raise ValueError(f"a contrast needs one weight per score vector (at least 2), got {weights.size} weights "
                         f"for {len(ranks)} vectors")
    if not math.isclose(weights.sum(), 0.0, abs_tol=1e-9 * np.abs(weights).sum()):
        raise ValueError(f"a contrast's weights sum to 0 (then the AUCs' common part cancels), got {weights.sum():g}")
    if len({len(r) for r in ranks}) != 1:
        raise ValueError(f"paired AUCs need the same records, got {sorted({len(r) for r in ranks})} scores")
    parts = [placements(r, n_members) for r in ranks]
    c10 = sum(w * v10 for w, (v10, _) in zip(weights, parts))
    c01 = sum(w * v01 for w, (_, v01) in zip(weights, parts))
    variance = c10.var(ddof=1) / c10.size + c01.var(ddof=1) / c01.size
    value = float(c10.mean())
    half = stats.norm.ppf(0.5 + confidence / 2) * math.sqrt(variance)
    return Estimate(value, value - half, value + half, int(n_members), 1, float(variance), 0.0, math.inf,
                    record_terms=(c10, c01))


def paired_auc_difference(ranks_a, ranks_b, n_members: int, confidence: float = 0.95) -> Estimate:
    """AUC_a − AUC_b of two score vectors on the same records (members first, in the same order),
    with DeLong's paired normal interval; `n` counts the members (= non-members in a balanced
    evaluation), the unit in which a replication is sized."""
    return auc_contrast([ranks_a, ranks_b], [1.0, -1.0], n_members, confidence)


def log_step_slope(ranks: list, steps, n_members: int, confidence: float = 0.95) -> Estimate:
    """The least-squares slope of the AUC against log2(step) over checkpoints scored on the same
    records (AUC gained per doubling of the training), with DeLong's interval: the slope is the
    contrast w_k = (x_k − x̄) / Σ (x_j − x̄)² of the checkpoints' AUCs, x = log2(step)."""
    x = np.log2(np.asarray(steps, dtype=float))
    if x.size < 2 or np.unique(x).size != x.size:
        raise ValueError(f"a slope needs at least 2 distinct steps, got {list(steps)}")
    centred = x - x.mean()
    return auc_contrast(ranks, centred / (centred ** 2).sum(), n_members, confidence)
