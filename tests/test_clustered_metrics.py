"""LiRA's metrics with the candidate record as the unit (privssl.attacks.clustered): T targets
decide the same candidates, so repeating one target's decisions T times must not narrow any
interval, while independent decisions narrow it as pooled ones do."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from privssl.attacks.clustered import cluster_bootstrap_auc, clustered_membership_metrics, clustered_rate
from privssl.attacks.statistics import bootstrap_auc, clopper_pearson


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
