"""RMIA (Zarifzadeh et al. 2024) against its definition computed pair by pair, a hand-worked case,
and the attacker's choice of a."""

import numpy as np
import pytest
import torch

from privssl.attacks.rmia import choose_offline_a, label_probability, offline_prior, rmia_scores


def _definition(target, reference, reference_in, pop_target, pop_reference, variant, a, gamma):
    """Score(x) = Pr_z[LR(x, z) ≥ γ] by loops over targets, candidates and population records, with
    Pr(x) written out from the paper (online: the balanced IN/OUT average; offline: ½((1+a)OUT + 1 − a))."""
    T, N = target.shape
    Z = pop_target.shape[1]
    out = np.zeros((T, N))
    for n in range(N):
        ins = [reference[s, n] for s in range(len(reference)) if reference_in[s, n]]
        outs = [reference[s, n] for s in range(len(reference)) if not reference_in[s, n]]
        p_out = np.mean(outs)
        prior_x = 0.5 * ((1 + a) * p_out + 1 - a)
        if variant == "online" and ins:
            prior_x = 0.5 * (np.mean(ins) + p_out)
        for t in range(T):
            count = 0
            for z in range(Z):
                p_out_z = np.mean(pop_reference[:, z])
                prior_z = 0.5 * ((1 + a) * p_out_z + 1 - a) if variant == "offline" else p_out_z
                lr = (target[t, n] / prior_x) / (pop_target[t, z] / prior_z)
                count += lr >= gamma
            out[t, n] = count / Z
    return out


@pytest.mark.parametrize("variant", ["online", "offline"])
@pytest.mark.parametrize("gamma", [1.0, 2.0])
def test_scores_equal_the_pairwise_definition(variant, gamma):
    rng = np.random.default_rng(3)
    T, S, N, Z = 3, 6, 9, 11
    target, reference = rng.uniform(0.05, 1, (T, N)), rng.uniform(0.05, 1, (S, N))
    reference_in = rng.random((S, N)) < 0.5
    reference_in[0, :] = False  # every candidate has an OUT head
    reference_in[1, :] = True  # and an IN head
    pop_target, pop_reference = rng.uniform(0.05, 1, (T, Z)), rng.uniform(0.05, 1, (S, Z))
    got = rmia_scores(*map(torch.tensor, (target, reference, reference_in, pop_target, pop_reference)), variant,
                      a=0.3, gamma=gamma)
    np.testing.assert_allclose(got.numpy(), _definition(target, reference, reference_in, pop_target, pop_reference,
                                                        variant, 0.3, gamma))


def test_a_hand_worked_offline_score():
    # one target, one candidate x (OUT in both references: Pr_OUT(x) = 0.4), a = 0.5:
    # Pr(x) = ½ (1.5 · 0.4 + 0.5) = 0.55, ratio_x = 0.66 / 0.55 = 1.2.
    # z1: Pr_OUT = 0.2, Pr(z1) = ½ (0.3 + 0.5) = 0.4, ratio = 0.4 / 0.4 = 1.0   -> LR 1.2  ≥ 1
    # z2: Pr_OUT = 0.6, Pr(z2) = ½ (0.9 + 0.5) = 0.7, ratio = 0.91 / 0.7 = 1.3 -> LR 0.92 < 1
    # z3: Pr_OUT = 1.0, Pr(z3) = 1.0,                  ratio = 0.5              -> LR 2.4  ≥ 1 (and ≥ 2)
    target = torch.tensor([[0.66]])
    reference = torch.tensor([[0.3], [0.5]])
    reference_in = torch.tensor([[False], [False]])
    pop_target = torch.tensor([[0.4, 0.91, 0.5]])
    pop_reference = torch.tensor([[0.1, 0.6, 1.0], [0.3, 0.6, 1.0]])
    assert offline_prior(torch.tensor(0.4), 0.5).item() == pytest.approx(0.55)
    score = rmia_scores(target, reference, reference_in, pop_target, pop_reference, "offline", a=0.5)
    assert score.item() == pytest.approx(2 / 3)
    score = rmia_scores(target, reference, reference_in, pop_target, pop_reference, "offline", a=0.5, gamma=2.0)
    assert score.item() == pytest.approx(1 / 3)


def test_online_prior_balances_unequal_in_and_out_counts():
    # x is IN 1 of 4 references: the plain mean (0.9 + 3 · 0.1) / 4 = 0.3 would let the OUT heads weigh
    # three times; the paper's half-IN references give ½ (0.9 + 0.1) = 0.5, so ratio_x = 0.5 / 0.5 = 1
    reference = torch.tensor([[0.9], [0.1], [0.1], [0.1]])
    reference_in = torch.tensor([[True], [False], [False], [False]])
    pop = torch.tensor([[0.5, 0.5]])
    ref_pop = torch.full((4, 2), 0.5)
    score = rmia_scores(torch.tensor([[0.5]]), reference, reference_in, pop, ref_pop, "online", gamma=1.0)
    assert score.item() == 1.0  # ratio_x = 1 = ratio_z: both z dominated exactly (LR = 1 ≥ γ)
    score = rmia_scores(torch.tensor([[0.49]]), reference, reference_in, pop, ref_pop, "online", gamma=1.0)
    assert score.item() == 0.0


@pytest.mark.parametrize("a", [0.0, 0.5])
def test_a_candidate_in_every_reference_reads_the_linear_model_backwards(a):
    # candidate 0 is IN both references (Pr_IN = 0.8); candidate 1 is OUT of both (Pr_OUT = 0.2, 0.4)
    reference = torch.tensor([[0.8, 0.2], [0.8, 0.4]])
    reference_in = torch.tensor([[True, False], [True, False]])
    # a = 0.5: Pr_OUT = (0.8 − 0.5) / 0.5 = 0.6; a = 0 has no inverse: the OUT mean of all candidates, 0.3
    pr_out = 0.6 if a else 0.3
    expected_prior = 0.5 * ((1 + a) * pr_out + 1 - a)
    pop = torch.tensor([[1.0]])
    ref_pop = torch.tensor([[1.0], [1.0]])  # ratio_z = 1 / prior_z(1.0) = 1
    for variant in ("offline", "online"):  # online: no OUT head, so the offline estimate
        for tweak, dominated in ((1.001, 1.0), (0.999, 0.0)):
            target = torch.tensor([[expected_prior * tweak, 0.5]])
            score = rmia_scores(target, reference, reference_in, pop, ref_pop, variant, a=a)
            assert score[0, 0].item() == dominated, (variant, tweak)


def test_label_probability_is_the_softmax_of_the_label():
    logits = torch.tensor([[[2.0, 0.0, -1.0], [0.0, 3.0, 1.0]]])
    labels = torch.tensor([0, 2])
    expected = torch.softmax(logits.double(), -1)[0, [0, 1], [0, 2]]
    torch.testing.assert_close(label_probability(logits, labels)[0], expected)


def _heads(rng, S, N, in_boost, difficulty_spread):
    """Pr(x|θ) of S heads: a per-candidate difficulty (OUT level) plus a boost when IN."""
    level = rng.uniform(0.5 - difficulty_spread, 0.5 + difficulty_spread, N)
    inside = rng.random((S, N)) < 0.5
    p = np.clip(level + in_boost * inside + rng.normal(0, 0.02, (S, N)), 0.01, 0.99)
    return torch.tensor(p), torch.tensor(inside)


def test_the_attacker_chooses_a_by_its_own_heads():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    # candidates of very different difficulty: normalising by Pr_OUT(x) (a near 1) separates IN from
    # OUT, a = 0 (Pr(x) nearly constant) ranks by difficulty instead
    reference, reference_in = _heads(rng, 8, 400, in_boost=0.05, difficulty_spread=0.45)
    population = torch.tensor(rng.uniform(0.05, 0.95, (8, 50)))
    # independently: head 0 attacked with heads 1.. as references, the AUC of each a of the grid
    aucs = {a: roc_auc_score(reference_in[0].numpy(),
                             rmia_scores(reference[:1], reference[1:], reference_in[1:], population[:1],
                                         population[1:], "offline", a)[0].numpy())
            for a in np.round(np.linspace(0, 1, 11), 1)}
    chosen = choose_offline_a(reference, reference_in, population)
    assert chosen == max(aucs, key=aucs.get)
    assert chosen >= 0.8 and aucs[chosen] > aucs[0.0] + 0.2


def test_rmia_separates_members_with_one_reference_head():
    rng = np.random.default_rng(1)
    S, T, N = 1, 4, 2000
    level = rng.uniform(0.1, 0.9, N)
    ref_in = torch.tensor(rng.random((S, N)) < 0.5)
    target_in = rng.random((T, N)) < 0.5
    noise = lambda shape: rng.normal(0, 0.01, shape)  # noqa: E731
    reference = torch.tensor(np.clip(level + 0.08 * ref_in.numpy() + noise((S, N)), 0.01, 0.99))
    target = torch.tensor(np.clip(level + 0.08 * target_in + noise((T, N)), 0.01, 0.99))
    pop_level = rng.uniform(0.1, 0.9, 300)
    pop_reference = torch.tensor(np.clip(pop_level + noise((S, 300)), 0.01, 0.99))
    pop_target = torch.tensor(np.clip(pop_level + noise((T, 300)), 0.01, 0.99))
    scores = rmia_scores(target, reference, ref_in, pop_target, pop_reference, "offline", a=1.0).numpy()
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(target_in.reshape(-1), scores.reshape(-1)) > 0.8
    # the raw Pr(x|θ), without the references' normalisation, ranks by difficulty: near chance
    assert roc_auc_score(target_in.reshape(-1), target.numpy().reshape(-1)) < 0.65


def test_bad_arguments_are_refused():
    p = torch.full((2, 3), 0.5)
    inside = torch.zeros(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="variant"):
        rmia_scores(p, p, inside, p, p, "pairwise")
    with pytest.raises(ValueError, match="a = 1.5"):
        rmia_scores(p, p, inside, p, p, "offline", a=1.5)
    with pytest.raises(ValueError, match="γ = 0"):
        rmia_scores(p, p, inside, p, p, "offline", gamma=0.0)
    with pytest.raises(ValueError, match="shapes disagree"):
        rmia_scores(p, p[:, :2], inside, p, p, "offline")
    with pytest.raises(ValueError, match="no reference head"):
        rmia_scores(p, p, ~inside, p, p, "offline")
    with pytest.raises(ValueError, match="at least 2 reference heads"):
        choose_offline_a(p[:1], inside[:1], p[:1])
