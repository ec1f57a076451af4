"""Thesis Ch. 3 attacks (privssl.attacks.semi_leak): the distances between posteriors against
scipy, A_DA's features, A_NN's input, the top-1 defence, the JS distance of the entropy
histograms, and the attack protocol on synthetic targets whose members are known to leak (or not):
target and shadow with different membership masks and posteriors, so that an attack scoring the
shadow's posteriors instead of the target's shows, and each row's per-record scores against it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial import distance
from sklearn.metrics import roc_auc_score

from privssl.attacks.mia import AttackSpec, metric_scores
from privssl.attacks.semi_leak import (
    Case,
    Observed,
    Records,
    RowScores,
    augmentation_features,
    distance_matrix,
    entropy_js_distance,
    run_attacks,
    sorted_posteriors,
    top1_posteriors,
)
from privssl.attacks.semi_leak_spec import ATTACKS, DA_ATTACK, NN_ATTACK
from privssl.training.semi_supervised_spec import MEMBER_KINDS

SCIPY = {"js": distance.jensenshannon, "cosine": distance.cosine, "correlation": distance.correlation,
         "euclidean": distance.euclidean}


def dirichlet(shape, seed: int, concentration: float = 1.0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.dirichlet(np.full(shape[-1], concentration), shape[:-1]))


def scipy_matrix(a: np.ndarray, b: np.ndarray, similarity: str) -> np.ndarray:
    return np.array([[SCIPY[similarity](p, q) for q in b] for p in a])


@pytest.mark.parametrize("similarity", list(SCIPY))
def test_distance_matrix_agrees_with_scipy_pairwise_over_a_batch(similarity):
    a, b = dirichlet((2, 4, 5), 0), dirichlet((2, 3, 5), 1)  # a batch of 2, K = 4 against L = 3 rows
    got = distance_matrix(a, b, similarity)
    assert got.shape == (2, 4, 3)
    for i in range(2):
        expected = scipy_matrix(a[i].numpy(), b[i].numpy(), similarity)  # scipy's JS: natural log
        assert np.allclose(got[i].numpy(), expected, rtol=1e-9, atol=1e-12)


def test_js_distance_is_0_for_identical_rows_and_sqrt_ln2_for_disjoint_one_hots():
    rows = dirichlet((4, 6), 2)
    assert torch.equal(torch.diagonal(distance_matrix(rows, rows, "js")), torch.zeros(4, dtype=torch.float64))
    one_hots = torch.eye(3, dtype=torch.float64)
    expected = math.sqrt(math.log(2)) * (1 - torch.eye(3, dtype=torch.float64))
    assert torch.allclose(distance_matrix(one_hots, one_hots, "js"), expected, rtol=1e-12, atol=0)


def test_distance_matrix_refuses_an_unknown_similarity_naming_it():
    rows = dirichlet((2, 3), 0)
    with pytest.raises(ValueError, match="unknown similarity 'kl'"):
        distance_matrix(rows, rows, "kl")


@pytest.mark.parametrize("similarity", ["js", "euclidean"])
def test_augmentation_features_are_the_three_sorted_flattened_matrices(similarity):
    k = 3
    weak, strong = dirichlet((2, 5, k, 4), 3), dirichlet((2, 5, k, 4), 4)  # (batch, records, K, classes)
    features = augmentation_features(weak, strong, similarity)
    assert features.shape == (2, 5, 3 * k * k)
    blocks = features.reshape(2, 5, 3, k * k)
    assert (blocks[..., :-1] >= blocks[..., 1:]).all()  # each block in descending order
    for i in range(2):
        for r in range(5):
            w, s = weak[i, r].numpy(), strong[i, r].numpy()
            expected = np.concatenate([np.sort(scipy_matrix(x, y, similarity).ravel())[::-1]
                                       for x, y in ((w, w), (s, s), (w, s))])
            assert np.allclose(features[i, r].numpy(), expected, atol=1e-6)


def test_sorted_posteriors_are_in_descending_order():
    probs = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]], dtype=torch.float64)
    assert torch.equal(sorted_posteriors(probs), torch.tensor([[0.6, 0.3, 0.1], [0.5, 0.3, 0.2]]))


def test_top1_posteriors_keep_the_label_and_its_posterior_and_spread_the_rest():
    probs = dirichlet((3, 7, 5), 5)
    out = top1_posteriors(probs)
    top, label = probs.max(-1)
    assert torch.equal(out.argmax(-1), label)
    assert torch.equal(out.max(-1).values, top)
    rest = ((1 - top) / 4).unsqueeze(-1).expand_as(probs)
    others = torch.nn.functional.one_hot(label, 5) == 0
    assert torch.allclose(out[others], rest[others], rtol=1e-12)
    assert torch.allclose(out.sum(-1), torch.ones(3, 7, dtype=torch.float64), rtol=1e-12)


def entropies(probs: torch.Tensor) -> np.ndarray:
    p = probs.numpy()
    return -(p * np.log(np.where(p > 0, p, 1))).sum(-1)


def histogram_js(a: np.ndarray, b: np.ndarray, edges: np.ndarray) -> float:
    """scipy's JS distance in bits between the normalised histograms of a and b."""
    p, q = np.histogram(a, edges)[0], np.histogram(b, edges)[0]
    return float(distance.jensenshannon(p / p.sum(), q / q.sum(), base=2))


def test_entropy_js_distance_is_0_for_the_same_records():
    probs = dirichlet((50, 4), 6)
    assert entropy_js_distance(probs, probs.clone(), n_boot=20) == (0.0, 0.0, 0.0)


def test_entropy_js_distance_is_1_bit_for_entropies_in_disjoint_bins():
    members = torch.nn.functional.one_hot(torch.arange(30) % 4, 4).double() * 0.999 + 0.00025  # entropy ≈ 0.008
    nonmembers = torch.full((40, 4), 0.25, dtype=torch.float64)  # entropy log 4, in the last bin
    for value in entropy_js_distance(members, nonmembers, n_boot=20):  # every resample is disjoint too
        assert math.isclose(value, 1.0, rel_tol=1e-12)


def test_entropy_js_distance_is_the_bias_corrected_bootstrap_of_scipys_js():
    members, nonmembers = dirichlet((80, 4), 7, 0.5), dirichlet((60, 4), 8, 2.0)
    a, b = entropies(members), entropies(nonmembers)
    edges = np.linspace(0, math.log(4), 21)
    plug_in = histogram_js(a, b, edges)
    rng = np.random.default_rng(3)  # the function's resamples: members' indices first, then non-members'
    drawn_a, drawn_b = rng.integers(0, len(a), (200, len(a))), rng.integers(0, len(b), (200, len(b)))
    draws = np.array([histogram_js(a[i], b[j], edges) for i, j in zip(drawn_a, drawn_b)])
    q_lo, q_hi = np.quantile(draws, [0.025, 0.975])
    expected = (2 * plug_in - draws.mean(), 2 * plug_in - q_hi, 2 * plug_in - q_lo)
    got = entropy_js_distance(members, nonmembers, bins=20, n_boot=200, seed=3)
    assert np.allclose(got, expected, rtol=1e-9)
    assert 0.1 < got[0] < 0.9 and got[1] > 0  # a moderate case, not clipped at 0
    assert got[1] <= got[0] <= got[2] and got[1] < got[2]
    assert got[0] < plug_in  # the correction removes the plug-in's upward bias


# ------------------------------------------------------------------------------ the protocol

SPEC = AttackSpec(hidden=(16, 8), layers=2, epochs=5, batch_size=8, lr=1e-2)  # 40 Adam steps on 60 records
CLASSES, VIEWS = 4, 3


def leaky_observations(labels: torch.Tensor, member: torch.Tensor, seed: int) -> Observed:
    """Members: confident on their label, every view alike; non-members: flat posteriors whose
    views each differ (the behaviour A_NN and A_DA exploit)."""
    rng = np.random.default_rng(seed)
    n = len(labels)
    confident = torch.nn.functional.one_hot(labels, CLASSES).double() * 0.9 + 0.1 / CLASSES
    flat = torch.from_numpy(rng.dirichlet(np.full(CLASSES, 20.0), n))
    clean = torch.where(member[:, None], confident, flat)

    def views():
        jitter = torch.from_numpy(rng.dirichlet(np.full(CLASSES, 200.0), (n, VIEWS)))
        scattered = torch.from_numpy(rng.dirichlet(np.full(CLASSES, 1.0), (n, VIEWS)))
        return torch.where(member[:, None, None], 0.9 * confident[:, None] + 0.1 * jitter, scattered)

    return Observed(clean, views(), views())


def alike_observations(n: int, seed: int) -> Observed:
    """Every record's posteriors from one distribution: nothing to tell members by."""
    return Observed(dirichlet((n, CLASSES), seed), dirichlet((n, VIEWS, CLASSES), seed + 1),
                    dirichlet((n, VIEWS, CLASSES), seed + 2))


def records() -> Records:
    """60 shadow records (30 in: the even ones), 60 target records: 30 members (the first 30: 10
    labelled, 20 not), 30 not. The two masks differ (half of the shadow's members are target
    non-members), so the shadow's posteriors say nothing about the target's membership: an attack
    that scored them instead of the target's would sit at AUC ≈ 0.5."""
    g = torch.Generator().manual_seed(0)
    member = torch.arange(60) < 30
    shadow_member = torch.arange(60) % 2 == 0
    labelled = member & (torch.arange(60) < 10)
    return Records(torch.randint(0, CLASSES, (60,), generator=g), shadow_member,
                   torch.randint(0, CLASSES, (60,), generator=g), member,
                   {"all": member, "labelled": labelled, "unlabelled": member & ~labelled})


def attack_scored(cases: list[Case], data: Records) -> list[tuple[dict, RowScores]]:
    return run_attacks(cases, data, SPEC, (0.1,), 50, 0, VIEWS, "js")


def attack_rows(cases: list[Case], data: Records) -> list[dict]:
    return [row for row, _ in attack_scored(cases, data)]


@pytest.fixture(scope="module")
def leaky_scored():
    data = records()
    semi = Case({"target": "fixmatch"}, leaky_observations(data.target_labels, data.target_member, 1),
                leaky_observations(data.shadow_labels, data.shadow_member, 2), [(VIEWS, "js"), (2, "cosine")])
    supervised = Case({"target": "supervised"}, semi.target, semi.shadow, [(VIEWS, "js")], ("all",), {"steps": 7})
    return attack_scored([semi, supervised], data)


@pytest.fixture(scope="module")
def leaky_rows(leaky_scored):
    return [row for row, _ in leaky_scored]


def test_the_target_and_its_shadow_differ():
    data = records()
    assert data.shadow_member.sum() == data.target_member.sum() == 30
    assert (data.shadow_member & data.target_member).sum() == 15  # independent masks
    assert not torch.equal(data.shadow_labels, data.target_labels)
    target = leaky_observations(data.target_labels, data.target_member, 1)
    shadow = leaky_observations(data.shadow_labels, data.shadow_member, 2)
    assert not torch.allclose(target.clean, shadow.clean)


def test_a_nn_and_a_da_find_members_that_leak(leaky_rows):
    for attack in (NN_ATTACK, DA_ATTACK):
        row = next(r for r in leaky_rows if r["target"] == "fixmatch" and r["attack"] == attack
                   and r["member_kind"] == "all" and r["is_default"])
        assert row["auc"] > 0.95, (attack, row["auc"])


def test_every_attack_scores_the_targets_posteriors_not_the_shadows(leaky_rows):
    """The target's posteriors leak its membership, the shadow's leak only the shadow's (an
    independent mask): every attack, A_DA at each setting, every member kind, finds the target's
    members; scored on the shadow's posteriors it would sit near 0.5."""
    data = records()
    shadow = leaky_observations(data.shadow_labels, data.shadow_member, 2)
    confidence = shadow.clean.gather(-1, data.target_labels[:, None]).squeeze(-1).numpy()
    assert abs(roc_auc_score(data.target_member.numpy(), confidence) - 0.5) < 0.15  # what the slip would give
    for row in leaky_rows:
        # correctness: a non-member's flat posteriors still put their maximum on the label ¼ of the time
        floor = 0.8 if row["attack"] == "correctness" else 0.9
        assert row["auc"] > floor, (row["target"], row["attack"], row["similarity"], row["member_kind"], row["auc"])


def test_a_target_without_signal_is_not_credited_with_its_shadows():
    """The target's posteriors carry no membership, the shadow's a strong one: every AUC's
    interval holds 0.5 (whatever the attack learnt on the shadow, the target gives it nothing)."""
    data = records()
    case = Case({"target": "flexmatch"}, alike_observations(60, 40),
                leaky_observations(data.shadow_labels, data.shadow_member, 3), [(VIEWS, "js")], ("all",))
    for row in attack_rows([case], data):
        assert row["auc_lo"] <= 0.5 <= row["auc_hi"], (row["attack"], row["auc"])


def test_each_rows_scores_are_its_records_scores(leaky_scored):
    """A row's per-record scores (scores.parquet): its kind's members and every non-member, in the
    target's record order, each with the attack's score, from which the row's AUC follows exactly."""
    data = records()
    target = leaky_observations(data.target_labels, data.target_member, 1)
    metrics = metric_scores(target.clean, data.target_labels)
    nonmember = ~data.target_member
    for row, scored in leaky_scored:
        chosen = (data.member_kinds[row["member_kind"]] | nonmember).numpy()
        assert np.array_equal(scored.records, np.flatnonzero(chosen))
        member = data.target_member.numpy()[scored.records]
        assert (member.sum(), (~member).sum()) == (row["n_members"], row["n_nonmembers"])
        assert roc_auc_score(member, scored.scores) == pytest.approx(row["auc"], abs=1e-12)
        if row["attack"] in metrics:  # the scores the test can recompute
            assert np.array_equal(scored.scores, metrics[row["attack"]].double().numpy()[chosen]), row["attack"]
    assert sum(r["attack"] in metrics for r, _ in leaky_scored) == 4 * (3 + 1)


def test_scores_follow_the_records_whatever_the_targets_record_order():
    """Members interleaved with non-members in the target's records: each score stays with its
    record, so the AUC recomputed from the records' membership is the row's."""
    data = records()
    member = torch.arange(60) % 2 == 1
    labelled = member & (torch.arange(60) < 20)
    interleaved = Records(data.shadow_labels, data.shadow_member, data.target_labels, member,
                          {"all": member, "labelled": labelled, "unlabelled": member & ~labelled})
    case = Case({"target": "fixmatch"}, leaky_observations(data.target_labels, member, 1),
                leaky_observations(data.shadow_labels, data.shadow_member, 2), [(VIEWS, "js")])
    for row, scored in attack_scored([case], interleaved):
        assert roc_auc_score(member.numpy()[scored.records], scored.scores) == pytest.approx(row["auc"], abs=1e-12)


def test_every_attack_and_member_kind_has_its_row_with_its_counts(leaky_rows):
    semi = [r for r in leaky_rows if r["target"] == "fixmatch"]
    keys = [(r["attack"], r["member_kind"], r["similarity"]) for r in semi]
    assert len(keys) == len(set(keys))
    expected = {(a, k, "") for a in ATTACKS if a != DA_ATTACK for k in MEMBER_KINDS}
    expected |= {(DA_ATTACK, k, s) for k in MEMBER_KINDS for s in ("js", "cosine")}
    assert set(keys) == expected
    members = {"all": 30, "labelled": 10, "unlabelled": 20}
    assert all(r["n_members"] == members[r["member_kind"]] and r["n_nonmembers"] == 30 for r in semi)
    defaults = {(r["similarity"], r["views"]): r["is_default"] for r in semi if r["attack"] == DA_ATTACK}
    assert defaults == {("js", VIEWS): True, ("cosine", 2): False}
    assert all(r["is_default"] for r in semi if r["attack"] != DA_ATTACK)


def test_a_case_of_all_members_only_has_only_all_rows_with_its_columns(leaky_rows):
    supervised = [r for r in leaky_rows if r["target"] == "supervised"]
    assert sorted(r["attack"] for r in supervised) == sorted(ATTACKS)
    assert all(r["member_kind"] == "all" and r["steps"] == 7 for r in supervised)


def test_members_like_non_members_give_auc_intervals_around_one_half():
    data = records()
    case = Case({"target": "uda"}, alike_observations(60, 10), alike_observations(60, 20), [(VIEWS, "js")])
    rows = attack_rows([case], data)
    for attack in ATTACKS:
        row = next(r for r in rows if r["attack"] == attack and r["member_kind"] == "all")
        assert row["auc_lo"] < row["auc_hi"]  # scores that vary: not an MLP of constant output
        assert row["auc_lo"] <= 0.5 <= row["auc_hi"], (attack, row["auc_lo"], row["auc_hi"])


def test_the_top1_defence_answers_every_view_with_top1_posteriors():
    observed = alike_observations(5, 30)
    defended = observed.defended("top1")
    for got, raw in ((defended.clean, observed.clean), (defended.weak, observed.weak),
                     (defended.strong, observed.strong)):
        assert torch.equal(got, top1_posteriors(raw))
    assert observed.defended("none") is observed
