"""LiRA's metrics with the candidate record as the unit (privssl.attacks.clustered): T targets
decide the same candidates, so repeating one target's decisions T times must not narrow any
interval, while independent decisions narrow it as pooled ones do."""

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from privssl.attacks import clustered
from privssl.attacks.clustered import cluster_bootstrap_auc, clustered_membership_metrics, clustered_rate
from privssl.attacks.statistics import bootstrap_auc, clopper_pearson, tpr_at_fpr


def one_target(rng, records=400):
    """Scores of one target on `records` candidates, half of them members (shifted by 0.6)."""
    member = rng.permutation(np.arange(records) < records // 2)
    return rng.normal(0.6 * member, 1.0), member


def test_the_auc_point_is_the_auc_of_all_decisions():
    rng = np.random.default_rng(0)
    scores, member = rng.normal(size=(5, 60)), rng.random((5, 60)) < 0.5
    scores[0, :3] = scores[1, :3]  # ties across targets
    auc, _, _ = cluster_bootstrap_auc(scores, member, n_boot=20)
    assert auc == pytest.approx(roc_auc_score(member.reshape(-1), scores.reshape(-1)))


def test_repeated_targets_keep_the_one_target_width():
    """T copies of one target's decisions: T times the decisions, the same records. The clustered
    interval keeps the one-target width; the decision bootstrap would shrink it by √T."""
    rng = np.random.default_rng(1)
    scores, member = one_target(rng)
    tiled_scores, tiled_member = np.tile(scores, (8, 1)), np.tile(member, (8, 1))
    _, lo1, hi1 = bootstrap_auc(scores, member, n_boot=800, seed=3)
    _, lo8, hi8 = cluster_bootstrap_auc(tiled_scores, tiled_member, n_boot=800, seed=3)
    _, plo, phi = bootstrap_auc(tiled_scores.reshape(-1), tiled_member.reshape(-1), n_boot=800, seed=3)
    assert (hi8 - lo8) == pytest.approx(hi1 - lo1, rel=0.15)
    assert (phi - plo) < 0.5 * (hi8 - lo8)


def test_independent_targets_narrow_the_interval_like_pooled_decisions():
    rng = np.random.default_rng(2)
    draws = [one_target(rng) for _ in range(8)]
    scores, member = np.stack([s for s, _ in draws]), np.stack([m for _, m in draws])
    _, lo, hi = cluster_bootstrap_auc(scores, member, n_boot=800, seed=4)
    _, plo, phi = bootstrap_auc(scores.reshape(-1), member.reshape(-1), n_boot=800, seed=4)
    assert (hi - lo) == pytest.approx(phi - plo, rel=0.25)


def test_cluster_bootstrap_auc_covers_with_record_effects():
    """Each candidate carries an effect shared by all targets (its 'difficulty'); the population's
    AUC, from a Monte Carlo of 200,000 fresh candidates, is covered by the 95 % intervals."""
    rng = np.random.default_rng(5)
    sd = 1.0

    def sample(records, targets):
        effect = rng.normal(0, sd, records)
        member = rng.random((targets, records)) < 0.5
        return effect[None] + 0.5 * member + rng.normal(0, 1, (targets, records)), member

    big, big_member = sample(200_000, 1)
    truth = roc_auc_score(big_member[0], big[0])
    hits = 0
    for _ in range(200):
        scores, member = sample(150, 6)
        _, lo, hi = cluster_bootstrap_auc(scores, member, n_boot=300, seed=int(rng.integers(1 << 30)))
        hits += lo <= truth <= hi
    assert 0.88 <= hits / 200 <= 0.99  # 200 data sets: ±0.03 of 0.95 is the binomial noise


def test_clustered_rate_limits():
    members = np.full(300, 3)
    hits_alike = np.where(np.arange(300) < 90, 3, 0)  # each record flagged in all or none of its decisions
    rate, lo, hi = clustered_rate(hits_alike, members)
    assert rate == pytest.approx(0.3)
    assert (lo, hi) == pytest.approx(clopper_pearson(90, 300), abs=0.005)  # the records, not the 900 decisions
    rng = np.random.default_rng(6)
    hits_free = rng.binomial(3, 0.3, 300)
    rate, lo, hi = clustered_rate(hits_free, members)
    plo, phi = clopper_pearson(int(hits_free.sum()), 900)
    assert (hi - lo) == pytest.approx(phi - plo, rel=0.15)
    with pytest.raises(ValueError, match="at least 2 records"):
        clustered_rate([1, 0], [1, 0])


def test_metrics_of_a_lira_layout():
    rng = np.random.default_rng(7)
    draws = [one_target(rng, 100) for _ in range(4)]
    scores, member = np.stack([s for s, _ in draws]), np.stack([m for _, m in draws])
    metrics = clustered_membership_metrics(scores, member, 0.3, (0.01, 0.1), n_boot=200)
    right = (scores >= 0.3) == member
    assert (metrics["records"], metrics["draws"]) == (100, 4)
    assert (metrics["n_members"], metrics["n_nonmembers"]) == (member.sum(), (~member).sum())
    assert metrics["accuracy"] == pytest.approx(right.mean())
    assert metrics["accuracy_lo"] < right.mean() < metrics["accuracy_hi"]
    # the TPR at 10 % FPR: flagged members over members at the threshold allowing 10 % false positives
    nonmember_scores = np.sort(scores[~member])
    threshold = nonmember_scores[int(np.ceil(0.9 * nonmember_scores.size))]
    assert metrics["tpr_at_10pct_fpr"] == pytest.approx((scores[member] >= threshold).mean(), abs=0.02)
    assert metrics["fp_at_10pct_fpr"] <= 0.1 * (~member).sum()


# ------------------------------------------------------------------------------ exact values (issue 28's mutants)


def brute_force_interval(scores, member, n_boot, seed, confidence=0.95):
    """The cluster bootstrap written out: the seed's (n_boot, records) draw of record indices, each
    resample all decisions of the drawn records (a record drawn twice counts twice), its AUC by
    scikit-learn (NaN without both kinds), the percentile interval ignoring NaN."""
    records = scores.shape[1]
    draws = np.random.default_rng(seed).integers(0, records, (n_boot, records))
    aucs = []
    for idx in draws:
        s, m = scores[:, idx].reshape(-1), member[:, idx].reshape(-1)
        aucs.append(roc_auc_score(m, s) if 0 < m.sum() < m.size else np.nan)
    alpha = 1 - confidence
    return np.nanquantile(aucs, [alpha / 2, 1 - alpha / 2])


def tied_layout(seed=11, targets=3, records=30):
    """Scores on a coarse grid (ties within and across targets), members not half of the decisions."""
    rng = np.random.default_rng(seed)
    member = rng.random((targets, records)) < 0.35
    return np.round(rng.normal(0.8 * member, 1.0) * 2) / 2, member


@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_the_cluster_bootstrap_is_the_resampling_of_records_written_out(confidence):
    scores, member = tied_layout()
    _, lo, hi = cluster_bootstrap_auc(scores, member, n_boot=60, seed=9, confidence=confidence)
    assert (lo, hi) == pytest.approx(brute_force_interval(scores, member, 60, 9, confidence), abs=1e-12)


def test_the_cluster_bootstrap_in_chunks_draws_the_same_resamples(monkeypatch):
    """Memory caps the resamples held at once; drawing them 4 at a time (the last chunk short)
    draws the same ones as drawing them at once."""
    scores, member = tied_layout(seed=12)
    monkeypatch.setattr(clustered, "_MAX_BOOT_ELEMENTS", 4 * scores.size + 1)
    _, lo, hi = cluster_bootstrap_auc(scores, member, n_boot=10, seed=3)
    assert (lo, hi) == pytest.approx(brute_force_interval(scores, member, 10, 3), abs=1e-12)


def test_the_cluster_bootstrap_defaults_to_1000_resamples_at_seed_0():
    scores, member = tied_layout(seed=13, records=12)
    assert cluster_bootstrap_auc(scores, member) == cluster_bootstrap_auc(scores, member, 1000, 0, 0.95)
    assert cluster_bootstrap_auc(scores, member) != cluster_bootstrap_auc(scores, member, 1001, 0, 0.95)
    assert cluster_bootstrap_auc(scores, member) != cluster_bootstrap_auc(scores, member, 1000, 1, 0.95)


def test_one_resample_is_allowed_and_a_count_that_is_not_one_is_refused():
    scores, member = tied_layout(seed=14)
    _, lo, hi = cluster_bootstrap_auc(scores, member, n_boot=1, seed=2)
    assert lo == hi == pytest.approx(brute_force_interval(scores, member, 1, 2)[0], abs=1e-12)
    for bad in (0, 2.5):
        with pytest.raises(ValueError, match=f"n_boot must be a positive integer, got {bad}"):
            cluster_bootstrap_auc(scores, member, n_boot=bad)


@pytest.mark.parametrize("scores_shape, member_shape", [((6,), (6,)), ((2, 6), (2, 5)), ((3, 1), (3, 1))])
def test_decisions_not_laid_out_as_targets_by_at_least_2_records_are_refused(scores_shape, member_shape):
    with pytest.raises(ValueError, match=r"\(targets, records\) of one shape with at least 2 records"):
        cluster_bootstrap_auc(np.zeros(scores_shape), np.ones(member_shape, bool))


def test_two_records_are_enough():
    scores, member = np.array([[0.2, 0.9], [0.4, 0.7]]), np.array([[False, True], [True, False]])
    auc, _, _ = cluster_bootstrap_auc(scores, member, n_boot=5)
    assert auc == pytest.approx(roc_auc_score(member.reshape(-1), scores.reshape(-1)))


def test_clustered_rate_of_a_case_computed_by_hand():
    """Records with 2, 2, 1, 3 member decisions (and one with none, which does not count), 1, 2, 0,
    3 of them flagged: rate 6/8. Residuals h − r·m = −½, ½, −¾, ¾ sum to 13/8 in squares, so the
    clustered variance is (13/8)/8² · 4/3 = 13/384 and n* = (3/16)/(13/384) = 72/13 decisions
    (fewer than the 8 decisions), of which r·n* = 54/13 flagged."""
    rate, lo, hi = clustered_rate([1, 2, 0, 0, 3], [2, 2, 0, 1, 3])
    n, x = 72 / 13, 54 / 13
    assert rate == 0.75
    assert lo == pytest.approx(stats.beta.ppf(0.025, x, n - x + 1), rel=1e-12)
    assert hi == pytest.approx(stats.beta.ppf(0.975, x + 1, n - x), rel=1e-12)


def test_clustered_rate_at_80_percent_confidence_and_2_records():
    """1 of 5 and 0 of 5 flagged: rate 0.1, variance (½² + ½²)/10² · 2 = 0.01, n* = 0.09/0.01 = 9,
    0.9 flagged decisions (a count below 1 still has a lower bound above 0)."""
    rate, lo, hi = clustered_rate([1, 0], [5, 5], confidence=0.8)
    assert rate == pytest.approx(0.1)
    assert lo == pytest.approx(stats.beta.ppf(0.1, 0.9, 9.1), rel=1e-9)
    assert hi == pytest.approx(stats.beta.ppf(0.9, 1.9, 8.1), rel=1e-9)


def test_a_rate_without_variance_counts_its_records():
    """Every record flagged in the same proportion (1 of 2, 2 of 4, 3 of 6): the linearised variance
    is 0, so n* falls back to the 3 records, not to the 12 decisions."""
    rate, lo, hi = clustered_rate([1, 2, 3], [2, 4, 6])
    assert rate == 0.5
    assert (lo, hi) == pytest.approx((stats.beta.ppf(0.025, 1.5, 2.5), stats.beta.ppf(0.975, 2.5, 1.5)), rel=1e-12)


def test_rates_of_0_and_1_have_the_clopper_pearson_end_at_their_records():
    """No or every member decision flagged: [0, 1 − (α/2)^(1/k)] and [(α/2)^(1/k), 1] with k = 3
    records, the exact Clopper–Pearson ends for 0 and k of k."""
    assert clustered_rate([0, 0, 0], [1, 2, 3]) == pytest.approx((0.0, 0.0, 1 - 0.025 ** (1 / 3)), rel=1e-12)
    assert clustered_rate([1, 2, 3], [1, 2, 3]) == pytest.approx((1.0, 0.025 ** (1 / 3), 1.0), rel=1e-12)


def test_metrics_are_the_clustered_intervals_at_the_given_seed_and_threshold():
    """Unbalanced members (fewer members than non-members), a score exactly at the threshold (a
    decision for member), ties at the TPR's threshold: every metric is its clustered estimate."""
    scores, member = tied_layout(seed=15, targets=4, records=40)
    threshold = 0.5  # a grid value: some decisions sit exactly on it
    assert (scores == threshold).any()
    metrics = clustered_membership_metrics(scores, member, threshold, (0.05, 0.2), n_boot=50, seed=5)
    right = (scores >= threshold) == member
    assert (metrics["n_members"], metrics["n_nonmembers"]) == (member.sum(), (~member).sum())
    assert metrics["n_members"] < metrics["n_nonmembers"]
    assert metrics["accuracy"] == pytest.approx(right.mean(), abs=1e-12)
    assert (metrics["auc"], metrics["auc_lo"], metrics["auc_hi"]) == \
        cluster_bootstrap_auc(scores, member, n_boot=50, seed=5)
    pooled = tpr_at_fpr(scores.reshape(-1), member.reshape(-1), 0.2)
    flagged = scores >= pooled["threshold"]
    assert metrics["tpr_at_20pct_fpr"] == pytest.approx(pooled["tpr"], abs=1e-12)
    assert (metrics["tpr_at_20pct_fpr_lo"], metrics["tpr_at_20pct_fpr_hi"]) == \
        pytest.approx(clustered_rate((flagged & member).sum(0), member.sum(0))[1:], abs=1e-12)
    assert metrics["fp_at_20pct_fpr"] == (flagged & ~member).sum()


def test_metrics_default_to_1000_resamples_at_seed_0_and_refuse_a_nan_threshold():
    scores, member = tied_layout(seed=16, records=12)
    assert clustered_membership_metrics(scores, member, 0.0) == \
        clustered_membership_metrics(scores, member, 0.0, n_boot=1000, seed=0)
    assert clustered_membership_metrics(scores, member, 0.0)["auc_lo"] != \
        clustered_membership_metrics(scores, member, 0.0, n_boot=1000, seed=1)["auc_lo"]
    with pytest.raises(ValueError, match=r"^threshold must be a number \(±inf allowed\), got nan$"):
        clustered_membership_metrics(scores, member, float("nan"))


@pytest.mark.parametrize("hits, members", [([2, 0], [1, 1]), ([-1, 1], [1, 1]), ([1, 1, 1], [1, 1])])
def test_hits_outside_0_to_their_member_decisions_are_refused(hits, members):
    with pytest.raises(ValueError, match="hits must be per record between 0 and its member decisions"):
        clustered_rate(hits, members)


def test_the_interval_is_the_quantiles_of_each_resamples_pairwise_auc_weighted_by_record_counts():
    """Each resample draws records with replacement (the module's generator, one chunk here) and
    weighs every decision by its record's count: its AUC, computed here pair by pair (ties ½), and
    the percentile interval of those AUCs must be the function's exactly (whole-number sums)."""
    rng = np.random.default_rng(3)
    scores, member = np.round(rng.normal(size=(3, 12)), 1), rng.random((3, 12)) < 0.5  # rounding: ties
    scores[member] += 0.3
    n_boot, seed = 40, 2
    draws = np.random.default_rng(seed).integers(0, 12, (n_boot, 12))
    record = np.broadcast_to(np.arange(12), scores.shape)
    m_score, m_record = scores[member], record[member]
    n_score, n_record = scores[~member], record[~member]
    pair_wins = (m_score[:, None] > n_score[None, :]) + 0.5 * (m_score[:, None] == n_score[None, :])
    aucs = []
    for draw in draws:
        w = np.bincount(draw, minlength=12).astype(float)
        wm, wn = w[m_record], w[n_record]
        aucs.append((wm[:, None] * wn[None, :] * pair_wins).sum() / (wm.sum() * wn.sum()))
    lo, hi = np.nanquantile(aucs, [0.025, 0.975])
    _, got_lo, got_hi = cluster_bootstrap_auc(scores, member, n_boot=n_boot, seed=seed)
    assert (got_lo, got_hi) == (lo, hi)
    assert lo < hi
