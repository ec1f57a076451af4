"""Membership-inference metrics with intervals: exact binomial bounds, ROC points, bootstrap AUC."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from privssl.attacks.statistics import (
    _auc_from_ranks,
    accuracy_interval,
    auc,
    bootstrap_auc,
    check_members,
    clopper_pearson,
    clopper_pearson_upper,
    finite_scores,
    fpr_label,
    membership_metrics,
    newcombe_difference,
    roc,
    threshold_counts,
    tpr_at_fpr,
    wilson_interval,
)


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (1, 1), (0, 1), (57, 200)])
def test_clopper_pearson_matches_beta_quantiles(k, n):
    lo, hi = clopper_pearson(k, n)
    assert lo == (0.0 if k == 0 else pytest.approx(stats.beta.ppf(0.025, k, n - k + 1)))
    assert hi == (1.0 if k == n else pytest.approx(stats.beta.ppf(0.975, k + 1, n - k)))
    assert clopper_pearson_upper(k, n, 0.9) == (1.0 if k == n else pytest.approx(stats.beta.ppf(0.9, k + 1, n - k)))


def test_clopper_pearson_closed_forms_and_vectorised():
    n = 20
    # k = 0: one-sided upper bound solves (1 − u)^n = 0.05; k = n: two-sided lower bound is 0.025^(1/n).
    assert clopper_pearson_upper(0, n) == pytest.approx(1 - 0.05 ** (1 / n))
    assert clopper_pearson(n, n) == (pytest.approx(0.025 ** (1 / n)), 1.0)
    ks = np.array([0, 5, 20])
    lo, hi = clopper_pearson(ks, n)
    np.testing.assert_allclose(lo, [clopper_pearson(k, n)[0] for k in ks])
    np.testing.assert_allclose(hi, [clopper_pearson(k, n)[1] for k in ks])
    np.testing.assert_allclose(clopper_pearson_upper(ks, n), [clopper_pearson_upper(k, n) for k in ks])


def test_accuracy_interval():
    acc, lo, hi = accuracy_interval(70, 100)
    assert acc == 0.7 and (lo, hi) == clopper_pearson(70, 100)
    assert lo < 0.7 < hi


@pytest.mark.parametrize("k, n, confidence", [(-1, 5, 0.95), (6, 5, 0.95), (0, 0, 0.95), (1.5, 5, 0.95),
                                              (1, 5, 0.0), (1, 5, 1.0), (1, 5, 1.2)])
def test_clopper_pearson_rejects_bad_input(k, n, confidence):
    with pytest.raises(ValueError):
        clopper_pearson(k, n, confidence)


def test_finite_scores_places_non_finite_next_to_the_finite_range():
    cleaned = finite_scores([np.nan, -np.inf, 0.5, 2.0, np.inf])
    assert cleaned[0] == cleaned[1] < 0.5 and cleaned[4] > 2.0 and np.isfinite(cleaned).all()
    assert cleaned[2:4].tolist() == [0.5, 2.0]


def test_roc_starts_at_origin_and_keeps_every_point():
    scores = np.array([0.1, 0.2, 0.2, 0.2, 0.9])
    member = np.array([0, 1, 0, 1, 1], dtype=bool)
    fpr, tpr, thresholds = roc(scores, member)
    assert (fpr[0], tpr[0]) == (0.0, 0.0) and (fpr[-1], tpr[-1]) == (1.0, 1.0)
    assert len(fpr) == len(np.unique(scores)) + 1


def hand_made():
    """10 non-members scored 0..9, members scored 8.5, 9.5, 10..17: known TPR at each FPR."""
    nonmembers = np.arange(10.0)
    members = np.array([8.5, 9.5, *np.arange(10.0, 18.0)])
    return np.concatenate([members, nonmembers]), np.r_[np.ones(10, bool), np.zeros(10, bool)]


def test_tpr_at_fpr_by_hand():
    scores, member = hand_made()
    # FPR 0: threshold 9.5 flags 9 members. FPR 0.1 (one FP, the non-member at 9): all 10 members.
    zero_fp = tpr_at_fpr(scores, member, 0.05)
    assert zero_fp["tpr"] == 0.9 and zero_fp["false_positives"] == 0 and zero_fp["fpr_level"] == 0.05
    assert (zero_fp["tpr_lo"], zero_fp["tpr_hi"]) == clopper_pearson(9, 10)
    one_fp = tpr_at_fpr(scores, member, 0.1)
    assert one_fp["tpr"] == 1.0 and one_fp["false_positives"] == 1 and one_fp["tpr_hi"] == 1.0
    # Many thresholds reach TPR 1 within FPR 0.5: report the one with the fewest false positives.
    assert tpr_at_fpr(scores, member, 0.5)["false_positives"] == 1


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1])
def test_tpr_at_fpr_rejects_degenerate_levels(level):
    scores, member = hand_made()
    with pytest.raises(ValueError, match="fpr_level"):
        tpr_at_fpr(scores, member, level)


def test_threshold_counts_are_exact():
    scores, member = hand_made()
    thresholds, tp, fp = threshold_counts(scores, member)
    assert thresholds[-1] == np.inf and tp[-1] == fp[-1] == 0 and (tp[0], fp[0]) == (10, 10)
    for t, n_tp, n_fp in zip(thresholds, tp, fp):
        assert n_tp == ((scores >= t) & member).sum() and n_fp == ((scores >= t) & ~member).sum()


def tied_scores(n, seed):
    rng = np.random.default_rng(seed)
    member = rng.random(n) < 0.5
    scores = np.round(rng.normal(size=n) + 0.5 * member, 1)  # rounding creates many ties
    return scores, member


def test_bootstrap_auc_point_estimate_equals_sklearn_with_ties():
    scores, member = tied_scores(300, 0)
    point, lo, hi = bootstrap_auc(scores, member, n_boot=200)
    assert point == pytest.approx(roc_auc_score(member, scores), abs=1e-12)
    assert auc(scores, member) == pytest.approx(point, abs=1e-12)
    assert lo < point < hi


def test_bootstrap_auc_interval_shrinks_with_more_data_and_is_reproducible():
    small = bootstrap_auc(*tied_scores(200, 1), n_boot=300, seed=3)
    large = bootstrap_auc(*tied_scores(2000, 1), n_boot=300, seed=3)
    assert (large[2] - large[1]) < 0.5 * (small[2] - small[1])
    assert bootstrap_auc(*tied_scores(200, 1), n_boot=300, seed=3) == small


def test_bootstrap_auc_chunks_give_the_same_answer(monkeypatch):
    scores, member = tied_scores(100, 2)
    whole = bootstrap_auc(scores, member, n_boot=50)
    monkeypatch.setattr("privssl.attacks.statistics._MAX_BOOT_ELEMENTS", 700)  # 7 resamples per chunk
    assert bootstrap_auc(scores, member, n_boot=50) == whole


def test_fpr_label():
    assert [fpr_label(x) for x in (0.001, 0.01, 0.1, 0.07, 0.5)] == ["0.1pct", "1pct", "10pct", "7pct", "50pct"]


def test_fpr_label_keeps_tiny_levels_apart():
    """Labels keep a level's significant digits however small it is (the schema allows any level
    in (0, 1)): 1.5e-12 is 1.5e-10 %, and 1e-13 and 2e-13 get two labels, not one '0pct' whose
    columns would overwrite each other in membership_metrics."""
    assert [fpr_label(x) for x in (1.5e-12, 1e-13, 2e-13)] == ["1.5e-10pct", "1e-11pct", "2e-11pct"]


def test_membership_metrics_flat_dict():
    scores, member = hand_made()
    scores[0] = np.nan  # a member with a NaN score ranks lowest
    metrics = membership_metrics(scores, member, threshold=9.5, fpr_levels=(0.05, 0.1), n_boot=100)
    assert set(metrics) == {"n_members", "n_nonmembers", "accuracy", "accuracy_lo", "accuracy_hi", "auc", "auc_lo",
                            "auc_hi", *(f"{key}_at_{label}_fpr{suffix}" for label in ("5pct", "10pct")
                                        for key, suffix in (("tpr", ""), ("tpr", "_lo"), ("tpr", "_hi"), ("fp", "")))}
    assert (metrics["n_members"], metrics["n_nonmembers"]) == (10, 10)
    assert metrics["accuracy"] == 0.95  # only the NaN member (now below every score) is misclassified
    assert metrics["auc"] == pytest.approx(roc_auc_score(member, np.nan_to_num(scores, nan=-1)))
    assert metrics["tpr_at_10pct_fpr"] == 0.9 and metrics["fp_at_10pct_fpr"] == 0  # 9.5 already flags 9


@pytest.mark.parametrize("scores, member, match", [
    ([], [], "non-empty"),
    ([0.1, 0.2], [True], "length"),
    ([0.1, 0.2], [True, True], "both members and non-members"),
    ([0.1, 0.2], [False, False], "both members and non-members"),
    ([0.1, 0.2], [0, 2], "bool"),
])
def test_bad_inputs(scores, member, match):
    with pytest.raises(ValueError, match=match):
        bootstrap_auc(scores, member)
    with pytest.raises(ValueError, match=match):
        tpr_at_fpr(scores, member, 0.01)


def test_bad_bootstrap_parameters():
    scores, member = hand_made()
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_auc(scores, member, n_boot=0)
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_auc(scores, member, confidence=1.0)


# ----------------------------------------------------------------------------------------------
# Clopper–Pearson against its definition (Clopper & Pearson 1934), without the beta quantiles the
# code calls: the interval for k successes in n is {p : P(X ≥ k; p) > α/2 and P(X ≤ k; p) > α/2},
# X ~ Bin(n, p). Its coverage at a true rate p is exactly Σ_{k : lo(k) ≤ p ≤ hi(k)} P(X = k; p).

COVERAGE_RATES = (0.01, 0.2, 0.5, 0.93)
COVERAGE_SIZES = (20, 150, 1000)


def exact_coverage(p: float, n: int, confidence: float = 0.95) -> float:
    """P(lo(X) ≤ p ≤ hi(X)) for X ~ Bin(n, p), by summing the binomial pmf (no simulation)."""
    ks = np.arange(n + 1)
    lo, hi = clopper_pearson(ks, n, confidence)
    return float(stats.binom.pmf(ks[(lo <= p) & (p <= hi)], n, p).sum())


@pytest.mark.parametrize("n", COVERAGE_SIZES)
@pytest.mark.parametrize("p", COVERAGE_RATES)
def test_clopper_pearson_exact_coverage_is_at_least_95_percent(p, n):
    assert exact_coverage(p, n) >= 0.95 - 1e-12


@pytest.mark.parametrize("n", COVERAGE_SIZES)
def test_clopper_pearson_never_undercovers_on_either_side_over_a_fine_grid_of_rates(n):
    """Exactness per side: P(p < lo(X)) ≤ α/2 and P(p > hi(X)) ≤ α/2 at every p (exact sums)."""
    ks = np.arange(n + 1)
    lo, hi = clopper_pearson(ks, n)
    ps = np.linspace(0.0005, 0.9995, 1999)[:, None]
    pmf = stats.binom.pmf(ks[None, :], n, ps)
    assert (pmf * (lo[None, :] > ps)).sum(1).max() <= 0.025 + 1e-12
    assert (pmf * (hi[None, :] < ps)).sum(1).max() <= 0.025 + 1e-12


@pytest.mark.parametrize("n", COVERAGE_SIZES)
def test_clopper_pearson_ends_are_the_binomial_tail_inversions(n):
    """Not wider than exact: at p = lo(k) the upper tail P(X ≥ k) is exactly α/2, at p = hi(k)
    the lower tail P(X ≤ k) is exactly α/2 (scipy's binomial sf/cdf, not the beta quantile);
    lo(0) = 0 and hi(n) = 1. An interval returning [0, 1] or a 99 % interval fails here."""
    ks = np.arange(n + 1)
    lo, hi = clopper_pearson(ks, n)
    assert lo[0] == 0.0 and hi[-1] == 1.0
    np.testing.assert_allclose(stats.binom.sf(ks[1:] - 1, n, lo[1:]), 0.025, rtol=1e-8)
    np.testing.assert_allclose(stats.binom.cdf(ks[:-1], n, hi[:-1]), 0.025, rtol=1e-8)
    upper = clopper_pearson_upper(ks[:-1], n, 0.9)  # one-sided: the whole 10 % on the upper end
    np.testing.assert_allclose(stats.binom.cdf(ks[:-1], n, upper), 0.1, rtol=1e-8)


def test_clopper_pearson_is_not_much_more_conservative_than_its_level_for_large_n():
    """CP's excess coverage comes from discreteness and shrinks with n: averaged over p ∈ (0.05,
    0.95) it is ≈ 0.9545 at n = 1000 and ≈ 0.961 at n = 150 (exact sums). Bounds 0.96 / 0.97
    fail for [0, 1] (coverage 1) or for a 97 % interval presented as 95 %."""
    rates = np.linspace(0.05, 0.95, 181)
    assert np.mean([exact_coverage(p, 1000) for p in rates]) <= 0.96
    assert np.mean([exact_coverage(p, 150) for p in rates]) <= 0.97


@pytest.mark.parametrize("p, n", [(0.2, 150), (0.93, 1000), (0.01, 20)])
def test_clopper_pearson_simulated_coverage_agrees_with_the_exact_sum(p, n):
    """20 000 draws k ~ Bin(n, p) (seeded), the vectorised interval for all at once: the share
    holding p is within 4 standard errors of the exact coverage, and ≥ 95 % less those 4 SE."""
    draws = 20_000
    k = np.random.default_rng(12345).binomial(n, p, size=draws)
    lo, hi = clopper_pearson(k, n)
    simulated = np.mean((lo <= p) & (p <= hi))
    exact = exact_coverage(p, n)
    se = np.sqrt(exact * (1 - exact) / draws)
    assert abs(simulated - exact) <= 4 * se
    assert simulated >= 0.95 - 4 * np.sqrt(0.95 * 0.05 / draws)


# ----------------------------------------------------------------------------------------------
# Behaviour the tests above leave open (mutation testing of privssl.attacks.statistics).


def test_finite_scores_moves_non_finite_scores_to_the_adjacent_floats():
    """NaN/−inf go to the float just below the smallest finite score, +inf to the one just above
    the largest (not to ±1e308), integers come back as floats; +inf beside the largest float stays
    finite (it ties with it); with no finite score at all, NaN/−inf become −1 and +inf 1."""
    cleaned = finite_scores([np.nan, -np.inf, 0.5, 2.0, np.inf])
    assert cleaned.tolist() == [np.nextafter(0.5, -1), np.nextafter(0.5, -1), 0.5, 2.0, np.nextafter(2.0, 3)]
    integers = finite_scores([3, 1, 2])
    assert integers.dtype == np.float64 and integers.tolist() == [3.0, 1.0, 2.0]
    largest = np.finfo(float).max
    with np.errstate(over="ignore"):  # the float above the largest is +inf: numpy warns of the overflow
        assert finite_scores([1.0, largest, np.inf]).tolist() == [1.0, largest, largest]
    assert finite_scores([np.nan, -np.inf, np.inf]).tolist() == [-1.0, -1.0, 1.0]


def test_check_members_accepts_zero_one_labels_and_names_bad_values():
    labels = check_members(np.array([0, 1, 1, 0]), 4)
    assert labels.dtype == bool and labels.tolist() == [False, True, True, False]
    scores = np.array([0.3, 0.9, 0.1, 0.2, 0.8])
    assert auc(scores, [1, 1, 0, 0, 0]) == pytest.approx(roc_auc_score([1, 1, 0, 0, 0], scores))
    with pytest.raises(ValueError, match=r"is_member must be bool \(or 0/1\), got values \[0 1 2\]"):
        check_members([0, 2, 1], 3)
    # at most five of the distinct values are shown
    with pytest.raises(ValueError, match=r"is_member must be bool \(or 0/1\), got values \[0 1 2 3 4\]$"):
        check_members(np.arange(7), 7)


def test_count_errors_name_the_counts_and_the_rule():
    with pytest.raises(ValueError, match=r"^k and n must be whole numbers, got k=1.5, n=5$"):
        clopper_pearson(1.5, 5)
    with pytest.raises(ValueError, match=r"^need 0 <= k <= n and n >= 1, got k=6, n=5$"):
        clopper_pearson(6, 5)


def test_accuracy_interval_uses_the_requested_confidence():
    acc, lo, hi = accuracy_interval(70, 100, confidence=0.9)
    assert acc == 0.7
    assert (lo, hi) == (pytest.approx(stats.beta.ppf(0.05, 70, 31)), pytest.approx(stats.beta.ppf(0.95, 71, 30)))


def test_roc_keeps_collinear_points():
    """Members 3, 2 and non-members 1, 0: the ROC passes (0, ½) and (½, 1), which lie on the
    segments (0, 0)–(0, 1) and (0, 1)–(1, 1) and which sklearn would drop by default."""
    fpr, tpr, thresholds = roc([3.0, 2.0, 1.0, 0.0], [True, True, False, False])
    assert fpr.tolist() == [0.0, 0.0, 0.0, 0.5, 1.0] and tpr.tolist() == [0.0, 0.5, 1.0, 1.0, 1.0]
    assert thresholds[1:].tolist() == [3.0, 2.0, 1.0, 0.0]


def test_auc_from_ranks_of_a_batch_is_the_auc_of_each_row():
    rng = np.random.default_rng(4)
    rows = np.round(rng.normal(size=(3, 9)), 1)  # 4 members first, then 5 non-members; ties
    labels = np.r_[np.ones(4), np.zeros(5)]
    got = _auc_from_ranks(stats.rankdata(rows, axis=1), 4, 5)
    np.testing.assert_allclose(got, [roc_auc_score(labels, row) for row in rows], rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_boot", [1, 200])
def test_bootstrap_auc_interval_is_the_percentile_interval_of_stratified_resamples(n_boot):
    """The documented procedure done by hand: members and non-members (sorted) resampled with
    replacement from the two streams of SeedSequence(seed), each resample's AUC by the pairwise
    definition P(member > non-member) + ½ P(tie), the interval their (α/2, 1 − α/2) quantiles.
    n_boot = 1 is allowed: the interval is then the one resample's AUC."""
    scores, member = tied_scores(70, 5)
    members, nonmembers = scores[member], np.sort(scores[~member])
    member_rng, nonmember_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(7).spawn(2))
    resampled_members = members[member_rng.integers(0, members.size, (n_boot, members.size))]
    resampled_nonmembers = nonmembers[nonmember_rng.integers(0, nonmembers.size, (n_boot, nonmembers.size))]
    pairs = resampled_members[:, :, None] - resampled_nonmembers[:, None, :]
    aucs = (pairs > 0).mean((1, 2)) + 0.5 * (pairs == 0).mean((1, 2))
    point, lo, hi = bootstrap_auc(scores, member, n_boot=n_boot, seed=7, confidence=0.9)
    assert point == pytest.approx(roc_auc_score(member, scores), abs=1e-12)
    assert (lo, hi) == (pytest.approx(np.quantile(aucs, 0.05), abs=1e-12),
                        pytest.approx(np.quantile(aucs, 0.95), abs=1e-12))


def test_membership_metrics_decisions_and_nan_threshold():
    scores, member = hand_made()
    scores[0] = np.nan
    metrics = membership_metrics(scores, member, threshold=9.5, fpr_levels=(0.1,), n_boot=10)
    # the NaN member ranks lowest and is called a non-member; every other call is right
    assert metrics["accuracy"] == 19 / 20
    with pytest.raises(ValueError, match=r"^threshold must be a number \(±inf allowed\), got nan$"):
        membership_metrics(scores, member, threshold=np.nan)


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (57, 200), (1, 1)])
@pytest.mark.parametrize("confidence", [None, 0.9])
def test_wilson_interval_matches_scipy(k, n, confidence):
    """Wilson's score interval (default 95 %) against scipy's binomtest(...).proportion_ci."""
    got = wilson_interval(k, n) if confidence is None else wilson_interval(k, n, confidence)
    expected = stats.binomtest(k, n).proportion_ci(confidence_level=confidence or 0.95, method="wilson")
    assert got == (pytest.approx(expected.low, abs=1e-12), pytest.approx(expected.high, abs=1e-12))


@pytest.mark.parametrize("k1, n1, k2, n2, lo, hi", [
    (56, 70, 48, 80, 0.0524, 0.3339), (9, 10, 3, 10, 0.1705, 0.8090), (6, 7, 2, 7, 0.0582, 0.8062),
    (5, 56, 0, 29, -0.0381, 0.1926), (0, 10, 0, 20, -0.1611, 0.2775), (0, 10, 0, 10, -0.2775, 0.2775),
    (10, 10, 0, 20, 0.6791, 1.0), (10, 10, 0, 10, 0.6075, 1.0),
])
def test_newcombe_difference_reproduces_newcombes_table(k1, n1, k2, n2, lo, hi):
    """Newcombe (1998), Table II, method 10 (95 %), to the table's four decimals."""
    d, got_lo, got_hi = newcombe_difference(k1, n1, k2, n2)
    assert d == pytest.approx(k1 / n1 - k2 / n2)
    assert (got_lo, got_hi) == (pytest.approx(lo, abs=5e-5), pytest.approx(hi, abs=5e-5))


def test_newcombe_difference_at_another_confidence_is_built_from_scipys_wilson_intervals():
    k1, n1, k2, n2 = 56, 70, 48, 80
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = (stats.binomtest(k, n).proportion_ci(confidence_level=0.8, method="wilson")
                          for k, n in ((k1, n1), (k2, n2)))
    d, lo, hi = newcombe_difference(k1, n1, k2, n2, confidence=0.8)
    assert (lo, hi) == (pytest.approx(d - np.hypot(p1 - l1, u2 - p2), abs=1e-12),
                        pytest.approx(d + np.hypot(u1 - p1, p2 - l2), abs=1e-12))


def test_the_bootstrap_defaults_are_1000_resamples_from_seed_0():
    """A direct call without n_boot or seed gets the documented 1000 resamples from seed 0."""
    rng = np.random.default_rng(5)
    scores, member = rng.normal(size=60), np.arange(60) % 2
    assert bootstrap_auc(scores, member) == bootstrap_auc(scores, member, n_boot=1000, seed=0)
    default = membership_metrics(scores, member, threshold=0.0)
    assert default == membership_metrics(scores, member, threshold=0.0, n_boot=1000, seed=0)
    assert default != membership_metrics(scores, member, threshold=0.0, n_boot=1000, seed=1)
