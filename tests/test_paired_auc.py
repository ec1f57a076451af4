"""DeLong's paired comparison of two AUCs on the same records (privssl.attacks.paired_auc) against
independent computations: sklearn's AUC, placement values and DeLong's covariance by explicit
loops over the member × non-member pairs, the coverage of its 95 % interval in simulated data
sets of known AUCs."""

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from privssl.attacks.paired_auc import auc_contrast, auc_from_ranks, log_step_slope, paired_auc_difference, placements


def psi(x: float, y: float) -> float:
    """The Mann–Whitney kernel: 1 if the member's score x is above the non-member's y, ½ on a tie."""
    return 1.0 if x > y else 0.5 if x == y else 0.0


def brute_placements(scores, m: int) -> tuple[np.ndarray, np.ndarray]:
    """V10(x_i) = P(Y < x_i) + ½ P(Y = x_i) and V01(y_j) = P(X > y_j) + ½ P(X = y_j), by loops."""
    members, nonmembers = list(scores[:m]), list(scores[m:])
    v10 = np.array([sum(psi(x, y) for y in nonmembers) / len(nonmembers) for x in members])
    v01 = np.array([sum(psi(x, y) for x in members) / len(members) for y in nonmembers])
    return v10, v01


def brute_delong(scores_a, scores_b, m: int) -> tuple[float, float, float]:
    """(AUC_a − AUC_b, its paired DeLong variance, the unpaired variance Var(AUC_a) + Var(AUC_b)):
    DeLong et al. (1988) eq. (5)-(6): S10 and S01 the (m − 1)- and (n − 1)-normalised
    covariance matrices of the two attacks' placement values, Var = c'S10c / m + c'S01c / n."""
    (a10, a01), (b10, b01) = brute_placements(scores_a, m), brute_placements(scores_b, m)
    n = len(a01)
    auc_a = sum(psi(x, y) for x in scores_a[:m] for y in scores_a[m:]) / (m * n)
    auc_b = sum(psi(x, y) for x in scores_b[:m] for y in scores_b[m:]) / (m * n)

    def cov(u, v, mean_u, mean_v):
        return sum((u[i] - mean_u) * (v[i] - mean_v) for i in range(len(u))) / (len(u) - 1)

    s10 = [[cov(p, q, ep, eq) for q, eq in ((a10, auc_a), (b10, auc_b))] for p, ep in ((a10, auc_a), (b10, auc_b))]
    s01 = [[cov(p, q, ep, eq) for q, eq in ((a01, auc_a), (b01, auc_b))] for p, ep in ((a01, auc_a), (b01, auc_b))]
    paired = (s10[0][0] + s10[1][1] - 2 * s10[0][1]) / m + (s01[0][0] + s01[1][1] - 2 * s01[0][1]) / n
    unpaired = (s10[0][0] + s10[1][1]) / m + (s01[0][0] + s01[1][1]) / n
    return auc_a - auc_b, paired, unpaired


def tied_scores(rng, m: int, n: int, shift: float = 1.0) -> np.ndarray:
    """Members first; scores on a coarse grid so that many ties fall within and across the classes."""
    return np.round(np.concatenate([rng.normal(shift, 1, m), rng.normal(0, 1, n)]) * 2) / 2


def ranks_of(scores) -> np.ndarray:
    return stats.rankdata(scores)


@pytest.mark.parametrize("m, n, seed", [(7, 11, 0), (40, 25, 1), (150, 150, 2)])
def test_auc_from_ranks_is_sklearns_auc_with_ties(m, n, seed):
    scores = tied_scores(np.random.default_rng(seed), m, n)
    assert len(np.unique(scores)) < len(scores) - 2 and np.intersect1d(scores[:m], scores[m:]).size  # ties across
    labels = np.r_[np.ones(m), np.zeros(n)]
    expected = roc_auc_score(labels, scores)
    assert auc_from_ranks(ranks_of(scores), m) == pytest.approx(expected, abs=1e-12)


def test_auc_from_ranks_at_the_extremes():
    assert auc_from_ranks(ranks_of([5, 6, 7, 1, 2]), 3) == 1.0
    assert auc_from_ranks(ranks_of([1, 2, 5, 6, 7]), 2) == 0.0
    assert auc_from_ranks(ranks_of([3, 3, 3, 3]), 2) == 0.5


@pytest.mark.parametrize("m, n, seed", [(5, 8, 3), (30, 20, 4)])
def test_placements_are_the_brute_force_placement_values(m, n, seed):
    scores = tied_scores(np.random.default_rng(seed), m, n)
    v10, v01 = placements(ranks_of(scores), m)
    b10, b01 = brute_placements(scores, m)
    assert v10.shape == (m,) and v01.shape == (n,)
    assert np.allclose(v10, b10, atol=1e-12) and np.allclose(v01, b01, atol=1e-12)
    assert v10.mean() == pytest.approx(v01.mean(), abs=1e-12)  # both are the AUC


def test_placements_need_two_of_each_class():
    with pytest.raises(ValueError, match="at least 2 members and 2 non-members"):
        placements(ranks_of([1, 2, 3]), 1)
    with pytest.raises(ValueError, match="at least 2 members and 2 non-members"):
        placements(ranks_of([1, 2, 3]), 2)


def correlated_pair(rng, m, n, mu_a, mu_b, record_sd, attack_sd, grid=None):
    """Two attacks' scores on the same records: a shared record effect plus each attack's own noise."""
    record = rng.normal(0, record_sd, m + n)
    member = np.r_[np.ones(m), np.zeros(n)]
    a = mu_a * member + record + rng.normal(0, attack_sd, m + n)
    b = mu_b * member + record + rng.normal(0, attack_sd, m + n)
    if grid:
        a, b = np.round(a * grid) / grid, np.round(b * grid) / grid
    return a, b


@pytest.mark.parametrize("m, n, seed, grid", [(30, 45, 5, 4), (60, 40, 6, None)])
def test_paired_variance_is_the_brute_force_delong_variance(m, n, seed, grid):
    a, b = correlated_pair(np.random.default_rng(seed), m, n, 1.0, 0.6, 0.8, 0.6, grid)
    d, var, _ = brute_delong(a, b, m)
    got = paired_auc_difference(ranks_of(a), ranks_of(b), m)
    assert got.value == pytest.approx(d, abs=1e-12)
    assert got.var_records == pytest.approx(var, rel=1e-10) and got.var_draws == 0
    half = stats.norm.ppf(0.975) * math.sqrt(var)
    assert (got.lo, got.hi) == pytest.approx((d - half, d + half), abs=1e-12)
    assert got.n == m  # the members: the unit a replication is sized in
    narrow = paired_auc_difference(ranks_of(a), ranks_of(b), m, confidence=0.5)
    assert narrow.hi - narrow.lo == pytest.approx(2 * stats.norm.ppf(0.75) * math.sqrt(var), rel=1e-10)


def test_the_difference_is_signed_a_minus_b():
    a, b = correlated_pair(np.random.default_rng(7), 40, 40, 1.5, 0.2, 0.5, 0.5)
    ab, ba = paired_auc_difference(ranks_of(a), ranks_of(b), 40), paired_auc_difference(ranks_of(b), ranks_of(a), 40)
    assert ab.value > 0.2 and ab.lo > 0  # a is the stronger attack
    assert ba.value == pytest.approx(-ab.value) and ba.var_records == pytest.approx(ab.var_records)


def test_pairing_shrinks_the_variance_of_correlated_attacks():
    a, b = correlated_pair(np.random.default_rng(8), 50, 50, 1.0, 0.8, 1.0, 0.2)  # the record effect dominates
    _, paired, unpaired = brute_delong(a, b, 50)
    got = paired_auc_difference(ranks_of(a), ranks_of(b), 50)
    assert got.var_records == pytest.approx(paired, rel=1e-10)
    assert got.var_records < unpaired / 5
    # the same attacks on independent records: no shrinking (the paired variance ≈ the unpaired)
    rng = np.random.default_rng(9)
    a, _ = correlated_pair(rng, 50, 50, 1.0, 0.8, 1.0, 0.2)
    _, b = correlated_pair(rng, 50, 50, 1.0, 0.8, 1.0, 0.2)
    _, paired, unpaired = brute_delong(a, b, 50)
    assert paired > unpaired / 2


def test_the_same_scores_differ_by_exactly_zero():
    scores = tied_scores(np.random.default_rng(10), 20, 20)
    got = paired_auc_difference(ranks_of(scores), ranks_of(scores), 20)
    assert (got.value, got.lo, got.hi, got.var_records) == (0, 0, 0, 0)


def test_records_of_different_sizes_are_refused():
    with pytest.raises(ValueError, match="same records"):
        paired_auc_difference(ranks_of(np.arange(10.0)), ranks_of(np.arange(12.0)), 5)


def test_the_95pct_interval_covers_the_true_difference_95pct_of_the_time():
    """Binormal scores: member X ~ N(μ, 1), non-member Y ~ N(0, 1) give AUC = Φ(μ / √2); both attacks
    share a record effect of variance 0.7 (their own noise 0.3), so they are strongly paired."""
    rng = np.random.default_rng(11)
    m = n = 80
    mu_a, mu_b = 1.0, 0.75
    truth = stats.norm.cdf(mu_a / math.sqrt(2)) - stats.norm.cdf(mu_b / math.sqrt(2))
    covered, widths, estimates = 0, [], []
    for _ in range(1000):
        a, b = correlated_pair(rng, m, n, mu_a, mu_b, math.sqrt(0.7), math.sqrt(0.3))
        got = paired_auc_difference(ranks_of(a), ranks_of(b), m)
        covered += got.lo <= truth <= got.hi
        widths.append(got.hi - got.lo)
        estimates.append(got.value)
    assert 930 <= covered <= 970, covered
    assert np.mean(estimates) == pytest.approx(truth, abs=0.005)  # the AUC is unbiased
    # the average interval is that of the true standard deviation of the estimates
    assert np.mean(widths) == pytest.approx(2 * stats.norm.ppf(0.975) * np.std(estimates), rel=0.1)



def test_the_difference_is_one_draw_with_a_normal_interval():
    """DeLong's difference is one measurement of each record (draws = 1) with a normal interval
    (infinite degrees of freedom, so that a sum with other estimates weighs it as known)."""
    a, b = correlated_pair(np.random.default_rng(14), 25, 30, 1.0, 0.5, 0.5, 0.5)
    got = paired_auc_difference(ranks_of(a), ranks_of(b), 25)
    assert got.draws == 1 and got.var_draws == 0.0
    assert got.df == math.inf


# --------------------------------------------------------------------------------- contrasts and the log-step slope

def delong_covariance(score_sets, m: int) -> np.ndarray:
    """DeLong's K × K covariance of K AUCs on the same records, S10/m + S01/n, from the brute-force
    placement values (the textbook matrix form, not the per-record contrast the module computes)."""
    parts = [brute_placements(s, m) for s in score_sets]
    v10 = np.stack([p[0] for p in parts])  # K × m
    v01 = np.stack([p[1] for p in parts])  # K × n
    return np.cov(v10) / v10.shape[1] + np.cov(v01) / v01.shape[1]


def checkpoints(rng, m: int, n: int, shifts) -> list[np.ndarray]:
    """Scores of one set of records at several checkpoints: a record effect shared by all, plus a
    member shift that grows, plus fresh noise, on a coarse grid so that ties occur."""
    record = rng.normal(size=m + n)
    member = np.r_[np.ones(m), np.zeros(n)]
    return [np.round(record + shift * member + 0.7 * rng.normal(size=m + n), 1) for shift in shifts]


def test_an_auc_contrast_is_the_weighted_sum_of_sklearns_aucs_with_delongs_variance():
    rng = np.random.default_rng(41)
    m, n = 40, 55
    scores = checkpoints(rng, m, n, [0.0, 0.3, 0.5, 0.9])
    ranks = [stats.rankdata(s) for s in scores]
    weights = np.array([-3.0, -1.0, 1.0, 3.0])
    labels = np.r_[np.ones(m), np.zeros(n)]
    aucs = np.array([roc_auc_score(labels, s) for s in scores])
    c = auc_contrast(ranks, weights, m)
    assert c.value == pytest.approx(weights @ aucs)
    assert c.var_records == pytest.approx(weights @ delong_covariance(scores, m) @ weights)
    half = stats.norm.ppf(0.975) * math.sqrt(c.var_records)
    assert (c.lo, c.hi) == (pytest.approx(c.value - half), pytest.approx(c.value + half)) and c.n == m


def test_the_log_step_slope_is_the_least_squares_slope_of_the_aucs():
    rng = np.random.default_rng(42)
    m, n = 50, 50
    steps = [500, 1000, 1500, 2000]
    scores = checkpoints(rng, m, n, [0.1, 0.4, 0.5, 0.8])
    labels = np.r_[np.ones(m), np.zeros(n)]
    aucs = [roc_auc_score(labels, s) for s in scores]
    slope = log_step_slope([stats.rankdata(s) for s in scores], steps, m)
    assert slope.value == pytest.approx(np.polyfit(np.log2(steps), aucs, 1)[0])
    x = np.log2(steps) - np.log2(steps).mean()
    w = x / (x ** 2).sum()
    assert slope.var_records == pytest.approx(w @ delong_covariance(scores, m) @ w)
    # two checkpoints a doubling apart: the slope is their paired difference
    two = log_step_slope([stats.rankdata(scores[0]), stats.rankdata(scores[1])], [500, 1000], m)
    d = paired_auc_difference(stats.rankdata(scores[1]), stats.rankdata(scores[0]), m)
    assert (two.value, two.lo, two.hi) == (pytest.approx(d.value), pytest.approx(d.lo), pytest.approx(d.hi))


def test_a_contrast_refuses_weights_that_do_not_cancel_or_do_not_match():
    ranks = [np.arange(1, 9, dtype=float)] * 3
    with pytest.raises(ValueError, match="sum to 0"):
        auc_contrast(ranks, [1.0, 1.0, -1.0], 4)
    with pytest.raises(ValueError, match="one weight per score vector"):
        auc_contrast(ranks, [1.0, -1.0], 4)
    with pytest.raises(ValueError, match="the same records"):
        auc_contrast([np.arange(1, 9.0), np.arange(1, 11.0)], [1.0, -1.0], 4)
    with pytest.raises(ValueError, match="2 distinct steps"):
        log_step_slope(ranks[:2], [500, 500], 4)
