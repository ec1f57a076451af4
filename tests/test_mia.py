"""Membership inference: metric scores, thresholds, ROC summaries, and the attack end to end."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import special, stats
from sklearn.metrics import roc_auc_score

from privssl.attacks.mia import (
    AttackSpec,
    attack_inputs,
    attack_mlp,
    attack_mlp_scores,
    best_threshold,
    evaluate,
    metric_scores,
    tpr_at_fpr,
    train_attack_mlp,
    train_attack_mlps,
)
from privssl.release.protection import protected_heads
from privssl.training.heads import (
    DTYPE,
    HeadSpec,
    accuracy,
    flatten,
    parameter_shapes,
    predict_proba,
    train_head,
    unflatten,
)

N_CLASSES, DIM, N = 10, 32, 100
VICTIM_SPEC = HeadSpec(architecture="mlp", hidden=128, epochs=300, lr=1e-2)




def test_metric_scores_formulas():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.25, 0.5, 0.25], [1.0, 0.0, 0.0]])
    labels = np.array([0, 1, 2, 0])
    rows = np.arange(len(labels))
    p_y = probs[rows, labels]
    others = np.ones_like(probs, dtype=bool)
    others[rows, labels] = False
    # Song & Mittal: Mentr = −(1 − p_y) log p_y − Σ_{i≠y} p_i log(1 − p_i)
    mentr = -(1 - p_y) * np.log(p_y) - np.where(others, special.xlog1py(probs, -probs), 0).sum(1)
    expected = {"confidence": p_y, "entropy": special.xlogy(probs, probs).sum(1), "modified_entropy": -mentr,
                "loss": np.log(p_y), "correctness": (probs.argmax(1) == labels).astype(float)}
    stacked = torch.tensor(np.stack([probs, probs[::-1].copy()]))  # (heads, N, C)
    scores = metric_scores(stacked, torch.tensor(labels))
    for name, value in expected.items():
        np.testing.assert_allclose(scores[name][0].numpy(), value, rtol=1e-12, atol=1e-15, err_msg=name)
    assert scores["loss"][1].tolist() == pytest.approx(np.log(probs[::-1][rows, labels]).tolist())


def test_every_track_scores_the_metric_attacks_of_the_one_list():
    """One list of metric attacks (privssl.attacks.mia_spec): metric_scores computes each, and the
    contrastive and Semi-Leak tracks take theirs from it, leaving out only `loss`, which ranks the
    records as `confidence` does (its AUC and best-threshold accuracy are the confidence's, checked
    here on random posteriors); a track that re-listed its own would fall out of step."""
    from privssl.attacks import contrastive_spec, mia_spec, semi_leak_spec

    probs = torch.softmax(torch.randn(400, 5, generator=torch.Generator().manual_seed(2), dtype=DTYPE) * 3, -1)
    labels = torch.randint(0, 5, (400,), generator=torch.Generator().manual_seed(3))
    scores = metric_scores(probs, labels)
    assert tuple(scores) == mia_spec.METRIC_ATTACKS
    assert contrastive_spec.METRIC_ATTACKS is semi_leak_spec.METRIC_ATTACKS is mia_spec.DISTINCT_METRIC_ATTACKS
    assert set(mia_spec.METRIC_ATTACKS) - set(mia_spec.DISTINCT_METRIC_ATTACKS) == {"loss"}
    member = np.random.default_rng(4).random(400) < 0.5
    confidence, loss = scores["confidence"].numpy(), scores["loss"].numpy()
    assert roc_auc_score(member, loss) == roc_auc_score(member, confidence)
    assert (brute_force_accuracy(loss, member, best_threshold(loss, member))
            == brute_force_accuracy(confidence, member, best_threshold(confidence, member)))


def brute_force_accuracy(scores, is_member, t):
    return ((scores >= t) == is_member).mean()


def test_best_threshold_is_brute_force_optimum():
    rng = np.random.default_rng(0)
    for _ in range(20):
        is_member = rng.random(60) < 0.5
        scores = np.round(rng.normal(size=60) + 0.7 * is_member, 1)  # rounding makes ties
        best = max(brute_force_accuracy(scores, is_member, t) for t in [*np.unique(scores), np.inf, -np.inf])
        assert brute_force_accuracy(scores, is_member, best_threshold(scores, is_member)) == best


def brute_force_tpr(scores, is_member, fpr_target):
    rates = [((scores[is_member] >= t).mean(), (scores[~is_member] >= t).mean())
             for t in [*np.unique(scores), np.inf]]
    return max(tpr for tpr, fpr in rates if fpr <= fpr_target)


@pytest.mark.parametrize("fpr_target", [0.01, 0.1])
def test_tpr_at_fpr_random_scores(fpr_target):
    rng = np.random.default_rng(1)
    is_member = rng.random(500) < 0.5
    scores = rng.normal(size=500) + is_member
    assert tpr_at_fpr(scores, is_member, fpr_target) == brute_force_tpr(scores, is_member, fpr_target)


def test_tpr_at_fpr_with_tied_scores():
    # 200 non-members: 1 % FPR allows 2 false positives; members and non-members tie at the top
    scores = np.array([0.9, 0.8, 0.7] + [0.1] * 7 + [0.9, 0.8, 0.7] + [0.0] * 197)
    is_member = np.arange(210) < 10
    assert brute_force_tpr(scores, is_member, 0.01) == 0.2
    assert tpr_at_fpr(scores, is_member, 0.01) == 0.2


def test_evaluate_against_independent_formulas():
    rng = np.random.default_rng(2)
    is_member = rng.random(300) < 0.4
    scores = rng.normal(size=300) + 0.8 * is_member
    result = evaluate(scores, is_member, threshold=0.3)
    u = stats.mannwhitneyu(scores[is_member], scores[~is_member]).statistic
    assert result["auc"] == pytest.approx(u / (is_member.sum() * (~is_member).sum()), rel=1e-12)
    assert result["auc"] == pytest.approx(roc_auc_score(is_member, scores), rel=1e-12)
    assert result["accuracy"] == brute_force_accuracy(scores, is_member, 0.3)
    assert result["tpr_at_1pct_fpr"] == brute_force_tpr(scores, is_member, 0.01)


def test_evaluate_ranks_nan_scores_lowest():
    scores = np.array([0.9, 0.8, np.nan, 0.1])
    is_member = np.array([True, True, False, False])
    result = evaluate(scores, is_member, threshold=0.5)
    assert result["auc"] == 1.0 and result["accuracy"] == 1.0


def blobs(seed):
    """Ten heavily overlapping Gaussian classes: a head fits its members but generalises poorly."""
    means = 0.3 * torch.randn(N_CLASSES, DIM, generator=torch.Generator().manual_seed(99), dtype=DTYPE)
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, N_CLASSES, (N,), generator=g)
    return means[labels] + torch.randn(N, DIM, generator=g, dtype=DTYPE), labels


@pytest.fixture(scope="module")
def attack_setup():
    members, non_members, shadow_in, shadow_out = (blobs(seed) for seed in (1, 2, 3, 4))
    victim = train_head(VICTIM_SPEC, *members, N_CLASSES)
    shadow = train_head(VICTIM_SPEC, *shadow_in, N_CLASSES)
    is_member = torch.arange(2 * N) < N
    shadow_x, shadow_y = (torch.cat(pair) for pair in zip(shadow_in, shadow_out))
    shadow_probs = predict_proba(shadow, shadow_x)[0]
    attack = train_attack_mlp(attack_inputs(shadow_probs, shadow_y), is_member, AttackSpec(), seed=0)
    threshold = best_threshold(metric_scores(shadow_probs, shadow_y)["loss"].numpy(), is_member.numpy())
    queries, query_labels = (torch.cat(pair) for pair in zip(members, non_members))
    return dict(victim=victim, attack=attack, threshold=threshold, queries=queries, labels=query_labels,
                is_member=is_member.numpy(), members=members, non_members=non_members)


def attack_accuracies(setup, heads):
    """(attack MLP, loss threshold) accuracy of each stacked head on balanced members/non-members."""
    probs = predict_proba(heads, setup["queries"])
    mlp = ((attack_mlp_scores(setup["attack"], probs, setup["labels"]) >= 0.5).numpy() == setup["is_member"])
    loss = metric_scores(probs, setup["labels"])["loss"].numpy() >= setup["threshold"]
    return mlp.mean(1), (loss == setup["is_member"]).mean(1)


def test_attack_beats_chance_on_overfitted_head(attack_setup):
    victim = attack_setup["victim"]
    assert accuracy(victim, *attack_setup["members"]) == 1.0
    assert accuracy(victim, *attack_setup["non_members"]) < 0.6
    mlp, loss = attack_accuracies(attack_setup, victim)
    assert mlp[0] >= 0.75 and loss[0] >= 0.75


def test_attack_at_chance_under_huge_noise(attack_setup):
    victim = attack_setup["victim"]
    noisy, _ = protected_heads(flatten(victim)[0], "alm", [1e-4], repeats=8, delta=1e-5,
                               sensitivity={"sampling": "certified", "delta1": 1.0, "delta2": 1.0}, seed=0)
    heads = unflatten(noisy[0], parameter_shapes(VICTIM_SPEC, DIM, N_CLASSES))
    mlp, loss = attack_accuracies(attack_setup, heads)
    assert abs(mlp.mean() - 0.5) <= 0.06 and abs(loss.mean() - 0.5) <= 0.06


def test_stacked_attack_mlps_equal_one_training_each():
    """train_attack_mlps trains E MLPs at once; each equals the plain nn.Sequential training
    with the same seed (initialisation, permutations, Adam), written out here as the reference."""
    g = torch.Generator().manual_seed(0)
    inputs = torch.rand(3, 40, 6, generator=g)
    is_member = (torch.arange(40) % 2).double()
    spec = AttackSpec(hidden=8, layers=2, epochs=4, batch_size=16, lr=1e-2)
    stacked = train_attack_mlps(inputs, is_member, spec, seed=5)
    for e in range(3):
        torch.manual_seed(5)
        model = attack_mlp(6, spec)
        optimiser = torch.optim.Adam(model.parameters(), lr=spec.lr)
        order = torch.Generator().manual_seed(5)
        for _ in range(spec.epochs):
            permutation = torch.randperm(40, generator=order)
            for start in range(0, 40, spec.batch_size):
                idx = permutation[start:start + spec.batch_size]
                loss = F.binary_cross_entropy_with_logits(model(inputs[e, idx]).squeeze(-1), is_member[idx].float())
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        for ours, reference in zip(stacked[e].parameters(), model.parameters()):
            torch.testing.assert_close(ours, reference, rtol=1e-4, atol=1e-5)
