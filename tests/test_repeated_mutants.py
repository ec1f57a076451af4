"""Every field of privssl.attacks.repeated's estimates against an independent computation of the
crossed records × draws model (module docstring): the mean squares from the residuals of the
two-way layout (not from differences of sums of squares), the variance parts and their
Satterthwaite degrees of freedom written out term by term, and the Korn–Graubard interval from
scipy's beta quantiles. The inputs are small (a dozen records, three draws) and carry a draw
effect, so that each term of the degrees of freedom moves the interval; the edge cases are the
layouts where a term vanishes: one draw, a mean of 0 or 1, a layout whose records and draws all
have the same mean."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import special, stats

from privssl.attacks.repeated import (
    Estimate,
    decision_matrix,
    mean_squares,
    n_for_power,
    paired_difference,
    paired_ratio,
    proportion,
    unpaired_difference,
    versus_bound,
)

FIELDS = ("value", "lo", "hi", "n", "draws", "var_records", "var_draws", "df")


# --------------------------------------------------------------------------------- the reference

def anova(x: np.ndarray) -> tuple[float, float, float]:
    """(MS_records, MS_draws, MS_error) of an (R, n) layout, the error from the residuals
    x_ir − x̄_·i − x̄_r· + x̄ (Searle et al. 1992, §4.5); 0 for the draws' and error's at R = 1."""
    draws, records = x.shape
    grand, record_means, draw_means = x.mean(), x.mean(0), x.mean(1)
    ms_records = draws * np.sum((record_means - grand) ** 2) / (records - 1)
    if draws == 1:
        return ms_records, 0.0, 0.0
    ms_draws = records * np.sum((draw_means - grand) ** 2) / (draws - 1)
    residuals = x - record_means[None, :] - draw_means[:, None] + grand
    return ms_records, ms_draws, np.sum(residuals ** 2) / ((draws - 1) * (records - 1))


def draw_part(x: np.ndarray) -> tuple[float, float]:
    """(var_draws, its Satterthwaite term): max(MS_d − MS_e, 0) / (nR), and (MS_d/nR)² / (R − 1) +
    (MS_e/nR)² / ((R − 1)(n − 1)) where that part is positive, else 0."""
    draws, records = x.shape
    _, ms_d, ms_e = anova(x)
    cells = draws * records
    var = max(ms_d - ms_e, 0.0) / cells
    if var <= 0:
        return 0.0, 0.0
    return var, (ms_d / cells) ** 2 / (draws - 1) + (ms_e / cells) ** 2 / ((draws - 1) * (records - 1))


def satterthwaite(total, terms, fallback):
    denominator = sum(terms)
    return total ** 2 / denominator if total > 0 and denominator > 0 else fallback


def t_half(df, variance, confidence):
    return stats.t.ppf(0.5 + confidence / 2, df) * math.sqrt(variance)


def ref_proportion(x, confidence=0.95) -> tuple:
    x = np.asarray(x, float)
    draws, records = x.shape
    p = x.mean()
    ms_r, _, _ = anova(x)
    var_r = ms_r / x.size
    var_d, term = draw_part(x)
    df = satterthwaite(var_r + var_d, [var_r ** 2 / (records - 1), term], records - 1)
    q = 0.5 + confidence / 2
    if draws == 1:
        k = int(x.sum())
        lo = stats.beta.ppf(1 - q, k, records - k + 1) if k > 0 else 0.0
        hi = stats.beta.ppf(q, k + 1, records - k) if k < records else 1.0
        return p, lo, hi, records, 1, var_r, 0.0, df
    variance = var_r + var_d
    effective = records if p in (0, 1) or variance <= 0 else min(p * (1 - p) / variance, x.size)
    effective *= (stats.norm.ppf(q) / stats.t.ppf(q, df)) ** 2
    k = p * effective
    lo = stats.beta.ppf(1 - q, k, effective - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(q, k + 1, effective - k) if k < effective else 1.0
    return p, lo, hi, records, draws, var_r, var_d, df


def ref_paired(a, b, confidence=0.95, weight=1.0) -> tuple:
    a, b = np.asarray(a, float), np.asarray(b, float)
    records = a.shape[1]
    per_record = a.mean(0) - weight * b.mean(0)
    var_r = np.sum((per_record - per_record.mean()) ** 2) / (records - 1) / records
    (var_a, term_a), (var_b, term_b) = draw_part(a), draw_part(b)
    var_d = var_a + weight ** 2 * var_b
    df = satterthwaite(var_r + var_d, [var_r ** 2 / (records - 1), term_a, weight ** 4 * term_b], records - 1)
    value = a.mean() - weight * b.mean()
    half = t_half(df, var_r + var_d, confidence)
    return value, value - half, value + half, records, max(len(a), len(b)), var_r, var_d, df


def ref_ratio(a, b, confidence=0.95) -> tuple:
    """Delta method: r = ā / b̄ moves as (ā − r b̄) / b̄, the paired difference at weight r over b̄."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    r = a.mean() / b.mean()
    value, lo, hi, n, draws, var_r, var_d, df = ref_paired(a, b, confidence, r)
    half = (hi - value) / b.mean()
    return r, r - half, r + half, n, draws, var_r / b.mean() ** 2, var_d / b.mean() ** 2, df


def ref_unpaired(a: Estimate, b: Estimate, confidence=0.95) -> tuple:
    var_r, var_d = a.var_records + b.var_records, a.var_draws + b.var_draws
    df = satterthwaite(var_r + var_d, [(e.var_records + e.var_draws) ** 2 / e.df for e in (a, b)],
                       min(a.n, b.n) - 1)
    value = a.value - b.value
    half = t_half(df, var_r + var_d, confidence)
    return value, value - half, value + half, min(a.n, b.n), max(a.draws, b.draws), var_r, var_d, df


def assert_estimate(got: Estimate, expected: tuple, rel=1e-9):
    assert isinstance(got, Estimate)
    for name, want in zip(FIELDS, expected):
        have = getattr(got, name)
        if name in ("n", "draws"):
            assert have == want and isinstance(have, (int, np.integer)), (name, have, want)
        else:
            assert have == pytest.approx(want, rel=rel, abs=1e-15), (name, have, want)


def crossed(seed, draws, records, mu=0.4, record_sd=1.0, draw_sd=1.0):
    """(draws, records) decisions of the logit model c ~ Bernoulli(σ(μ + α_i + β_r))."""
    rng = np.random.default_rng(seed)
    alpha, beta = rng.normal(0, record_sd, records), rng.normal(0, draw_sd, draws)
    return rng.random((draws, records)) < special.expit(mu + alpha[None] + beta[:, None])


# a draw effect (MS_draws well above MS_error) on 12 records × 3 draws, and another layout on the same records
A = np.array([[1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1],
              [0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0],
              [1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 0, 1]], dtype=bool)
B = np.array([[1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0],
              [1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0]], dtype=bool)


def test_the_layouts_have_the_terms_the_checks_need():
    ms_r, ms_d, ms_e = anova(A.astype(float))
    assert ms_d > 3 * ms_e > 0 and ms_r > 0
    ms_r, ms_d, ms_e = anova(B.astype(float))
    assert ms_d > ms_e > 0
    # by hand: A's draws are right on 10, 4 and 8 of 12 records; grand mean 22/36
    assert A.sum(1).tolist() == [10, 4, 8]
    assert anova(A.astype(float))[1] == pytest.approx(12 * ((10 / 12 - 22 / 36) ** 2 + (4 / 12 - 22 / 36) ** 2
                                                            + (8 / 12 - 22 / 36) ** 2) / 2)


# --------------------------------------------------------------------------------- the layout and its mean squares

def test_mean_squares_of_a_layout_are_the_residual_anova():
    for x in (A, B, crossed(1, 4, 9)):
        assert mean_squares(x) == pytest.approx(anova(x.astype(float)), rel=1e-12, abs=1e-15)


def test_one_draw_has_no_draw_or_error_mean_square():
    row = np.array([[1, 0, 1, 1, 0]], dtype=bool)
    ms_r, ms_d, ms_e = mean_squares(row)
    assert ms_r == pytest.approx(np.var([1, 0, 1, 1, 0], ddof=1)) and (ms_d, ms_e) == (0.0, 0.0)


def test_identical_draws_have_an_error_mean_square_of_exactly_zero():
    """Every draw repeats one: no interaction, so MS_error is 0 (not floored above it)."""
    x = np.tile([1, 0, 1, 1, 0, 0, 1], (3, 1)).astype(bool)
    ms_r, ms_d, ms_e = mean_squares(x)
    assert (ms_d, ms_e) == pytest.approx((0.0, 0.0), abs=1e-12)
    assert ms_r == pytest.approx(3 * np.var([1, 0, 1, 1, 0, 0, 1], ddof=1))
    # a small interaction: SS_error below 1 is kept as it is
    y = np.array([[1, 1, 0, 0, 1, 0, 1, 1], [1, 1, 0, 0, 1, 0, 1, 0]], dtype=bool)
    assert mean_squares(y)[2] == pytest.approx(anova(y.astype(float))[2]) and 0 < mean_squares(y)[2] < 0.1


def test_decision_matrix_accepts_one_draw_as_a_vector_and_refuses_other_shapes():
    row = np.array([1, 0, 1], dtype=bool)
    assert decision_matrix(row).shape == (1, 3)
    assert decision_matrix(np.ones((3, 2), int)).shape == (3, 2)  # two records are enough
    assert decision_matrix(np.ones((3, 2), int)).dtype == bool
    assert_estimate(proportion(np.array([1, 0, 1, 1])), ref_proportion([[1, 0, 1, 1]]))
    for shape, shown in (((3, 1), (3, 1)), ((0, 5), (0, 5)), ((2, 3, 4), (2, 3, 4)), ((1,), (1, 1))):
        with pytest.raises(ValueError, match=r"^decisions must be \(draws, records\) with at least 2 records, got "
                                             rf"shape {re.escape(str(shown))}$"):
            decision_matrix(np.ones(shape, bool))


def test_decision_matrix_reads_0_1_and_refuses_other_values_naming_them():
    got = decision_matrix(np.array([[0, 1, 1], [1, 0, 0]]))
    assert got.dtype == bool and got.tolist() == [[False, True, True], [True, False, False]]
    assert decision_matrix(np.array([[0.0, 1.0]])).tolist() == [[False, True]]
    with pytest.raises(ValueError, match=r"^decisions must be 0/1 \(or bool\), got values \[0 1 2 3 4\]$"):
        decision_matrix(np.array([[0, 1, 2, 3, 4, 5, 6]]))
    with pytest.raises(ValueError, match=r"got values \[-1  0\]"):
        decision_matrix(np.array([[0, -1]]))


# --------------------------------------------------------------------------------- proportion

@pytest.mark.parametrize("layout", ["A", "B", "crossed"])
@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_proportion_is_the_korn_graubard_interval_of_the_crossed_model(layout, confidence):
    x = {"A": A, "B": B, "crossed": crossed(2, 3, 10)}[layout]
    assert_estimate(proportion(x, confidence), ref_proportion(x, confidence))


@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_one_draw_is_exact_clopper_pearson_with_its_own_variance(confidence):
    row = np.array([1, 1, 0, 1, 0, 1, 1, 1, 0, 1], dtype=bool)
    got = proportion(row[None], confidence)
    assert_estimate(got, ref_proportion(row[None], confidence))
    assert (got.draws, got.var_draws) == (1, 0.0)
    assert got.df == pytest.approx(9)  # the records' variance alone: n − 1 degrees of freedom
    assert got.var_records == pytest.approx(np.var(row.astype(float), ddof=1) / 10)


@pytest.mark.parametrize("value", [0, 1])
def test_a_mean_of_exactly_0_or_1_takes_the_records_as_its_effective_n(value):
    """No variance to estimate: n* = n records (t-corrected at n − 1 df), the interval closed at the
    observed end (0 or 1, not a NaN beta quantile)."""
    x = np.full((3, 8), bool(value))
    got = proportion(x)
    assert_estimate(got, ref_proportion(x))
    assert got.df == 7 and (got.var_records, got.var_draws) == (0.0, 0.0)
    effective = 8 * (stats.norm.ppf(0.975) / stats.t.ppf(0.975, 7)) ** 2
    if value == 0:
        assert got.lo == 0.0 and got.hi == pytest.approx(1 - 0.025 ** (1 / effective))
    else:
        assert got.hi == 1.0 and got.lo == pytest.approx(0.025 ** (1 / effective))


def test_a_layout_without_record_or_draw_variance_takes_the_records_as_its_effective_n():
    """Each record right in half its draws, each draw right on half the records: p = ½ but the
    record and draw variances are 0 (all is interaction): n* = n, not a division by zero."""
    x = np.array([[1, 0, 1, 0], [0, 1, 0, 1]], dtype=bool)
    got = proportion(x)
    assert (got.var_records, got.var_draws) == (0.0, 0.0) and got.value == 0.5
    effective = 4 * (stats.norm.ppf(0.975) / stats.t.ppf(0.975, 3)) ** 2
    assert (got.lo, got.hi) == pytest.approx((stats.beta.ppf(0.025, effective / 2, effective / 2 + 1),
                                              stats.beta.ppf(0.975, effective / 2 + 1, effective / 2)))
    assert_estimate(got, ref_proportion(x))


def test_a_fractional_count_below_one_still_has_a_positive_lower_end():
    """One record right in both draws of 20: p = 0.05 and p·n* < 1, where the beta quantile is still
    defined and positive."""
    x = np.zeros((2, 20), bool)
    x[:, 3] = True
    got = proportion(x)
    assert 0 < got.value * 20 < 2
    assert_estimate(got, ref_proportion(x))
    assert got.lo > 0


# --------------------------------------------------------------------------------- paired and unpaired differences

@pytest.mark.parametrize("weight", [1.0, 0.9, 0.5])
@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_paired_difference_is_the_per_record_difference_with_both_draw_parts(weight, confidence):
    assert_estimate(paired_difference(A, B, confidence, weight), ref_paired(A, B, confidence, weight))
    assert_estimate(paired_difference(B, A, confidence, weight), ref_paired(B, A, confidence, weight))


def test_a_paired_difference_of_a_draw_with_itself_has_no_variance_and_n_minus_1_df():
    got = paired_difference(A[:1], A[:1])
    assert (got.value, got.lo, got.hi, got.var_records, got.var_draws) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert got.df == 11 and (got.n, got.draws) == (12, 1)
    # the same layout of three draws: the records' part cancels, each side's draw part stays
    again = paired_difference(A, A)
    assert again.var_records == 0.0 and again.var_draws == pytest.approx(2 * draw_part(A.astype(float))[0])


def test_paired_ratio_is_the_delta_method_on_the_paired_difference():
    for confidence in (0.95, 0.8):
        assert_estimate(paired_ratio(A, B, confidence), ref_ratio(A, B, confidence))
        assert_estimate(paired_ratio(B, A, confidence), ref_ratio(B, A, confidence))
    narrow, wide = paired_ratio(A, B, 0.8), paired_ratio(A, B, 0.95)
    assert narrow.hi - narrow.lo < wide.hi - wide.lo


def test_paired_ratio_refuses_a_denominator_without_positive_decisions_only():
    with pytest.raises(ValueError, match="^the ratio's denominator layout has no positive decision$"):
        paired_ratio(A, np.zeros((2, 12), bool))
    ones = np.ones((2, 12), bool)
    assert_estimate(paired_ratio(A, ones), ref_ratio(A, ones))  # a denominator of exactly 1 is fine


@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_unpaired_difference_adds_the_variances_with_satterthwaites_df(confidence):
    a, b = proportion(A), proportion(crossed(3, 4, 15))
    assert a.var_draws > 0 and b.var_draws > 0
    assert_estimate(unpaired_difference(a, b, confidence), ref_unpaired(a, b, confidence))
    assert_estimate(unpaired_difference(b, a, confidence), ref_unpaired(b, a, confidence))


def test_unpaired_difference_of_estimates_without_variance_falls_back_to_the_smaller_n():
    a, b = proportion(np.ones((2, 6), bool)), proportion(np.ones((3, 9), bool))
    got = unpaired_difference(a, b)
    assert (got.value, got.lo, got.hi, got.n, got.draws, got.var_records, got.var_draws, got.df) == (
        0.0, 0.0, 0.0, 6, 3, 0.0, 0.0, 5)


def test_unpaired_difference_of_two_normal_intervals_is_computed_not_divided_by_zero():
    """Estimates with a normal interval (df = ∞, as DeLong's and a bootstrap's read off their
    width): every Satterthwaite term is 0, and the difference still gets an interval at least as
    wide as the normal one."""
    a = Estimate(0.7, 0.6, 0.8, 200, 1, 0.0025, 0.0, math.inf)
    b = Estimate(0.6, 0.52, 0.68, 300, 1, 0.0016, 0.0, math.inf)
    got = unpaired_difference(a, b)
    assert got.value == pytest.approx(0.1) and (got.n, got.draws) == (200, 1)
    assert (got.var_records, got.var_draws) == pytest.approx((0.0041, 0.0))
    assert math.isfinite(got.lo) and math.isfinite(got.hi)
    assert got.hi - got.lo >= 2 * stats.norm.ppf(0.975) * math.sqrt(0.0041) - 1e-12
    assert got.hi - got.lo <= 2 * stats.t.ppf(0.975, 199) * math.sqrt(0.0041) + 1e-12


def test_versus_bound_shifts_the_interval_and_keeps_every_other_field():
    a = proportion(A)
    got = versus_bound(a, 0.5)
    assert_estimate(got, (a.value - 0.5, a.lo - 0.5, a.hi - 0.5, a.n, a.draws, a.var_records, a.var_draws, a.df),
                    rel=1e-15)


# --------------------------------------------------------------------------------- n_for_power

@pytest.mark.parametrize("power", [0.0, 1.0, 1.5, -0.2])
def test_n_for_power_refuses_a_power_outside_0_1(power):
    d = Estimate(0.05, 0.0, 0.1, 100, 1, 1e-3, 0.0, 99.0)
    with pytest.raises(ValueError, match=rf"^power must lie in \(0, 1\), got {power}$"):
        n_for_power(d, power)


def test_n_for_power_at_a_draw_share_exactly_filling_the_room_is_infinite():
    """(d / (z_.975 + z_.8))² equal to var_draws: only infinitely many records would do."""
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    d = 0.05
    exact = Estimate(d, 0.0, 0.1, 100, 3, 1e-3, (d / z) ** 2, 50.0)
    assert n_for_power(exact) == math.inf
    assert n_for_power(Estimate(d, 0.0, 0.1, 100, 3, 1e-3, (d / z) ** 2 / 2, 50.0)) == math.ceil(
        100 * 1e-3 / ((d / z) ** 2 / 2))

