"""Empirical ε lower bounds: the hypothesis-test audit (all thresholds / split) and the one-run audit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, special, stats

from privssl.audit.bounds import (
    epsilon_lower_bound,
    epsilon_lower_bound_at,
    epsilon_lower_bound_split,
    hypothesis_test_ceiling,
    one_run_ceiling,
    one_run_epsilon_lower_bound,
    one_run_guesses,
    one_run_p_value,
)

DELTA = 1e-5


def direct_bound(fp, n0, fn, n1, delta, confidence=0.95):
    """The audit formula written out with scipy.stats.beta, one-sided upper bounds on both rates."""
    def ub(k, n):
        return 1.0 if k == n else stats.beta.ppf(confidence, k + 1, n - k)
    fpr, fnr = ub(fp, n0), ub(fn, n1)
    terms = [np.log((1 - delta - a) / b) for a, b in ((fpr, fnr), (fnr, fpr)) if 1 - delta - a > 0]
    return max([0.0, *terms])


@pytest.mark.parametrize("fp, n0, fn, n1, delta", [(0, 50, 0, 50, 0.0), (0, 50, 0, 50, DELTA), (3, 100, 10, 80, 0.0),
                                                   (90, 100, 2, 100, 1e-3), (50, 100, 50, 100, 0.0),
                                                   (100, 100, 100, 100, 0.0), (0, 20, 20, 20, 0.0)])
def test_bound_at_threshold_matches_beta_computation(fp, n0, fn, n1, delta):
    assert epsilon_lower_bound_at(fp, n0, fn, n1, delta) == pytest.approx(direct_bound(fp, n0, fn, n1, delta))


def test_all_correct_closed_form_and_vectorised():
    n = 50
    ub = 1 - 0.05 ** (1 / n)
    assert epsilon_lower_bound_at(0, n, 0, n, DELTA) == pytest.approx(np.log((1 - DELTA - ub) / ub))
    fps, fns = np.array([0, 3, 90]), np.array([0, 10, 2])
    np.testing.assert_allclose(epsilon_lower_bound_at(fps, 100, fns, 100, 0.0),
                               [direct_bound(a, 100, b, 100, 0.0) for a, b in zip(fps, fns)])


def test_perfectly_separated_scores_give_the_all_correct_bound():
    n = 200
    scores = np.r_[np.linspace(1, 2, n), np.linspace(-2, -1, n)]
    member = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    result = epsilon_lower_bound(scores, member, DELTA)
    ub = 1 - 0.05 ** (1 / n)
    assert result["eps_lower_bound"] == pytest.approx(np.log((1 - DELTA - ub) / ub))
    assert (result["fp"], result["fn"], result["n_members"], result["n_nonmembers"]) == (0, 0, n, n)
    assert -1 < result["threshold"] <= 1


def test_random_scores_give_a_bound_near_zero():
    rng = np.random.default_rng(0)
    n = 1000
    result = epsilon_lower_bound(rng.normal(size=2 * n), np.r_[np.ones(n, bool), np.zeros(n, bool)], DELTA)
    assert 0 <= result["eps_lower_bound"] < 0.5


def test_second_inequality_credits_precise_low_recall_attacks():
    """No false positive, half the members missed: FNR + e^ε FPR >= 1 − δ is the binding inequality."""
    bound = epsilon_lower_bound_at(0, 100, 50, 100, 0.0)
    fpr_ub, fnr_ub = 1 - 0.05 ** (1 / 100), stats.beta.ppf(0.95, 51, 50)
    assert bound == pytest.approx(np.log((1 - fnr_ub) / fpr_ub)) and bound > np.log((1 - fpr_ub) / fnr_ub)


def shifted(n, shift, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=2 * n) + shift * np.r_[np.ones(n), np.zeros(n)], np.r_[np.ones(n, bool), np.zeros(n, bool)]


def test_split_threshold_depends_on_selection_data_only():
    select, member_select = shifted(500, 2.0, 1)
    evaluate, member_eval = shifted(400, 2.0, 2)
    result = epsilon_lower_bound_split(select, member_select, evaluate, member_eval, DELTA)
    other = epsilon_lower_bound_split(select, member_select, evaluate[::-1] * 3 + 1, member_eval, DELTA)
    assert result["threshold"] == other["threshold"] and result["selected_on"] == 1000
    assert (result["n_members"], result["n_nonmembers"]) == (400, 400)
    guess = evaluate >= result["threshold"]
    assert (result["fp"], result["fn"]) == ((guess & ~member_eval).sum(), (~guess & member_eval).sum())
    assert result["eps_lower_bound"] == pytest.approx(epsilon_lower_bound_at(result["fp"], 400, result["fn"], 400,
                                                                             DELTA))
    # A single pre-chosen test is never stronger than the best of all tests on the same evaluation data.
    assert 0 < result["eps_lower_bound"] <= epsilon_lower_bound(evaluate, member_eval, DELTA)["eps_lower_bound"]


# --------------------------------------------------------------------------- ceilings: every decision right


@pytest.mark.parametrize("n0, n1, delta, confidence", [(50, 50, 0.0, 0.95), (1191, 1209, DELTA, 0.975),
                                                       (20, 400, 0.0, 0.95), (400, 20, 1e-3, 0.9)])
def test_hypothesis_test_ceiling_is_the_zero_error_closed_form(n0, n1, delta, confidence):
    """With 0 errors the one-sided Clopper–Pearson bound is the Beta(1, n) quantile, 1 − α^(1/n)."""
    u0, u1 = stats.beta.ppf(confidence, 1, n0), stats.beta.ppf(confidence, 1, n1)
    assert (u0, u1) == pytest.approx(((1 - (1 - confidence) ** (1 / n0)), 1 - (1 - confidence) ** (1 / n1)))
    expected = max(np.log((1 - delta - u0) / u1), np.log((1 - delta - u1) / u0))
    assert hypothesis_test_ceiling(n0, n1, delta, confidence) == pytest.approx(expected, rel=1e-12)


def test_hypothesis_test_ceiling_grows_with_the_decisions_and_is_vectorised():
    n = np.array([5, 10, 30, 100, 1000, 10_000])
    ceilings = hypothesis_test_ceiling(n, n, DELTA)
    assert ceilings.shape == n.shape and (np.diff(ceilings) > 0).all()
    assert ceilings.tolist() == pytest.approx([hypothesis_test_ceiling(int(k), int(k), DELTA) for k in n])
    assert ceilings[0] < 0.2 and ceilings[-1] == pytest.approx(np.log(10_000 / np.log(20)), abs=0.01)  # log(n/log(1/α))


def test_perfectly_separated_scores_reach_the_ceiling_and_errors_stay_below_it():
    n0, n1 = 150, 90
    member = np.r_[np.ones(n1, bool), np.zeros(n0, bool)]
    separated = np.r_[np.linspace(1, 2, n1), np.linspace(-2, -1, n0)]
    ceiling = hypothesis_test_ceiling(n0, n1, DELTA)
    assert epsilon_lower_bound(separated, member, DELTA)["eps_lower_bound"] == pytest.approx(ceiling, rel=1e-12)
    split = epsilon_lower_bound_split(separated, member, separated, member, DELTA)
    assert split["eps_lower_bound"] == pytest.approx(ceiling, rel=1e-12)
    noisy = separated + np.random.default_rng(3).normal(scale=1.5, size=n0 + n1)
    assert 0 < epsilon_lower_bound(noisy, member, DELTA)["eps_lower_bound"] < ceiling


@pytest.mark.parametrize("r, m, delta", [(50, 100, 1e-5), (10, 10, 1e-3), (200, 1000, 0.0), (1, 2, 0.0)])
def test_one_run_ceiling_is_the_bound_with_every_guess_right(r, m, delta):
    ceiling = one_run_ceiling(r, m, delta)
    assert ceiling == one_run_epsilon_lower_bound(r, r, m, delta)
    assert all(one_run_epsilon_lower_bound(v, r, m, delta) <= ceiling for v in range(0, r + 1, max(1, r // 7)))


@pytest.mark.parametrize("r, confidence", [(50, 0.95), (10, 0.95), (200, 0.99), (5, 0.95)])
def test_one_run_ceiling_at_zero_delta_solves_q_to_the_r(r, confidence):
    """P[Binomial(r, q) >= r] = q^r, so the ceiling is the ε where q^r = 1 − confidence, within the search's step."""
    q = (1 - confidence) ** (1 / r)
    ceiling = one_run_ceiling(r, 10 * r, 0.0, confidence)
    assert ceiling == pytest.approx(np.log(q / (1 - q)), abs=2e-4) and ceiling <= np.log(q / (1 - q))
    assert stats.binom.sf(r - 1, r, special.expit(ceiling)) <= 1 - confidence


@pytest.mark.parametrize("r, confidence", [(4, 0.95), (3, 0.9)])
def test_one_run_ceiling_is_zero_where_all_guesses_right_are_likely_by_chance(r, confidence):
    """q^r > 1 − confidence already at q = ½ (ε = 0): the audit is blind whatever the release."""
    assert 0.5 ** r > 1 - confidence
    assert one_run_ceiling(r, 10 * r, 0.0, confidence) == 0.0


def test_one_run_ceiling_of_the_default_audit_is_small():
    """100 canaries, half guessed: no one-run bound of the default config can exceed 2.8."""
    assert one_run_ceiling(50, 100, 0.0) == pytest.approx(2.7847, abs=2e-4)
    assert one_run_ceiling(50, 100, DELTA) < one_run_ceiling(50, 100, 0.0)


# --------------------------------------------------------------------------- one-run audit


def test_one_run_guesses():
    scores = np.array([0.5, 0.1, 0.9, 0.3, np.nan, 0.7])
    assert one_run_guesses(scores, 2, 1).tolist() == [0, 0, 1, 0, -1, 1]
    assert one_run_guesses(scores, 0, 0).tolist() == [0] * 6
    assert (one_run_guesses(scores, 3, 3) != 0).all()
    for k_plus, k_minus in ((4, 3), (-1, 0), (0, -2), (1.5, 0)):
        with pytest.raises(ValueError):
            one_run_guesses(scores, k_plus, k_minus)


def brentq_bound(v, r, confidence=0.95):
    """δ = 0: ε where P[Binomial(r, e^ε/(1+e^ε)) >= v] = 1 − confidence."""
    return optimize.brentq(lambda eps: stats.binom.sf(v - 1, r, special.expit(eps)) - (1 - confidence), 0, 50)


@pytest.mark.parametrize("v, r", [(80, 100), (95, 100), (600, 1000), (30, 30)])
def test_one_run_pure_dp_matches_root_find(v, r):
    bound = one_run_epsilon_lower_bound(v, r, 1000, 0.0)
    assert bound == pytest.approx(brentq_bound(v, r), abs=2e-4)
    assert one_run_p_value(v, r, 1000, bound, 0.0) <= 0.05  # the reported ε is itself rejected


def test_one_run_closed_forms():
    assert one_run_epsilon_lower_bound(50, 100, 1000, 0.0) == 0.0
    assert one_run_epsilon_lower_bound(0, 0, 10, 0.0) == 0.0
    r = 100
    p = 0.05 ** (1 / r)  # all r correct: q^r = 0.05
    assert one_run_epsilon_lower_bound(r, r, 1000, 0.0) == pytest.approx(np.log(p / (1 - p)), abs=2e-4)


def test_one_run_delta_term_matches_the_theorem():
    """p = f(v) + 2mδ max_i (f(v − i) − f(v))/i, written as a loop over i."""
    v, r, m, eps, delta = 70, 100, 1000, 0.5, 1e-4
    f = lambda u: stats.binom.sf(u - 1, r, special.expit(eps))  # noqa: E731
    expected = f(v) + 2 * m * delta * max((f(v - i) - f(v)) / i for i in range(1, m + 1))
    assert one_run_p_value(v, r, m, eps, delta) == pytest.approx(expected, rel=1e-12)


def test_one_run_delta_never_increases_the_bound():
    bounds = [one_run_epsilon_lower_bound(180, 200, 1000, delta) for delta in (0.0, 1e-6, 1e-5, 1e-4, 4e-4)]
    assert all(a >= b for a, b in zip(bounds, bounds[1:])) and bounds[0] > bounds[-1] > 0


def test_one_run_bad_inputs():
    for v, r, m in ((5, 4, 10), (5, 10, 8), (-1, 4, 10)):
        with pytest.raises(ValueError):
            one_run_epsilon_lower_bound(v, r, m, 0.0)
    with pytest.raises(ValueError, match="delta"):
        one_run_epsilon_lower_bound(5, 10, 10, 1.0)
    with pytest.raises(ValueError, match="confidence"):
        one_run_epsilon_lower_bound(5, 10, 10, 0.0, confidence=1.0)
    with pytest.warns(UserWarning, match="monotone"):
        one_run_epsilon_lower_bound(10, 10, 10, 0.1)


# --------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("scores, member, match", [
    ([], [], "non-empty"),
    ([0.1, 0.2, 0.3], [True, False], "length"),
    ([0.1, 0.2], [True, True], "both members and non-members"),
])
def test_bad_scores(scores, member, match):
    with pytest.raises(ValueError, match=match):
        epsilon_lower_bound(scores, member, DELTA)
    with pytest.raises(ValueError, match=match):
        epsilon_lower_bound_split(scores, member, [0.1, 0.2], [True, False], DELTA)


@pytest.mark.parametrize("delta, confidence, match", [(-0.1, 0.95, "delta"), (1.0, 0.95, "delta"),
                                                      (DELTA, 0.0, "confidence"), (DELTA, 1.5, "confidence")])
def test_bad_delta_and_confidence(delta, confidence, match):
    scores, member = shifted(20, 1.0, 0)
    with pytest.raises(ValueError, match=match):
        epsilon_lower_bound(scores, member, delta, confidence)
    with pytest.raises(ValueError, match=match):
        epsilon_lower_bound_at(0, 10, 0, 10, delta, confidence)
    with pytest.raises(ValueError, match=match):
        epsilon_lower_bound_split(scores, member, scores, member, delta, confidence)
