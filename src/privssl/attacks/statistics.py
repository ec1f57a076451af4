"""Membership-inference metrics with confidence intervals.

A single accuracy or AUC number hides how uncertain it is: with a few hundred queries the
difference between two defences is often inside the sampling noise. Every metric here comes
with an interval so that comparisons can be read honestly:

* counts (accuracy, TPR at a fixed FPR) get exact Clopper–Pearson binomial intervals;
* the AUC, which is not a binomial proportion, gets a stratified percentile bootstrap.

Conventions (as in `privssl.attacks.mia`): `scores` is a 1-D float array, higher = more likely a
member; `is_member` is a 1-D bool array of the same length containing both classes. NaN and
−inf scores (a saturated head) rank just below the lowest finite score, +inf just above the
highest, so that sklearn accepts them and ties are not invented between finite scores.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


_MAX_BOOT_ELEMENTS = 5_000_000  # resampled scores held in memory at once by bootstrap_auc


# --------------------------------------------------------------------------- validation


def check_confidence(confidence: float) -> float:
    """A confidence level must be a probability strictly between 0 and 1."""
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return confidence


def finite_scores(scores) -> np.ndarray:
    """1-D float scores with NaN/−inf just below the smallest finite score and +inf just above the largest.

    sklearn rejects infinities and NaN has no order; mapping them next to the finite range keeps
    their rank (NaN counts as 'least likely a member') without creating ties with finite scores.
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array, got shape {scores.shape}")
    finite = scores[np.isfinite(scores)]
    if finite.size:
        low, high = finite.min(), finite.max()
        floor = np.nextafter(low, -np.inf)
        ceiling = np.nextafter(high, np.inf) if np.isfinite(np.nextafter(high, np.inf)) else high
    else:
        floor, ceiling = -1.0, 1.0
    return np.nan_to_num(scores, nan=floor, neginf=floor, posinf=ceiling)


def check_members(is_member, n: int) -> np.ndarray:
    """Membership labels as a bool array of length n, with both members and non-members present."""
    labels = np.asarray(is_member)
    if labels.ndim != 1 or labels.size != n:
        raise ValueError(f"is_member must be a 1-D array of length {n} (as scores), got shape {labels.shape}")
    if labels.dtype != bool:
        if not np.isin(labels, (0, 1)).all():
            raise ValueError(f"is_member must be bool (or 0/1), got values {np.unique(labels)[:5]}")
        labels = labels.astype(bool)
    n_members = int(labels.sum())
    if n_members == 0 or n_members == n:
        raise ValueError(f"need both members and non-members, got {n_members} members out of {n}")
    return labels


def clean_inputs(scores, is_member) -> tuple[np.ndarray, np.ndarray]:
    """Validated (finite scores, bool labels) pair shared by every metric."""
    scores = finite_scores(scores)
    return scores, check_members(is_member, scores.size)


# --------------------------------------------------------------------------- binomial intervals


def _check_counts(k, n) -> tuple[np.ndarray, np.ndarray]:
    """Counts must be integers with 0 <= k <= n and n >= 1."""
    k, n = np.asarray(k), np.asarray(n)
    if not (np.all(k == np.round(k)) and np.all(n == np.round(n))):
        raise ValueError(f"k and n must be whole numbers, got k={k}, n={n}")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    return k.astype(float), n.astype(float)


def _as_output(value: np.ndarray):
    """Plain float for scalar input, array otherwise."""
    return float(value) if np.ndim(value) == 0 else value


def clopper_pearson(k, n, confidence: float = 0.95):
    """Exact two-sided binomial interval (lo, hi) for k successes out of n trials.

    Clopper–Pearson never undercovers, which matters for the tiny counts of low-FPR metrics
    where normal approximations break down. Vectorised: array k, n give arrays lo, hi.
    """
    alpha = 1.0 - check_confidence(confidence)
    k, n = _check_counts(k, n)
    # Guarded shape parameters: beta.ppf needs a, b > 0; the edge cases are set by np.where.
    lo = np.where(k > 0, stats.beta.ppf(alpha / 2, np.maximum(k, 1), n - k + 1), 0.0)
    hi = np.where(k < n, stats.beta.ppf(1 - alpha / 2, k + 1, np.maximum(n - k, 1)), 1.0)
    return _as_output(lo), _as_output(hi)


def clopper_pearson_upper(k, n, confidence: float = 0.95):
    """One-sided exact upper bound on a binomial rate (1 when k = n).

    The ε audits only need rates bounded from above, so spending the whole error budget on
    one side gives a tighter (yet still exact) bound than the two-sided interval.
    """
    confidence = check_confidence(confidence)
    k, n = _check_counts(k, n)
    return _as_output(np.where(k < n, stats.beta.ppf(confidence, k + 1, np.maximum(n - k, 1)), 1.0))


def accuracy_interval(correct, n, confidence: float = 0.95) -> tuple[float, float, float]:
    """(accuracy, lo, hi): each decision is a Bernoulli trial, so the interval is Clopper–Pearson."""
    lo, hi = clopper_pearson(correct, n, confidence)
    return float(correct) / float(n), lo, hi


# --------------------------------------------------------------------------- ROC


def threshold_counts(scores, is_member) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every threshold t (distinct scores and +inf, ascending) with TP(t), FP(t) of 'member iff score >= t'.

    Exact integer counts (not rates) so that binomial intervals and ε audits can use them.
    """
    scores, is_member = clean_inputs(scores, is_member)
    thresholds = np.concatenate([np.unique(scores), [np.inf]])
    member_sorted, nonmember_sorted = np.sort(scores[is_member]), np.sort(scores[~is_member])
    tp = member_sorted.size - np.searchsorted(member_sorted, thresholds, side="left")
    fp = nonmember_sorted.size - np.searchsorted(nonmember_sorted, thresholds, side="left")
    return thresholds, tp, fp


def roc(scores, is_member) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fpr, tpr, thresholds) at every threshold, starting at (0, 0).

    Intermediate points are kept: with tied scores a dropped 'collinear' point can be the best
    one at a low FPR.
    """
    from sklearn.metrics import roc_curve  # here only: sklearn's import costs every job a second

    scores, is_member = clean_inputs(scores, is_member)
    return roc_curve(is_member, scores, drop_intermediate=False)


def _check_fpr_level(fpr_level: float) -> float:
    """An FPR budget of 0 or 1 is degenerate (no attack / everything flagged)."""
    fpr_level = float(fpr_level)
    if not 0.0 < fpr_level < 1.0:
        raise ValueError(f"fpr_level must lie in (0, 1), got {fpr_level}")
    return fpr_level


def tpr_at_fpr(scores, is_member, fpr_level: float) -> dict[str, float]:
    """Largest TPR among thresholds with empirical FPR <= fpr_level, with a Clopper–Pearson interval.

    Carlini et al. (2022): the low-FPR regime shows whether a few members are exposed
    confidently, which average-case accuracy and AUC hide. `false_positives` is reported
    because at FPR 0.1 % on a few hundred non-members the budget is often zero false positives.
    """
    fpr_level = _check_fpr_level(fpr_level)
    thresholds, tp, fp = threshold_counts(scores, is_member)
    n_members, n_nonmembers = int(tp[0]), int(fp[0])
    allowed = fp / n_nonmembers <= fpr_level  # +inf is always allowed (FP = 0)
    # Highest TP first, fewest false positives among equal TP.
    best = np.lexsort((fp[allowed], -tp[allowed]))[0]
    tp_best, fp_best = int(tp[allowed][best]), int(fp[allowed][best])
    lo, hi = clopper_pearson(tp_best, n_members)
    return {"tpr": tp_best / n_members, "tpr_lo": lo, "tpr_hi": hi, "false_positives": fp_best,
            "fpr_level": fpr_level, "threshold": float(thresholds[allowed][best])}


# --------------------------------------------------------------------------- AUC


def _auc_from_ranks(ranks: np.ndarray, n_members: int, n_nonmembers: int) -> np.ndarray:
    """Mann–Whitney AUC from average ranks, members in the first n_members columns."""
    rank_sum = ranks[..., :n_members].sum(-1)
    return (rank_sum - n_members * (n_members + 1) / 2) / (n_members * n_nonmembers)


def auc(scores, is_member) -> float:
    """ROC AUC = P(member score > non-member score) + ½ P(tie), by the rank formula."""
    scores, is_member = clean_inputs(scores, is_member)
    ordered = np.concatenate([scores[is_member], scores[~is_member]])
    return float(_auc_from_ranks(stats.rankdata(ordered), int(is_member.sum()), int((~is_member).sum())))


def bootstrap_auc(scores, is_member, n_boot: int = 1000, seed: int = 0,
                  confidence: float = 0.95) -> tuple[float, float, float]:
    """(auc, lo, hi): the AUC with a stratified percentile-bootstrap interval.

    Members and non-members are resampled separately, as the experiment fixes how many of each
    are queried. A resample needs no re-ranking: with the non-members sorted once, the resampled
    non-members below (and tied with) a member are a cumulative count at that member's position,
    so the AUC is O(n) per resample, all resamples of a chunk at once.
    Chunks keep n_boot × n below ~5e6 elements so memory stays bounded for large query sets.
    """
    alpha = 1.0 - check_confidence(confidence)
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot}")
    scores, is_member = clean_inputs(scores, is_member)
    members, nonmembers = scores[is_member], np.sort(scores[~is_member])
    n_members, n_nonmembers = members.size, nonmembers.size
    point = float(_auc_from_ranks(stats.rankdata(np.concatenate([members, nonmembers])), n_members, n_nonmembers))
    below = np.searchsorted(nonmembers, members, side="left")  # non-members strictly below each member
    below_or_tied = np.searchsorted(nonmembers, members, side="right")
    # One stream per class: the draws then do not depend on the chunk size.
    member_rng, nonmember_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    chunk = max(1, _MAX_BOOT_ELEMENTS // scores.size)
    bins = n_nonmembers + 1
    aucs = []
    for start in range(0, int(n_boot), chunk):
        size = min(chunk, int(n_boot) - start)
        drawn_members = member_rng.integers(0, n_members, (size, n_members))
        nonmember_weight = _row_counts(nonmember_rng.integers(0, n_nonmembers, (size, n_nonmembers)), n_nonmembers)
        cumulative = np.concatenate([np.zeros((size, 1)), np.cumsum(nonmember_weight, axis=1)], axis=1)
        # Σ over resampled members of (non-members below + ½ tied) = ½ Σ_k C_k (#members with
        # `below` = k + #members with `below_or_tied` = k): count members per bin, no gather.
        wins = 0.5 * (cumulative * (_row_counts(below[drawn_members], bins)
                                    + _row_counts(below_or_tied[drawn_members], bins))).sum(1)
        aucs.append(wins / (n_members * n_nonmembers))
    lo, hi = np.quantile(np.concatenate(aucs), [alpha / 2, 1 - alpha / 2])
    return point, float(lo), float(hi)


def _row_counts(values: np.ndarray, n: int) -> np.ndarray:
    """(rows, n) counts of each value 0..n−1 in each row of `values` (rows, k)."""
    offsets = np.arange(values.shape[0])[:, None] * n
    return np.bincount((values + offsets).ravel(), minlength=values.shape[0] * n).reshape(values.shape[0], n)


# --------------------------------------------------------------------------- summary


def fpr_label(fpr_level: float) -> str:
    """Key fragment for an FPR level: 0.001 -> '0.1pct', 0.01 -> '1pct', 0.1 -> '10pct'."""
    # 10 significant digits: 0.07 * 100 = 7.000000000000001 is '7', and levels as small as 1e-13
    # keep their own keys (rounding to 10 decimals made every level below 5e-13 '0pct')
    return f"{_check_fpr_level(fpr_level) * 100:.10g}pct"


def membership_metrics(scores, is_member, threshold: float, fpr_levels=(0.001, 0.01), n_boot: int = 1000,
                       seed: int = 0) -> dict[str, float]:
    """One flat dict of every metric with its 95 % interval, ready for a results table row.

    accuracy is that of 'member iff score >= threshold' (the attacker's threshold, fitted on
    shadow data), with a Clopper–Pearson interval over all decisions. The callers keep each
    record's call beside its score (the per-record scores' called_member), from which the reports
    cluster the draws of one release by record and pair releases queried on the same records.
    """
    if np.isnan(threshold):
        raise ValueError("threshold must be a number (±inf allowed), got nan")
    scores, is_member = clean_inputs(scores, is_member)
    n = scores.size
    right = (scores >= threshold) == is_member
    correct = int(right.sum())
    accuracy, accuracy_lo, accuracy_hi = accuracy_interval(correct, n)
    auc_value, auc_lo, auc_hi = bootstrap_auc(scores, is_member, n_boot=n_boot, seed=seed)
    metrics = {"n_members": int(is_member.sum()), "n_nonmembers": int(n - is_member.sum()),
               "accuracy": accuracy, "accuracy_lo": accuracy_lo, "accuracy_hi": accuracy_hi,
               "auc": auc_value, "auc_lo": auc_lo, "auc_hi": auc_hi}
    for level in fpr_levels:
        label = fpr_label(level)
        result = tpr_at_fpr(scores, is_member, level)
        metrics |= {f"tpr_at_{label}_fpr": result["tpr"], f"tpr_at_{label}_fpr_lo": result["tpr_lo"],
                    f"tpr_at_{label}_fpr_hi": result["tpr_hi"], f"fp_at_{label}_fpr": result["false_positives"]}
    return metrics


# --------------------------------------------------------------------------- differences of two estimates


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for k of n (no continuity correction), the building block of Newcombe's."""
    z = stats.norm.ppf(0.5 + confidence / 2)
    p = k / n
    centre, scale = p + z * z / (2 * n), 1 + z * z / n
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / scale, (centre + half) / scale


def newcombe_difference(k1: int, n1: int, k2: int, n2: int, confidence: float = 0.95) -> tuple[float, float, float]:
    """(p1 − p2, lo, hi) for two independent proportions by Newcombe's hybrid score interval (Newcombe
    1998, Statist. Med. 17:873, method 10): each proportion's Wilson interval, combined as a square
    root of squared distances. Unlike the Wald interval it stays within [−1, 1] and keeps its
    coverage near 0 and 1 (train accuracies of 1 are common)."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1, confidence)
    l2, u2 = wilson_interval(k2, n2, confidence)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
