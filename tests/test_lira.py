"""LiRA: its statistics against direct computations, its power on an over-fitted head, chance on
heads that never see the candidates, and the batched shadow heads against sequential training."""

import numpy as np
import pytest
import torch
from scipy import stats

from privssl.attacks.adaptive import train_clean_heads
from privssl.attacks.lira import candidate_pool, draw_training_sets, lira_scores, logit_confidence, membership
from privssl.attacks.mia import AttackSpec, attack_inputs, attack_mlp_scores, train_attack_mlp
from privssl.attacks.statistics import bootstrap_auc, tpr_at_fpr
from privssl.training.heads import HeadSpec, flatten, head_logits, train_head, unflatten

OVERFIT = HeadSpec(architecture="mlp", hidden=64, epochs=300, lr=0.01, init_seed=0)


def _pool(n=160, f=16, c=4, seed=0, signal=0.4):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    x = torch.randn(n, f, generator=g, dtype=torch.float64) + signal * torch.nn.functional.one_hot(y, f)
    return x, y, c


def test_logit_confidence_is_log_odds_of_the_true_class():
    logits = torch.randn(3, 5, 4, dtype=torch.float64)
    labels = torch.tensor([0, 3, 1, 2, 2])
    p = torch.softmax(logits, -1).gather(-1, labels.expand(3, 5)[..., None])[..., 0]
    torch.testing.assert_close(logit_confidence(logits, labels), torch.log(p / (1 - p)))
    saturated = torch.tensor([[[800.0, 0.0, -5.0]]], dtype=torch.float64)
    assert logit_confidence(saturated, torch.tensor([0])).item() == pytest.approx(800.0 - np.log1p(np.exp(-5.0)), abs=1e-9)


def test_online_and_offline_scores_against_scipy():
    rng = np.random.default_rng(0)
    shadows, candidates = 40, 6
    inside = rng.random((shadows, candidates)) < 0.5
    phi = rng.normal(0.0, 1.0, (shadows, candidates)) + 2.0 * inside
    target = rng.normal(1.0, 1.0, (3, candidates))
    online = lira_scores(torch.tensor(target), torch.tensor(phi), torch.tensor(inside), "online").numpy()
    offline = lira_scores(torch.tensor(target), torch.tensor(phi), torch.tensor(inside), "offline").numpy()
    for n in range(candidates):
        phi_in, phi_out = phi[inside[:, n], n], phi[~inside[:, n], n]
        expected = (stats.norm.logpdf(target[:, n], phi_in.mean(), phi_in.std(ddof=1))
                    - stats.norm.logpdf(target[:, n], phi_out.mean(), phi_out.std(ddof=1)))
        np.testing.assert_allclose(online[:, n], expected, rtol=1e-10)
        np.testing.assert_allclose(offline[:, n], stats.norm.logcdf(target[:, n], phi_out.mean(),
                                                                    phi_out.std(ddof=1)), rtol=1e-10)


def test_global_variance_is_the_pooled_within_candidate_variance():
    rng = np.random.default_rng(1)
    inside = rng.random((30, 5)) < 0.5
    phi = rng.normal(0, 1, (30, 5)) * np.arange(1, 6)
    target = rng.normal(0, 1, (2, 5))
    scores = lira_scores(torch.tensor(target), torch.tensor(phi), torch.tensor(inside), "offline", "global").numpy()
    out = ~inside
    means = np.array([phi[out[:, n], n].mean() for n in range(5)])
    pooled = np.sqrt(sum(((phi[out[:, n], n] - means[n]) ** 2).sum() for n in range(5)) / (out.sum() - 5))
    np.testing.assert_allclose(scores, stats.norm.logcdf(target, means, pooled), rtol=1e-10)


def test_queries_are_averaged():
    rng = np.random.default_rng(2)
    inside = torch.tensor(rng.random((20, 4)) < 0.5)
    phi = torch.tensor(rng.normal(0, 1, (20, 4, 3)))
    target = torch.tensor(rng.normal(0, 1, (2, 4, 3)))
    per_query = [lira_scores(target[..., q], phi[..., q], inside) for q in range(3)]
    torch.testing.assert_close(lira_scores(target, phi, inside), sum(per_query) / 3)


def _heads_and_scores(x, y, c, spec, n_shadows, n_targets, seed=0):
    sets = draw_training_sets(len(y), len(y) // 2, n_shadows + n_targets, seed)
    flat = train_clean_heads("finetune", x, y, sets, c, spec)
    logits = head_logits(unflatten(flat, {"weight1": (x.shape[1], spec.hidden), "bias1": (spec.hidden,),
                                         "weight2": (spec.hidden, c), "bias2": (c,)}), x)
    inside = membership(sets, len(y))
    phi = logit_confidence(logits, y)
    scores = lira_scores(phi[n_shadows:], phi[:n_shadows], inside[:n_shadows])
    return logits, inside, scores


def test_lira_exposes_an_overfitted_head_at_low_fpr_and_beats_the_shadow_mlp():
    x, y, c = _pool()
    n_shadows = 16
    logits, inside, scores = _heads_and_scores(x, y, c, OVERFIT, n_shadows, 4)
    members = inside[n_shadows:].reshape(-1).numpy()
    lira_tpr = tpr_at_fpr(scores.reshape(-1).numpy(), members, 0.01)["tpr"]
    # The paper's attack: an MLP on (probabilities, label) fitted on one shadow head's in/out.
    probs = torch.softmax(logits, -1)
    mlp = train_attack_mlp(attack_inputs(probs[0], y), inside[0].double(), AttackSpec(epochs=100), seed=0)
    mlp_scores = attack_mlp_scores(mlp, probs[n_shadows:], y).reshape(-1).numpy()
    mlp_tpr = tpr_at_fpr(mlp_scores, members, 0.01)["tpr"]
    assert lira_tpr > 0.5  # fifty times the 1 % a blind guess gets (measured: 0.84)
    assert lira_tpr > mlp_tpr + 0.2  # measured: 0.23 for the shadow MLP


def test_heads_that_never_see_the_candidates_give_chance_auc():
    x, y, c = _pool(n=320, seed=3)
    candidates = slice(0, 160)
    # Every head trains on its own half of *other* records; "membership" of the candidates is a
    # label drawn the same way but never used in training.
    sets = draw_training_sets(160, 80, 24, seed=5) + 160
    flat = train_clean_heads("finetune", x, y, sets, c, OVERFIT)
    logits = head_logits(unflatten(flat, {"weight1": (x.shape[1], 64), "bias1": (64,), "weight2": (64, c),
                                         "bias2": (c,)}), x[candidates])
    fake_inside = membership(draw_training_sets(160, 80, 24, seed=6), 160)
    phi = logit_confidence(logits, y[candidates])
    scores = lira_scores(phi[20:], phi[:20], fake_inside[:20]).reshape(-1).numpy()
    auc, lo, hi = bootstrap_auc(scores, fake_inside[20:].reshape(-1).numpy(), n_boot=500, seed=0)
    assert lo < 0.5 < hi
    assert abs(auc - 0.5) < 0.06


@pytest.mark.parametrize("batch_size", [None, 32])
def test_batched_shadow_heads_equal_sequential_training(batch_size):
    x, y, c = _pool(n=60)
    spec = HeadSpec(architecture="mlp", hidden=8, epochs=20, lr=0.01, batch_size=batch_size)
    sets = draw_training_sets(60, 30, 5, seed=1)
    batched = train_clean_heads("finetune", x, y, sets, c, spec)
    for b, s in enumerate(sets):
        torch.testing.assert_close(batched[b], flatten(train_head(spec, x[s], y[s], c))[0], rtol=1e-9, atol=1e-11)


def test_training_sets_are_uniform_subsets_of_the_right_size():
    sets = draw_training_sets(10, 5, 2000, seed=0)
    assert sets.shape == (2000, 5)
    assert all(len(set(s.tolist())) == 5 for s in sets[:50])
    frequency = membership(sets, 10).double().mean(0)
    assert torch.allclose(frequency, torch.full((10,), 0.5, dtype=torch.float64), atol=0.05)
    with pytest.raises(ValueError, match="cannot be drawn"):
        draw_training_sets(10, 11, 1, seed=0)


def test_bad_variant_names_are_refused():
    phi, inside = torch.zeros(4, 3, dtype=torch.float64), torch.tensor([[True, False, True]] * 4)
    with pytest.raises(ValueError, match="variant"):
        lira_scores(phi, phi, inside, variant="bayes")
    with pytest.raises(ValueError, match="variance"):
        lira_scores(phi, phi, inside, variance="median")


def _fit_by_hand(phi, side):
    """Mean and std per candidate of φ over the shadows on `side`, as lira._fit documents them:
    ddof = 1 where a candidate has two or more such shadows; the pooled within-candidate std
    (squares summed over candidates, over Σ (count − 1)) where it has one; the mean of every
    value on that side where it has none."""
    counts = side.sum(0)
    means = np.array([phi[side[:, n], n].mean() if counts[n] else phi[side].mean() for n in range(phi.shape[1])])
    squares = sum(((phi[side[:, n], n] - means[n]) ** 2).sum() for n in range(phi.shape[1]) if counts[n])
    pooled = np.sqrt(squares / np.maximum(counts - 1, 0).sum())
    stds = np.array([phi[side[:, n], n].std(ddof=1) if counts[n] > 1 else pooled for n in range(phi.shape[1])])
    return means, stds


def test_a_candidate_in_one_shadow_gets_the_pooled_deviation_not_one_fitted_from_it():
    """With one IN shadow a per-candidate std is 0/0 (ddof 1) or 0 (ddof 0): the score would be
    ±1e16 or NaN. The pooled deviation of the other candidates stands in; a candidate in no
    shadow falls back to the mean of all IN values."""
    rng = np.random.default_rng(5)
    inside = rng.random((12, 5)) < 0.5
    inside[:, 0] = np.arange(12) == 3  # candidate 0: one IN shadow
    inside[:, 1] = False  # candidate 1: none
    inside[:, 2] = np.arange(12) != 7  # candidate 2: one OUT shadow
    inside[:, 3] = np.isin(np.arange(12), [0, 9])  # candidate 3: two IN shadows, its own std (ddof 1)
    phi = rng.normal(0.0, 1.0, (12, 5)) * np.array([1.0, 1.0, 2.0, 3.0, 0.5]) + 1.5 * inside
    target = rng.normal(0.5, 1.0, (3, 5))
    mean_in, std_in = _fit_by_hand(phi, inside)
    mean_out, std_out = _fit_by_hand(phi, ~inside)
    assert 0.3 < std_in[0] < 3 and std_in[0] == std_in[1] and 0.3 < std_out[2] < 3  # pooled, not 0 or NaN
    online = lira_scores(torch.tensor(target), torch.tensor(phi), torch.tensor(inside), "online").numpy()
    expected = stats.norm.logpdf(target, mean_in, std_in) - stats.norm.logpdf(target, mean_out, std_out)
    np.testing.assert_allclose(online, expected, rtol=1e-10)
    offline = lira_scores(torch.tensor(target), torch.tensor(phi), torch.tensor(inside), "offline").numpy()
    np.testing.assert_allclose(offline, stats.norm.logcdf(target, mean_out, std_out), rtol=1e-10)
    assert np.isfinite(online).all() and np.abs(online).max() < 50


def test_one_global_deviation_uses_every_candidates_spread():
    rng = np.random.default_rng(6)
    inside = rng.random((10, 4)) < 0.5
    inside[:, 0] = np.arange(10) == 2
    phi = rng.normal(0, 1, (10, 4)) + inside
    target = rng.normal(0, 1, (2, 4))
    (mean_in, std_in), (mean_out, _) = _fit_by_hand(phi, inside), _fit_by_hand(phi, ~inside)
    pooled_in = std_in[0]  # candidate 0 has one IN shadow: its std is the pooled one
    pooled_out = np.sqrt(sum(((phi[~inside[:, n], n] - mean_out[n]) ** 2).sum() for n in range(4))
                         / ((~inside).sum(0) - 1).sum())
    online = lira_scores(torch.tensor(target), torch.tensor(phi), torch.tensor(inside), "online", "global").numpy()
    np.testing.assert_allclose(online, stats.norm.logpdf(target, mean_in, pooled_in)
                               - stats.norm.logpdf(target, mean_out, pooled_out), rtol=1e-10)


def test_identical_shadows_give_finite_scores_and_no_shadow_on_a_side_is_refused():
    phi = torch.full((6, 3), 2.0, dtype=torch.float64)  # a zero-noise release: φ never moves
    inside = torch.tensor([[True, False, True], [False, True, False]] * 3)
    online = lira_scores(phi[:2], phi, inside, "online")
    offline = lira_scores(phi[:2], phi, inside, "offline")
    assert torch.equal(online, torch.zeros(2, 3, dtype=torch.float64))
    torch.testing.assert_close(offline, torch.full((2, 3), np.log(0.5), dtype=torch.float64))
    with pytest.raises(ValueError, match="^no shadow head is on this side for any candidate: LiRA needs IN and OUT "
                                         "shadows$"):
        lira_scores(phi[:2], phi, torch.zeros(6, 3, dtype=torch.bool), "online")
    with pytest.raises(ValueError, match="shapes disagree"):
        lira_scores(phi[:2, :2], phi, inside)


def test_two_shadows_give_their_own_deviation_and_one_degree_of_freedom_pools():
    """Candidate 0 in exactly two IN shadows: its own std (ddof 1, one degree of freedom), not the
    pooled one. Candidates 1 and 2 each in one: they add no degree of freedom, so the pooled IN
    deviation rests on candidate 0's single one (Σ (count − 1) = 1)."""
    rng = np.random.default_rng(8)
    inside = np.zeros((8, 3), bool)
    inside[[1, 5], 0] = inside[2, 1] = inside[6, 2] = True
    phi = rng.normal(0, 1, (8, 3)) + 2 * inside
    target = rng.normal(1, 1, (2, 3))
    mean_in, std_in = _fit_by_hand(phi, inside)
    mean_out, std_out = _fit_by_hand(phi, ~inside)
    assert std_in[0] == pytest.approx(abs(phi[1, 0] - phi[5, 0]) / np.sqrt(2)) and std_in[1] == std_in[2] == std_in[0]
    online = lira_scores(torch.tensor(target), torch.tensor(phi), torch.tensor(inside), "online").numpy()
    np.testing.assert_allclose(online, stats.norm.logpdf(target, mean_in, std_in)
                               - stats.norm.logpdf(target, mean_out, std_out), rtol=1e-10)


def test_each_query_is_fitted_on_its_own_including_the_fallbacks():
    """With Q = 3 queries per candidate, means, deviations and the fallbacks (no IN shadow: the
    mean of all IN values; one IN shadow: the pooled deviation) are per query: the per-query
    scores, averaged."""
    rng = np.random.default_rng(9)
    inside = rng.random((10, 4)) < 0.5
    inside[:, 0] = False
    inside[:, 1] = np.arange(10) == 4
    phi = rng.normal(0, 1, (10, 4, 3)) * np.array([0.5, 1.0, 3.0]) + np.array([0.0, 2.0, -1.0])
    target = rng.normal(0, 1, (2, 4, 3))
    for variance in ("per_example", "global"):
        expected = np.zeros((2, 4))
        for q in range(3):
            mean_in, std_in = _fit_by_hand(phi[..., q], inside)
            mean_out, std_out = _fit_by_hand(phi[..., q], ~inside)
            if variance == "global":
                std_in = np.full(4, std_in[1])
                std_out = np.full(4, np.sqrt(sum(((phi[~inside[:, n], n, q] - mean_out[n]) ** 2).sum()
                                                 for n in range(4)) / ((~inside).sum(0) - 1).sum()))
            expected += (stats.norm.logpdf(target[..., q], mean_in, std_in)
                         - stats.norm.logpdf(target[..., q], mean_out, std_out)) / 3
        scores = lira_scores(torch.tensor(target), torch.tensor(phi), torch.tensor(inside), "online", variance)
        np.testing.assert_allclose(scores.numpy(), expected, rtol=1e-10)


def test_training_sets_may_be_one_record_or_the_whole_pool():
    assert draw_training_sets(10, 1, 3, seed=0).shape == (3, 1)
    assert draw_training_sets(10, 10, 2, seed=0).tolist() == [list(range(10))] * 2
    with pytest.raises(ValueError, match="^training sets of 0 records cannot be drawn from a pool of 10$"):
        draw_training_sets(10, 0, 1, seed=0)


def test_the_candidate_pool_is_the_splits_in_the_order_given():
    feats = {"finetune": torch.zeros(2, 3), "finetune_labels": torch.tensor([0, 1]),
             "nonmember": torch.ones(3, 3), "nonmember_labels": torch.tensor([2, 2, 1])}
    x, y = candidate_pool(feats, ["nonmember", "finetune"])
    assert torch.equal(x, torch.cat([torch.ones(3, 3), torch.zeros(2, 3)]))
    assert y.tolist() == [2, 2, 1, 0, 1]
