"""Membership metrics when every record is decided several times: LiRA's T target heads, each
trained on a random half of the same candidate pool, decide every candidate once each.

The T × pool decisions are not independent trials: a candidate that is easy to tell in one target
is easy in the others. Each metric's interval therefore takes the candidate record as its
independent unit (docs/claims.md, "Intervals: the record is the unit"):

* accuracy: the crossed records × targets model of privssl.attacks.repeated (a target is a draw);
* AUC: a cluster bootstrap that resamples candidates with all their decisions (percentile
  interval, conditional on the T targets);
* TPR at a false-positive rate: the ratio of flagged to member decisions with its record-clustered
  (linearised) variance, as a Clopper–Pearson interval at the effective number of decisions
  (Korn & Graubard 1998).

The counts of member and non-member decisions stay beside them: the false positives at a low FPR
are counted in decisions.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse, stats

from privssl.attacks.repeated import proportion
from privssl.attacks.statistics import check_confidence, clean_inputs, fpr_label, tpr_at_fpr

_MAX_BOOT_ELEMENTS = 5_000_000  # weights held in memory at once by the cluster bootstrap


def _layout(scores, is_member) -> tuple[np.ndarray, np.ndarray]:
    scores, is_member = np.asarray(scores, float), np.asarray(is_member)
    if scores.ndim != 2 or scores.shape != is_member.shape or scores.shape[1] < 2:
        raise ValueError(f"scores and is_member must be (targets, records) of one shape with at least 2 records, "
                         f"got {scores.shape} and {is_member.shape}")
    flat_scores, flat_member = clean_inputs(scores.reshape(-1), is_member.reshape(-1))
    return flat_scores.reshape(scores.shape), flat_member.reshape(scores.shape)


def cluster_bootstrap_auc(scores, is_member, n_boot: int = 1000, seed: int = 0,
                          confidence: float = 0.95) -> tuple[float, float, float]:
    """(AUC, lo, hi) of (targets, records) scores: the AUC of all decisions, with a percentile
    interval from resampling the records (columns) with replacement, each with all its decisions.
    A resample weighs every decision by its record's count; as in statistics.bootstrap_auc, the
    non-members are sorted once, so a resample costs one cumulative sum."""
    alpha = 1.0 - check_confidence(confidence)
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot}")
    scores, is_member = _layout(scores, is_member)
    records = scores.shape[1]
    record_of = np.broadcast_to(np.arange(records), scores.shape)
    member_records = record_of[is_member]
    order = np.argsort(scores[~is_member], kind="stable")
    nonmember_scores, nonmember_records = scores[~is_member][order], record_of[~is_member][order]
    below = np.searchsorted(nonmember_scores, scores[is_member], side="left")
    below_or_tied = np.searchsorted(nonmember_scores, scores[is_member], side="right")
    # A resample's AUC numerator is ½ Σ_m w[r(m)] (C(below_m) + C(below_or_tied_m)), C(k) the
    # resampled weight of the k lowest non-member decisions. The members are binned once by those
    # two ends (a sparse bins × records count matrix), so a chunk's numerators are one sparse
    # product and one dot per resample, with every array laid out (positions, resamples) so that
    # the gather and the cumulative sum run along contiguous rows: 0.20 s for 1000 resamples of the
    # preset's 8 × 4000 decisions, 0.34 s one resample per row with gathers. Every term is a whole
    # number below 2^53, so the sums are exact in any order: the same values as before, bit for bit.
    bins = len(nonmember_scores) + 1
    member_bins = sparse.csr_matrix(
        (np.ones(2 * len(member_records)), (np.concatenate([below, below_or_tied]), np.tile(member_records, 2))),
        shape=(bins, records))
    member_count = np.bincount(member_records, minlength=records).astype(float)
    nonmember_count = np.bincount(nonmember_records, minlength=records).astype(float)

    def auc_of(by_record: np.ndarray) -> np.ndarray:
        """AUC per column of record weights (records, B)."""
        cumulative = np.zeros((bins, by_record.shape[1]))
        np.cumsum(np.take(by_record, nonmember_records, axis=0), axis=0, out=cumulative[1:])
        wins = 0.5 * np.einsum("kb,kb->b", cumulative, member_bins @ by_record)
        return wins / ((member_count @ by_record) * (nonmember_count @ by_record))

    point = float(auc_of(np.ones((records, 1)))[0])
    rng = np.random.default_rng(seed)
    chunk = max(1, _MAX_BOOT_ELEMENTS // scores.size)
    aucs = []
    for start in range(0, int(n_boot), chunk):
        size = min(chunk, int(n_boot) - start)
        aucs.append(auc_of(_column_counts(rng.integers(0, records, (size, records)), records)))
    values = np.concatenate(aucs)
    lo, hi = np.nanquantile(values, [alpha / 2, 1 - alpha / 2])  # a resample without a member is NaN
    return point, float(lo), float(hi)


def _column_counts(draws: np.ndarray, n: int) -> np.ndarray:
    """(n, resamples) float counts of each value 0..n−1 in each row of `draws` (resamples, k): the
    transpose of statistics._row_counts, built in the layout auc_of reads."""
    resamples = draws.shape[0]
    return np.bincount((draws * resamples + np.arange(resamples)[:, None]).ravel(),
                       minlength=n * resamples).reshape(n, resamples).astype(float)


def clustered_rate(hits, members, confidence: float = 0.95) -> tuple[float, float, float]:
    """(rate, lo, hi) of Σ hits / Σ members over records (per record: its flagged member decisions
    and its member decisions): the ratio's record-clustered variance by linearisation, as a
    Clopper–Pearson interval at the effective number of decisions n* = rate (1 − rate) / V, at
    most the member decisions; a variance of 0 (a rate of 0 or 1, or every record flagged in the
    same proportion) takes n* = the records with a member decision."""
    confidence = check_confidence(confidence)
    hits, members = np.asarray(hits, float), np.asarray(members, float)
    if hits.shape != members.shape or np.any(hits < 0) or np.any(hits > members):
        raise ValueError(f"hits must be per record between 0 and its member decisions, got hits {hits} "
                         f"and members {members}")
    present = members > 0
    hits, members = hits[present], members[present]
    if len(members) < 2:
        raise ValueError(f"a clustered rate needs member decisions of at least 2 records, got {len(members)}")
    total = members.sum()
    rate = hits.sum() / total
    k = len(members)
    variance = ((hits - rate * members) ** 2).sum() / total ** 2 * k / (k - 1)
    # a rate of 0 or 1 has no variance (every record's hits are 0, or all its member decisions)
    effective = float(k) if variance <= 0 else min(rate * (1 - rate) / variance, total)
    alpha = 1 - confidence
    count = rate * effective
    lo = stats.beta.ppf(alpha / 2, count, effective - count + 1) if count > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, count + 1, effective - count) if count < effective else 1.0
    return float(rate), float(lo), float(hi)


def clustered_membership_metrics(scores, is_member, threshold: float, fpr_levels=(0.001, 0.01),
                                 n_boot: int = 1000, seed: int = 0) -> dict:
    """statistics.membership_metrics for (targets, records) decisions, every interval with the
    record as its unit (module docstring); `records` and `draws` (targets) beside the counts of
    member and non-member decisions."""
    if np.isnan(threshold):
        raise ValueError("threshold must be a number (±inf allowed), got nan")
    scores, is_member = _layout(scores, is_member)
    accuracy = proportion((scores >= threshold) == is_member)
    auc, auc_lo, auc_hi = cluster_bootstrap_auc(scores, is_member, n_boot, seed)
    metrics = {"n_members": int(is_member.sum()), "n_nonmembers": int((~is_member).sum()),
               "records": scores.shape[1], "draws": scores.shape[0], "accuracy": accuracy.value,
               "accuracy_lo": accuracy.lo, "accuracy_hi": accuracy.hi, "auc": auc, "auc_lo": auc_lo, "auc_hi": auc_hi}
    for level in fpr_levels:
        label = fpr_label(level)
        # the threshold of the TPR at this FPR, over all decisions; its interval clustered by record
        result = tpr_at_fpr(scores.reshape(-1), is_member.reshape(-1), level)
        flagged = scores >= result["threshold"]
        tpr, lo, hi = clustered_rate((flagged & is_member).sum(0), is_member.sum(0))
        metrics |= {f"tpr_at_{label}_fpr": tpr, f"tpr_at_{label}_fpr_lo": lo, f"tpr_at_{label}_fpr_hi": hi,
                    f"fp_at_{label}_fpr": result["false_positives"]}
    return metrics
