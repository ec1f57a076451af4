"""Intervals for proportions measured on the same records under repeated draws, and for
differences between two such proportions, with the record as the independent unit.

The design of every pooled estimate of the workflow: n records (test images, member and
non-member candidates) are each decided under R draws (noise draws of one release, independent
trainings, seeds), one decision c_ir ∈ {0, 1} per record and draw. The R·n decisions are not
independent: a record that one draw misclassifies the others tend to misclassify too (the
record effect), and one noise draw can spoil every record at once (the draw effect). Counting
R·n Bernoulli trials (the pooled interval) is right only when neither effect exists.

The model is the two-way crossed random-effects layout (records × draws, one decision a cell):

    c_ir = μ + α_i + β_r + e_ir,   Var(c̄) = σ²_α / n + σ²_β / R + σ²_e / (n R),

estimated by its ANOVA mean squares, E[MS_records] = σ²_e + R σ²_α, E[MS_draws] = σ²_e + n σ²_β,
E[MS_error] = σ²_e (Searle, Casella & McCulloch, *Variance Components*, 1992, §4.5), so that

    V̂ = MS_records / (n R)  +  max(MS_draws − MS_error, 0) / (n R)
        ╰── shrinks with more records ──╯ ╰──── shrinks only with more draws ────╯

Perfectly correlated draws (every draw decides every record alike) give MS_draws = MS_error = 0
and V̂ = p̂(1 − p̂)/(n − 1): the single-draw variance. Independent decisions give σ²_α = σ²_β = 0
and V̂ ≈ p̂(1 − p̂)/(n R): the pooled one. The estimand is the mean decision over the population
of records and the mechanism's randomness.

The interval of a proportion is Clopper–Pearson at the effective sample size n* = p̂(1 − p̂)/V̂,
shrunk by (z / t_df)² for the degrees of freedom of V̂ (Satterthwaite), the interval of Korn &
Graubard (1998, *Survey Methodology* 24:193) for clustered binary data; with one draw it is the
exact Clopper–Pearson interval of k of n. A difference of two proportions is a t interval on its
variance: paired when both are decided on the same records (the per-record differences carry
the record effect, which cancels in part), unpaired otherwise (the variances add).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from privssl.attacks.statistics import check_confidence, clopper_pearson

POWER = 0.8  # the power at which `n_for_power` sizes a replication


@dataclass(frozen=True)
class Estimate:
    """A proportion (or a difference of two) with its interval. `n` counts the independent units
    (records; per side for an unpaired difference), `draws` the repeated measurements of each;
    the variance splits into the part that shrinks as 1/n (`var_records`) and the part only more
    draws shrink (`var_draws`); `df` is the degrees of freedom of their sum. `record_terms`, where
    known: the estimate's per-record terms, one array per independent sample of records (members
    and non-members; the test records), whose variances over their sizes sum to `var_records`;
    what correlates it with an estimate on the same records after another training
    (`over_trainings`)."""

    value: float
    lo: float
    hi: float
    n: int
    draws: int
    var_records: float
    var_draws: float
    df: float
    record_terms: tuple[np.ndarray, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def se(self) -> float:
        return math.sqrt(self.var_records + self.var_draws)


def decision_matrix(decisions) -> np.ndarray:
    """(R, n) decisions as a bool array: one row per draw, one column per record, the records in
    the same order in every row."""
    matrix = np.asarray(decisions)
    if matrix.ndim == 1:
        matrix = matrix[None]
    if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[1] < 2:
        raise ValueError(f"decisions must be (draws, records) with at least 2 records, got shape {matrix.shape}")
    if matrix.dtype != bool:
        if not np.isin(matrix, (0, 1)).all():
            raise ValueError(f"decisions must be 0/1 (or bool), got values {np.unique(matrix)[:5]}")
        matrix = matrix.astype(bool)
    return matrix


def mean_squares(matrix: np.ndarray) -> tuple[float, float, float]:
    """(MS_records, MS_draws, MS_error) of the (R, n) layout, one observation a cell; the draws'
    and the error's are 0 for R = 1 (nothing to estimate them from)."""
    draws, records = matrix.shape
    cells = matrix.astype(float)
    grand = cells.mean()
    ss_records = draws * ((cells.mean(0) - grand) ** 2).sum()
    ss_draws = records * ((cells.mean(1) - grand) ** 2).sum()
    ss_total = ((cells - grand) ** 2).sum()
    ms_records = ss_records / (records - 1)
    if draws == 1:
        return ms_records, 0.0, 0.0
    ss_error = max(ss_total - ss_records - ss_draws, 0.0)  # ≥ 0 up to rounding
    return ms_records, ss_draws / (draws - 1), ss_error / ((draws - 1) * (records - 1))


def _components(matrix: np.ndarray) -> tuple[float, float, float]:
    """(var_records, var_draws, draws_df_term) of the mean of one (R, n) layout: the record part
    MS_records / (n R) on n − 1 df, the draw part max(MS_draws − MS_error, 0) / (n R), and that
    part's Satterthwaite term Σ (c_k MS_k)² / df_k (0 when the draw part is 0), which a sum of
    parts divides into its squared total to get its df."""
    draws, records = matrix.shape
    ms_records, ms_draws, ms_error = mean_squares(matrix)
    cells = draws * records
    var_draws = max(ms_draws - ms_error, 0.0) / cells
    if var_draws == 0:
        return ms_records / cells, 0.0, 0.0
    term = (ms_draws / cells) ** 2 / (draws - 1) + (ms_error / cells) ** 2 / ((draws - 1) * (records - 1))
    return ms_records / cells, var_draws, term


def _satterthwaite(total: float, terms: list[float], fallback: float) -> float:
    """Σ parts² / Σ (part² / df), the df of a sum of independent variance estimates."""
    denominator = sum(terms)  # > 0 only if some part is, and then the total is too
    return total ** 2 / denominator if denominator > 0 else fallback


def _t_ratio(df: float, confidence: float) -> float:
    """(z / t_df)² at the two-sided level: the Korn–Graubard shrinkage of the effective n."""
    upper = 0.5 + confidence / 2
    return (stats.norm.ppf(upper) / stats.t.ppf(upper, df)) ** 2


def proportion(decisions, confidence: float = 0.95) -> Estimate:
    """The mean decision of an (R, n) layout with its interval (module docstring): exact
    Clopper–Pearson for one draw; Korn–Graubard at the effective n for several, capped at the R·n
    decisions; a mean of exactly 0 or 1 (no variance to estimate) takes n* = n records."""
    confidence = check_confidence(confidence)
    matrix = decision_matrix(decisions)
    draws, records = matrix.shape
    k = int(matrix.sum())
    p = k / matrix.size
    var_records, var_draws, draws_term = _components(matrix)
    df = _satterthwaite(var_records + var_draws, [var_records ** 2 / (records - 1), draws_term], records - 1)
    if draws == 1:
        lo, hi = clopper_pearson(k, records, confidence)
        return Estimate(p, lo, hi, records, 1, var_records, 0.0, df)
    variance = var_records + var_draws
    if variance <= 0:  # every record decided alike in every draw (a mean of 0 or 1 among them)
        effective = float(records)
    else:
        effective = min(p * (1 - p) / variance, float(matrix.size))
    effective *= _t_ratio(df, confidence)
    lo, hi = _fractional_clopper_pearson(p * effective, effective, confidence)
    return Estimate(p, lo, hi, records, draws, var_records, var_draws, df)


def _fractional_clopper_pearson(k: float, n: float, confidence: float) -> tuple[float, float]:
    """Clopper–Pearson's beta quantiles at a non-integer count k of n (Korn & Graubard)."""
    alpha = 1 - confidence
    lo = stats.beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def _t_interval(value: float, var_records: float, var_draws: float, df: float,
                confidence: float) -> tuple[float, float]:
    half = stats.t.ppf(0.5 + confidence / 2, df) * math.sqrt(var_records + var_draws)
    return value - half, value + half


def paired_difference(a, b, confidence: float = 0.95, weight: float = 1.0) -> Estimate:
    """mean(a) − weight · mean(b) for two (R_a, n) and (R_b, n) layouts on the same n records
    (column j the same record in both), with independent draws: the per-record differences of the
    record means carry the record effects and each layout's within-record spread; each layout's
    draw effect adds its own term. (`weight`: e.g. 0.95 to ask whether a is within 5 % of b.)"""
    confidence = check_confidence(confidence)
    a, b = decision_matrix(a), decision_matrix(b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"paired layouts need the same records, got {a.shape[1]} and {b.shape[1]} columns")
    records = a.shape[1]
    per_record = a.mean(0) - weight * b.mean(0)
    var_records = per_record.var(ddof=1) / records
    (_, var_a, term_a), (_, var_b, term_b) = _components(a), _components(b)
    var_draws = var_a + weight ** 2 * var_b
    df = _satterthwaite(var_records + var_draws, [var_records ** 2 / (records - 1), term_a, weight ** 4 * term_b],
                        records - 1)
    value = float(a.mean() - weight * b.mean())
    lo, hi = _t_interval(value, var_records, var_draws, df, confidence)
    return Estimate(value, lo, hi, records, max(a.shape[0], b.shape[0]), var_records, var_draws, df,
                    record_terms=(per_record,))


def paired_ratio(a, b, confidence: float = 0.95) -> Estimate:
    """mean(a) / mean(b) on the same records (a release's accuracy over the clean head's), by the
    delta method: the ratio r moves as (mean(a) − r · mean(b)) / mean(b), the paired difference
    at weight r, scaled."""
    b_mean = decision_matrix(b).mean()
    if b_mean == 0:
        raise ValueError("the ratio's denominator layout has no positive decision")
    ratio = decision_matrix(a).mean() / b_mean
    linear = paired_difference(a, b, confidence, weight=ratio)  # its value is 0 at r by construction
    scale = 1 / b_mean
    half = (linear.hi - linear.lo) / 2 * scale
    return Estimate(float(ratio), float(ratio - half), float(ratio + half), linear.n, linear.draws,
                    linear.var_records * scale ** 2, linear.var_draws * scale ** 2, linear.df)


def unpaired_difference(a: Estimate, b: Estimate, confidence: float = 0.95) -> Estimate:
    """a − b for two estimates on different records: the variances add (Satterthwaite's df)."""
    confidence = check_confidence(confidence)
    var_records, var_draws = a.var_records + b.var_records, a.var_draws + b.var_draws
    df = _satterthwaite(var_records + var_draws, [(x.var_records + x.var_draws) ** 2 / x.df for x in (a, b)],
                        min(a.n, b.n) - 1)
    value = a.value - b.value
    lo, hi = _t_interval(value, var_records, var_draws, df, confidence)
    return Estimate(value, lo, hi, min(a.n, b.n), max(a.draws, b.draws), var_records, var_draws, df)


def versus_bound(a: Estimate, bound: float) -> Estimate:
    """a − a fixed reference (chance, a stated tolerance): a's interval shifted, its variance kept."""
    return Estimate(a.value - bound, a.lo - bound, a.hi - bound, a.n, a.draws, a.var_records, a.var_draws, a.df,
                    record_terms=a.record_terms)


def n_for_power(difference: Estimate, power: float = POWER, confidence: float = 0.95) -> float:
    """Records (per side for an unpaired difference) at which a replication at the same draws
    would find the observed difference at the two-sided level with probability `power`: the
    smallest n' with |d| ≥ (z_{1−α/2} + z_power) √(var_records · n / n' + var_draws). NaN when
    d = 0 (no n finds it); +inf when the draws' part alone is too large (more draws are needed,
    not more records)."""
    confidence = check_confidence(confidence)
    if not 0 < power < 1:
        raise ValueError(f"power must lie in (0, 1), got {power}")
    d = difference.value
    if not np.isfinite(d) or d == 0:
        return np.nan
    z = stats.norm.ppf(0.5 + confidence / 2) + stats.norm.ppf(power)
    room = (d / z) ** 2 - difference.var_draws
    if room <= 0:
        return np.inf
    return float(math.ceil(difference.n * difference.var_records / room))


def over_trainings(estimates: list[Estimate], confidence: float = 0.95) -> Estimate:
    """The mean of one quantity (an AUC, a difference of two) measured on the same records after
    each of R independent trainings, with its t interval: the records are the cases and the
    trainings the readers of Obuchowski & Rockette's model (1995, *Commun. Stat. Simul.* 24:285),

        θ̂_r = θ + τ_r + ε_r,   Var(ε_r) = σ²,  Cov(ε_r, ε_r') = Cov₂ (the same records, r ≠ r'),

    so that Var(θ̄) = (σ²_τ + σ² − Cov₂) / R + Cov₂ and E[s²] = σ²_τ + σ² − Cov₂ for the spread s²
    of the R values: Var̂(θ̄) = s² / R + max(Ĉov₂, 0) on Hillis's df (s² + R·max(Ĉov₂, 0))² /
    (s⁴ / (R − 1)) (Hillis, Obuchowski, Schartz & Berbaum 2005, *Stat. Med.* 24:1579; Hillis 2007,
    *Stat. Med.* 26:596), capped at the trainings' record df. Ĉov₂ is the mean over pairs of
    trainings of the covariance of their per-record terms (`Estimate.record_terms`: DeLong's
    placement values, per-record differences), the trainings' analogue of DeLong's variance. The
    spread s² holds the training's luck (its seed, its batches, its float sums) and the part of
    the records' error that differs between trainings (σ² − Cov₂, which also shrinks with more
    records); Cov₂ is the part they share. The records must be the same, in the same order, in
    every training (one splits file; here only the terms' shapes are checked, the Semi-Leak loader
    checks the scores' records by pool index, artefacts.semileak.attach_score_ranks). The estimates
    must be of distinct trainings: a copy would shrink s² and pass one training's own variance off
    as Ĉov₂. Equal numbers cannot tell a copy (two trainings that both separate members perfectly
    have the same placements), so the caller drops copies by the models' own fingerprints
    (reports.semileak_pooling.training_fingerprints).

    Of that variance, `var_draws` is the trainings' own effect, s² / R less the records' error that
    differs between trainings (σ̄² − Ĉov₂) / R with σ̄² the trainings' mean record variance, at
    least 0; the rest is `var_records`, what a replication on more records shrinks (n_for_power).

    Calibration, simulated (tests/test_repeated_intervals.py; a referee's 600–2000 runs of 500 +
    500 records): 0.93–0.96 at 3 trainings where the records' error dominates or the trainings'
    effect is large, but 0.91–0.93 where the trainings' effect is about DeLong's standard error
    (Hillis's df grows when s² happens to be small), and 0.875 at 2 trainings; 0.94–0.95 at 5.

    Estimates without record terms (known by an interval only: a bootstrap's, Newcombe's) fall back
    to a bound on the records' part: the mean of the per-training variances (Var(Σ X_r / R) ≤
    Σ Var(X_r) / R, equal when the trainings rank the records alike) plus s² / R, Satterthwaite's
    df; wide where the records' error dominates (coverage 1.00), no better calibrated than the
    above where the trainings' effect is about the records' error (0.91–0.92 at 3 trainings). One
    training is returned as it is (its own interval, e.g. a bootstrap's). The pooled estimate has
    no record terms: it is not pooled again."""
    confidence = check_confidence(confidence)
    if not estimates:
        raise ValueError("over_trainings needs the estimate of at least one training, got none")
    if len(estimates) == 1:
        return estimates[0]
    trainings = len(estimates)
    values = np.array([e.value for e in estimates], dtype=float)
    value = float(values.mean())
    var_trainings = float(values.var(ddof=1) / trainings)
    records_df = min(e.df for e in estimates)
    terms = _aligned_record_terms(estimates)
    if terms is None:
        var_records = float(np.mean([e.var_records + e.var_draws for e in estimates]))
        df = _satterthwaite(var_records + var_trainings,
                            [var_records ** 2 / records_df, var_trainings ** 2 / (trainings - 1)], records_df)
    else:
        covariance = max(_between_trainings_covariance(terms), 0.0)
        # Hillis's df, from the trainings' spread alone; no spread (copies of one training): the records'
        hillis = (_satterthwaite(covariance + var_trainings, [var_trainings ** 2 / (trainings - 1)], records_df)
                  if var_trainings > 0 else records_df)
        df = min(hillis, records_df)
        lo, hi = _t_interval(value, covariance, var_trainings, df, confidence)
        # what more records would shrink, for n_for_power: Cov₂ and the records' error that differs between
        # trainings (σ² − Cov₂) / R, which s² / R holds; the rest of s² / R is the trainings' own effect
        total = covariance + var_trainings
        own_error = float(np.mean([e.var_records + e.var_draws for e in estimates])) - covariance
        var_trainings = min(max(var_trainings - own_error / trainings, 0.0), total)
        return Estimate(value, lo, hi, min(e.n for e in estimates), trainings, total - var_trainings, var_trainings,
                        df)
    lo, hi = _t_interval(value, var_records, var_trainings, df, confidence)
    return Estimate(value, lo, hi, min(e.n for e in estimates), trainings, var_records, var_trainings, df)


def _aligned_record_terms(estimates: list[Estimate]) -> list[np.ndarray] | None:
    """Each sample of records' terms stacked over the trainings, (R, n_s) per sample; None unless
    every training has record terms of the same samples and sizes (then the records line up)."""
    if any(e.record_terms is None for e in estimates):
        return None
    shapes = {tuple(np.shape(t) for t in e.record_terms) for e in estimates}
    if len(shapes) != 1:
        raise ValueError(f"the trainings' record terms have different shapes {sorted(shapes)}: "
                         "they were not measured on the same records")
    return [np.stack([np.asarray(e.record_terms[s], dtype=float) for e in estimates])
            for s in range(len(estimates[0].record_terms))]


def _between_trainings_covariance(terms: list[np.ndarray]) -> float:
    """Ĉov₂: the covariance of two trainings' estimates through their shared records, averaged over
    the R (R − 1) ordered pairs: Σ_samples cov(terms_r, terms_r') / n_s, as DeLong's variance is
    Σ_samples var(terms_r) / n_s."""
    trainings = terms[0].shape[0]
    covariance = 0.0
    for stratum in terms:
        records = stratum.shape[1]
        centred = stratum - stratum.mean(1, keepdims=True)
        gram = centred @ centred.T / (records - 1)
        covariance += (gram.sum() - np.trace(gram)) / (trainings * (trainings - 1)) / records
    return float(covariance)
