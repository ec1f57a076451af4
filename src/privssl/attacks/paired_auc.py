"""The AUC of two attacks on the same members and non-members, compared by DeLong's paired test.

DeLong, DeLong & Clarke-Pearson (1988, *Biometrics* 44:837): the AUC is the mean of the members'
placement values V10(x) = P(Y < x) + ½ P(Y = x) over the non-member scores Y, and the mean of the
non-members' V01(y) = P(X > y) + ½ P(X = y) over the member scores X. Both are per-record
quantities, so the variance of a difference of two AUCs on the same records is that of the
per-record differences:

    Var(AUC_a − AUC_b) = Var(V10_a − V10_b) / m + Var(V01_a − V01_b) / n,

with m members and n non-members: the records are the independent units, and two attacks (or two
models) queried on the same records pair. Placement values follow from the average ranks alone,
which is what the attack rules keep of each row's scores (privssl.io.pack_ranks).
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


def paired_auc_difference(ranks_a, ranks_b, n_members: int, confidence: float = 0.95) -> Estimate:
    """AUC_a − AUC_b of two score vectors on the same records (members first, in the same order),
    with DeLong's paired normal interval; `n` counts the members (= non-members in a balanced
    evaluation), the unit in which a replication is sized."""
    confidence = check_confidence(confidence)
    (a10, a01), (b10, b01) = placements(ranks_a, n_members), placements(ranks_b, n_members)
    if a01.size != b01.size:
        raise ValueError(f"paired AUCs need the same records, got {len(ranks_a)} and {len(ranks_b)} scores")
    d10, d01 = a10 - b10, a01 - b01
    variance = d10.var(ddof=1) / d10.size + d01.var(ddof=1) / d01.size
    value = float(d10.mean())
    half = stats.norm.ppf(0.5 + confidence / 2) * math.sqrt(variance)
    return Estimate(value, value - half, value + half, int(n_members), 1, float(variance), 0.0, math.inf)
