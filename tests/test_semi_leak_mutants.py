"""Behaviour tests of privssl.attacks.semi_leak that the mutants (`make mutants`) of the older tests
(tests/test_semi_leak_attacks.py) showed missing, issue 28: the JS distance of §3.4.4 at its
defaults and on entropies that rounding puts just outside [0, log C], the top-1 defence of a model
observed without views, and the attack rows: their bootstrap seed, the 0.5 threshold of the MLP
attacks and the empty A_DA settings of the other attacks' rows."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from scipy.spatial import distance

from privssl.attacks.mia import AttackSpec
from privssl.attacks.semi_leak import (
    Case,
    Observed,
    Records,
    RowScores,
    _histogram_js,
    distance_matrix,
    entropy_js_distance,
    run_attacks,
    sorted_posteriors,
    top1_posteriors,
)
from privssl.attacks.semi_leak_spec import ATTACKS, DA_ATTACK, METRIC_ATTACKS, NN_ATTACK
from privssl.attacks.statistics import bootstrap_auc
from test_semi_leak_attacks import alike_observations, dirichlet, entropies, histogram_js, leaky_observations


# ------------------------------------------------------------------------------ A_DA's distances, A_NN's input


@pytest.mark.parametrize("similarity", ["cosine", "correlation", "euclidean"])
def test_vector_distances_are_scipys_for_rows_that_do_not_sum_to_1(similarity):
    """cosine, correlation and euclidean are scipy's for any rows: correlation centres each row on
    its own mean (for probability vectors every row mean is 1/C, which would hide a mean taken
    over the whole array)."""
    g = np.random.default_rng(3)
    a, b = g.uniform(0, 2, (2, 4, 5)), g.uniform(0, 2, (2, 3, 5))
    got = distance_matrix(torch.from_numpy(a), torch.from_numpy(b), similarity)
    scipy = getattr(distance, similarity)  # scipy.spatial.distance.cosine, .correlation, .euclidean
    for i in range(2):
        expected = np.array([[scipy(p, q) for q in b[i]] for p in a[i]])
        assert np.allclose(got[i].numpy(), expected, rtol=1e-9, atol=1e-12)


def test_an_unknown_similarity_is_refused_naming_the_allowed_ones():
    rows = dirichlet((2, 3), 0)
    with pytest.raises(ValueError, match="unknown similarity 'kl'; allowed: js, cosine, correlation, euclidean$"):
        distance_matrix(rows, rows, "kl")


def test_sorted_posteriors_sort_the_classes_of_any_leading_shape():
    probs = dirichlet((2, 3, 4), 5)  # (releases, records, classes)
    got = sorted_posteriors(probs)
    assert got.dtype == torch.float32
    for i in range(2):
        for r in range(3):
            assert got[i, r].tolist() == pytest.approx(sorted(probs[i, r].tolist(), reverse=True), rel=1e-6)


# ------------------------------------------------------------------------------ the JS distance


def test_entropy_js_distance_defaults_are_20_bins_200_resamples_and_seed_0():
    """§3.4.4's JS distance as the report calls it (no optional argument): the bias-corrected
    bootstrap of scipy's JS distance on 20 bins over [0, log C], 200 resamples from seed 0."""
    members, nonmembers = dirichlet((70, 5), 11, 0.6), dirichlet((50, 5), 12, 1.5)
    a, b = entropies(members), entropies(nonmembers)
    edges = np.linspace(0, math.log(5), 21)
    plug_in = histogram_js(a, b, edges)
    rng = np.random.default_rng(0)
    drawn_a, drawn_b = rng.integers(0, len(a), (200, len(a))), rng.integers(0, len(b), (200, len(b)))
    draws = np.array([histogram_js(a[i], b[j], edges) for i, j in zip(drawn_a, drawn_b)])
    q_lo, q_hi = np.quantile(draws, [0.025, 0.975])
    expected = (2 * plug_in - draws.mean(), 2 * plug_in - q_hi, 2 * plug_in - q_lo)
    got = entropy_js_distance(members, nonmembers)
    assert np.allclose(got, expected, rtol=1e-9)
    assert got[1] > 0  # not clipped: every value tells a wrong bin count, resample count or seed


@pytest.mark.parametrize("side", ["members", "nonmembers"])
def test_entropies_rounded_outside_0_to_log_c_count_in_the_end_bins(side):
    """Posteriors of a float32 softmax sum to 1 only up to rounding: a one-hot above 1 has an
    entropy just below 0, a uniform row above 1/C each one just above log C. They fall in the
    first and the last bin (np.histogram would drop them, leaving an empty histogram): members
    one-hot, non-members uniform, disjoint bins, the distance 1 bit."""
    n, classes = 30, 4
    members = torch.nn.functional.one_hot(torch.arange(n) % classes, classes).double() * 0.999 + 0.00025
    nonmembers = torch.full((40, classes), 0.25, dtype=torch.float64)
    if side == "members":
        members = torch.nn.functional.one_hot(torch.arange(n) % classes, classes).double() * (1 + 1e-9)
        assert (entropies(members) < 0).all()
    else:
        nonmembers = nonmembers + 1e-9
        assert (entropies(nonmembers) > math.log(classes)).all()
    for value in entropy_js_distance(members, nonmembers, n_boot=10):
        assert math.isclose(value, 1.0, rel_tol=1e-12)


def test_histogram_js_of_near_equal_histograms_is_0_not_nan():
    """Two histograms of 13073 / 27888 and 9801 / 20908 records in the first of two bins differ by
    < 1e-8: H(m) − (H(p) + H(q)) / 2 rounds to −1.1e-16 (found by a search over record counts up
    to 32767). The distance is clipped at 0, not √ of a negative
    (NaN), for one pair and for a batch of resamples."""
    def values(first: int, n: int) -> np.ndarray:
        return np.r_[np.full(first, 0.25), np.full(n - first, 0.75)]

    a, b, edges = values(13073, 27888), values(9801, 20908), np.array([0.0, 0.5, 1.0])
    p, q = np.array([13073, 27888 - 13073]) / 27888, np.array([9801, 20908 - 9801]) / 20908
    m = (p + q) / 2
    assert -np.sum(m * np.log2(m)) - (-np.sum(p * np.log2(p)) - np.sum(q * np.log2(q))) / 2 < 0  # the rounding
    assert _histogram_js(a, b, edges) == 0.0
    assert _histogram_js(np.stack([a, a]), np.stack([b, b]), edges).tolist() == [0.0, 0.0]


# ------------------------------------------------------------------------------ the top-1 defence


def test_the_top1_defence_of_a_model_observed_without_views_keeps_them_absent():
    observed = Observed(dirichlet((6, 3), 1))  # no A_DA at this case: weak and strong are None
    defended = observed.defended("top1")
    assert torch.equal(defended.clean, top1_posteriors(observed.clean))
    assert defended.weak is None and defended.strong is None


# ------------------------------------------------------------------------------ the attack rows


SPEC = AttackSpec(hidden=(16, 8), layers=2, epochs=5, batch_size=8, lr=1e-2)
CLASSES, VIEWS, BOOTSTRAP, SEED = 4, 3, 40, 7


def records() -> Records:
    g = torch.Generator().manual_seed(1)
    member = torch.arange(60) % 3 != 0  # 40 members (interleaved), 20 non-members
    labelled = member & (torch.arange(60) < 24)
    return Records(torch.randint(0, CLASSES, (60,), generator=g), torch.arange(60) % 2 == 0,
                   torch.randint(0, CLASSES, (60,), generator=g), member,
                   {"all": member, "labelled": labelled, "unlabelled": member & ~labelled})


def attack_scored(log=None) -> list[tuple[dict, RowScores]]:
    """run_attacks on a leaky case (two A_DA settings) and a silent one (one). Called in each
    test's body, not by a shared fixture: mutmut maps a function to the tests that call it while
    they run (a module fixture's call is mapped to none), and runs only those against its mutants."""
    data = records()
    leaking = Case({"target": "leaky"}, leaky_observations(data.target_labels, data.target_member, 1),
                   leaky_observations(data.shadow_labels, data.shadow_member, 2), [(VIEWS, "js"), (2, "js")])
    silent = Case({"target": "alike"}, alike_observations(60, 10), alike_observations(60, 20), [(VIEWS, "js")])
    return run_attacks([leaking, silent], data, SPEC, (0.1,), BOOTSTRAP, SEED, VIEWS, "js", log=log)


def attack_rows(log=None) -> list[dict]:
    return [row for row, _ in attack_scored(log)]


def test_every_rows_auc_interval_is_the_bootstrap_at_the_given_seed():
    """A row's per-record scores (in the target's record order) give its interval again, at the
    seed run_attacks was given (7 here: not the default 0, not a fresh random one)."""
    scored, data = attack_scored(), records()
    moved = 0  # rows whose interval another seed changes: where the test tells the seeds apart
    for row, own in scored:
        member = data.target_member.numpy()[own.records]
        auc, lo, hi = bootstrap_auc(own.scores, member, n_boot=BOOTSTRAP, seed=SEED)
        assert (row["auc"], row["auc_lo"], row["auc_hi"]) == pytest.approx((auc, lo, hi), abs=1e-12), (
            row["target"], row["attack"], row["member_kind"])
        moved += bootstrap_auc(own.scores, member, n_boot=BOOTSTRAP, seed=0)[1:] != (lo, hi)
    assert moved > len(scored) / 2


def test_mlp_attacks_decide_at_one_half_and_only_a_da_rows_have_a_similarity_and_views():
    """A_NN and A_DA decide 'member' at sigmoid ≥ 0.5: on the leaky target both are right on
    nearly every record (at a threshold above 1 they would call every record a non-member,
    right on the 20 of 60 only). A_DA's rows carry their similarity, views and whether they are
    the default setting (K and similarity both the default's); the other attacks' rows an empty
    similarity and no view count."""
    rows = attack_rows()
    for attack in (NN_ATTACK, DA_ATTACK):
        row = next(r for r in rows if r["target"] == "leaky" and r["attack"] == attack and r["member_kind"] == "all")
        assert row["accuracy"] > 0.9, (attack, row["accuracy"])
    settings = set()
    for row in rows:
        if row["attack"] == DA_ATTACK:
            settings.add((row["target"], row["similarity"], row["views"], row["is_default"]))
        else:
            assert row["attack"] in (NN_ATTACK, *METRIC_ATTACKS)
            assert row["similarity"] == "" and math.isnan(row["views"]) and row["is_default"] is True
    assert {r["attack"] for r in rows} == set(ATTACKS)
    # the default is K = 3 and JS both: K = 2 at JS is not
    assert settings == {("leaky", "js", VIEWS, True), ("leaky", "js", 2, False), ("alike", "js", VIEWS, True)}


def test_the_progress_log_counts_each_case_once_and_each_of_its_a_da_settings_once():
    """The job's log says how far the attacks are, in the unit its label names: the leaky case
    has two A_DA settings and the silent one one, so 2 cases + 3 settings = 5 units, each logged
    as it finishes (every unit is at least a tenth of the work), the last at 5/5."""
    lines: list[str] = []
    attack_rows(lines.append)
    label = "cases scored (A_NN and metric attacks, then each A_DA setting)"
    counts = [re.match(rf"{re.escape(label)}: (\d+)/(\d+) \(", line) for line in lines]
    assert all(counts), lines
    assert [(int(m[1]), int(m[2])) for m in counts] == [(done, 5) for done in range(1, 6)]
