"""Empirical ε lower bounds: the hypothesis-test audit (all thresholds / split) and the one-run audit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, special, stats

from privssl.audit.bounds import (
    clustered_rate_upper,
    epsilon_lower_bound,
    epsilon_lower_bound_at,
    epsilon_lower_bound_split,
    epsilon_lower_bound_split_clustered,
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


@pytest.mark.parametrize("fp, n0, fn, n1, delta, confidence", [
    (5, 400, 30, 60, DELTA, 0.95), (40, 90, 2, 300, 0.0, 0.9), (0, 1000, 7, 25, 1e-3, 0.99)])
def test_unbalanced_counts_bound_each_rate_by_its_own_population(fp, n0, fn, n1, delta, confidence):
    """FP of the n0 non-members, FN of the n1 members, each by its one-sided Clopper–Pearson upper
    bound, the Beta(k + 1, n − k) quantile at `confidence`; the members and non-members swapped give
    another bound, so balanced sizes could not tell the two apart."""
    fpr_ub, fnr_ub = stats.beta.ppf(confidence, fp + 1, n0 - fp), stats.beta.ppf(confidence, fn + 1, n1 - fn)
    expected = max(0.0, np.log((1 - delta - fpr_ub) / fnr_ub), np.log((1 - delta - fnr_ub) / fpr_ub))
    assert expected > 0.5
    assert epsilon_lower_bound_at(fp, n0, fn, n1, delta, confidence) == pytest.approx(expected, rel=1e-12)
    swapped_fpr, swapped_fnr = stats.beta.ppf(confidence, fp + 1, n1 - fp), stats.beta.ppf(confidence, fn + 1, n0 - fn)
    swapped = max(0.0, np.log((1 - delta - swapped_fpr) / swapped_fnr), np.log((1 - delta - swapped_fnr) / swapped_fpr))
    assert abs(swapped - expected) > 0.1


def test_the_best_threshold_over_unbalanced_scores_is_found_by_brute_force():
    """Every threshold 'member iff score >= t' (each score and +inf) counted by hand on 37 members
    and 113 non-members, its bound by scipy's Beta quantiles; the audit reports the largest, the
    first (lowest) threshold on ties, with its counts."""
    scores, member = unbalanced(37, 113, 1.5, 4)
    scores = np.round(scores, 1)  # ties between members and non-members
    thresholds = np.r_[np.unique(scores), np.inf]
    fps = [int(((scores >= t) & ~member).sum()) for t in thresholds]
    fns = [int(((scores < t) & member).sum()) for t in thresholds]
    bounds = [direct_bound(fp, 113, fn, 37, DELTA, 0.9) for fp, fn in zip(fps, fns)]
    best = int(np.argmax(bounds))
    result = epsilon_lower_bound(scores, member, DELTA, confidence=0.9)
    assert result["eps_lower_bound"] == pytest.approx(bounds[best], rel=1e-12) and bounds[best] > 0.3
    assert (result["threshold"], result["fp"], result["fn"]) == (thresholds[best], fps[best], fns[best])
    assert (result["n_members"], result["n_nonmembers"]) == (37, 113)
    # a reversed attack (non-members score higher) is no evidence: its best bound is far lower
    assert epsilon_lower_bound(-scores, member, DELTA, confidence=0.9)["eps_lower_bound"] < 0.5 * bounds[best]


def test_second_inequality_credits_precise_low_recall_attacks():
    """No false positive, half the members missed: FNR + e^ε FPR >= 1 − δ is the binding inequality."""
    bound = epsilon_lower_bound_at(0, 100, 50, 100, 0.0)
    fpr_ub, fnr_ub = 1 - 0.05 ** (1 / 100), stats.beta.ppf(0.95, 51, 50)
    assert bound == pytest.approx(np.log((1 - fnr_ub) / fpr_ub)) and bound > np.log((1 - fpr_ub) / fnr_ub)


def shifted(n, shift, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=2 * n) + shift * np.r_[np.ones(n), np.zeros(n)], np.r_[np.ones(n, bool), np.zeros(n, bool)]


def unbalanced(n_members, n_nonmembers, shift, seed):
    rng = np.random.default_rng(seed)
    member = np.r_[np.ones(n_members, bool), np.zeros(n_nonmembers, bool)]
    return rng.normal(size=member.size) + shift * member, member


def selection_score(fp, n0, fn, n1, delta):
    """The split audit's selection score, written out: the Clopper–Pearson bound on the selection data."""
    return direct_bound(fp, n0, fn, n1, delta)


def test_split_threshold_depends_on_selection_data_only():
    select, member_select = shifted(500, 2.0, 1)
    evaluate, member_eval = unbalanced(130, 470, 2.0, 2)
    result = epsilon_lower_bound_split(select, member_select, evaluate, member_eval, DELTA)
    other = epsilon_lower_bound_split(select, member_select, evaluate[::-1] * 3 + 1, member_eval, DELTA)
    assert result["threshold"] == other["threshold"] and result["selected_on"] == 1000
    # the threshold of the largest bound on the selection data, the first one on ties (by hand)
    candidates = np.r_[np.unique(select), np.inf]
    scored = [selection_score(((select >= t) & ~member_select).sum(), 500, ((select < t) & member_select).sum(), 500,
                              DELTA) for t in candidates]
    assert result["threshold"] == candidates[int(np.argmax(scored))]
    assert (result["n_members"], result["n_nonmembers"]) == (130, 470)
    guess = evaluate >= result["threshold"]
    fp, fn = (guess & ~member_eval).sum(), (~guess & member_eval).sum()
    assert (result["fp"], result["fn"]) == (fp, fn) and fp != fn
    # the evaluation's bound by scipy's Beta quantiles: FP of the 470 non-members, FN of the 130 members
    assert result["eps_lower_bound"] == pytest.approx(direct_bound(fp, 470, fn, 130, DELTA), rel=1e-12)
    assert abs(direct_bound(fn, 470, fp, 130, DELTA) - result["eps_lower_bound"]) > 0.05  # a swap would show
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


# --------------------------------------------------------------------------- what the mutants of bounds.py found


def test_the_split_selects_the_bound_argmax_on_small_unbalanced_sets():
    """On 400 small selection sets (3–14 members and non-members, tied scores, the lowest score
    a member's or a non-member's), the threshold is the first argmax of the selection bound written out
    by hand, every selection query is counted once, and the evaluation's counts are the threshold's."""
    rng = np.random.default_rng(0)
    for _ in range(400):
        n1, n0 = rng.integers(3, 15, 2)
        member = np.r_[np.ones(n1, bool), np.zeros(n0, bool)]
        scores = np.round(rng.normal(size=n1 + n0) + rng.uniform(0, 2) * member, 1)
        candidates = np.r_[np.unique(scores), np.inf]
        scored = [selection_score(((scores >= t) & ~member).sum(), n0, ((scores < t) & member).sum(), n1, DELTA)
                  for t in candidates]
        result = epsilon_lower_bound_split(scores, member, scores[::-1], member, DELTA)
        assert result["threshold"] == candidates[int(np.argmax(scored))]
        assert result["selected_on"] == n1 + n0
        guess = scores[::-1] >= result["threshold"]
        assert (result["fp"], result["fn"]) == ((guess & ~member).sum(), (~guess & member).sum())


def test_the_split_bound_uses_the_confidence_given():
    select, member_select = shifted(200, 1.5, 7)
    evaluate, member_eval = unbalanced(90, 160, 1.5, 8)
    for confidence in (0.8, 0.99):
        result = epsilon_lower_bound_split(select, member_select, evaluate, member_eval, DELTA, confidence)
        assert result["eps_lower_bound"] == pytest.approx(
            direct_bound(result["fp"], 160, result["fn"], 90, DELTA, confidence), rel=1e-12)


def test_a_single_bound_is_a_python_float_and_an_array_of_counts_an_array():
    assert type(epsilon_lower_bound_at(3, 100, 10, 80, 0.0)) is float
    assert type(hypothesis_test_ceiling(50, 50, DELTA)) is float
    assert isinstance(epsilon_lower_bound_at(np.array([3, 4]), 100, np.array([10, 9]), 80, 0.0), np.ndarray)


@pytest.mark.parametrize("call, message", [
    (lambda: one_run_guesses([0.1, 0.2], -1, 0), "k_plus must be a non-negative integer, got -1"),
    (lambda: one_run_guesses([0.1, 0.2], 0, 0.5), "k_minus must be a non-negative integer, got 0.5"),
    (lambda: one_run_guesses([0.1, 0.2, 0.3], 2, 2), r"k_plus \+ k_minus must be <= len\(scores\) = 3, got 2 \+ 2"),
    (lambda: one_run_epsilon_lower_bound(-1, 4, 10, 0.0), "v must be a non-negative integer, got -1"),
    (lambda: one_run_epsilon_lower_bound(1, 2.5, 10, 0.0), "r must be a non-negative integer, got 2.5"),
    (lambda: one_run_epsilon_lower_bound(1, 2, -3, 0.0), "m must be a non-negative integer, got -3"),
    (lambda: one_run_epsilon_lower_bound(5, 4, 10, 0.0), "need 0 <= v <= r <= m, got v=5, r=4, m=10"),
])
def test_a_bad_guess_count_is_refused_naming_it(call, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        call()


def test_one_run_guesses_break_ties_by_position_and_are_integers():
    """Ties are broken by position, as a stable sort orders them: of equal scores, the later
    records are guessed 'included', the earlier ones 'excluded' (written out by hand here)."""
    scores = np.random.default_rng(9).integers(0, 3, 200).astype(float)
    guesses = one_run_guesses(scores, 30, 40)
    order = sorted(range(200), key=lambda i: (scores[i], i))
    expected = np.zeros(200, dtype=int)
    expected[order[-30:]], expected[order[:40]] = 1, -1
    assert guesses.tolist() == expected.tolist() and guesses.dtype.kind == "i"


@pytest.mark.parametrize("m, delta, warns", [(10, 0.04, False), (10, 0.05, False), (10, 0.06, True),
                                             (1000, 4e-4, False)])
def test_the_monotonicity_warning_is_issued_exactly_when_2m_delta_exceeds_one(m, delta, warns):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        one_run_epsilon_lower_bound(8, 10, m, delta)
    assert len(caught) == int(warns)
    if warns:
        assert str(caught[0].message) == (f"2*m*delta = {2 * m * delta:g} > 1: the one-run p-value may not be "
                                          "monotone in eps; the binary search then finds a rejection boundary, "
                                          "not necessarily the largest eps")
        # attributed to the caller (stacklevel 2), not to the library; under mutmut, to its trampoline
        caller = Path(caught[0].filename)
        assert caller.name != "bounds.py" and (caller == Path(__file__) or "mutmut" in caller.parts)


def test_a_delta_of_one_rejects_nothing():
    """(ε, 1)-DP holds for every algorithm, so its p-value bound is 1 (and never above): the
    i = v term alone adds 2m(1 − f(v))/v ≥ 2(1 − f(v))."""
    for v, r, m in ((30, 40, 50), (1, 1, 1), (90, 100, 1000)):
        assert one_run_p_value(v, r, m, 3.0, 1.0) == 1.0
        assert one_run_p_value(v, r, m, 3.0, 0.0) < 1.0


def test_a_threshold_without_evidence_is_minus_infinity_and_the_first_is_kept():
    """Where 1 − δ − rate is 0 an inequality implies nothing (log 0 = −inf, not log 1e-300): at
    δ = ¾ every threshold of this selection set is −inf, and the split keeps the first (lowest),
    as it keeps the first of any tie."""
    result = epsilon_lower_bound_split([1.0, 1.0, 0.0], [True, True, False], [1.0, 0.0], [True, False], 0.75)
    assert result["threshold"] == 0.0


# --------------------------------------------------------------------------- clustered decisions (LiRA's T targets)

def test_a_clustered_rate_of_single_trials_is_clopper_pearson():
    errors, trials = np.array([1, 0, 0, 1, 0, 0, 0, 1, 0, 0]), np.ones(10)
    # one trial a cluster: V = Σ (e − p)² / n² = p(1 − p)/n exactly, so n* = n and k = 3
    assert clustered_rate_upper(errors, trials, 0.9) == pytest.approx(stats.beta.ppf(0.9, 4, 7), rel=1e-12)


def test_a_clustered_rate_by_hand_and_its_all_right_limit():
    errors, trials = np.array([3, 0, 1, 0, 4]), np.array([4, 4, 4, 4, 4])
    p = 8 / 20
    variance = ((errors - p * trials) ** 2).sum() / 20 ** 2
    n_eff = p * (1 - p) / variance
    expected = stats.beta.ppf(0.95, p * n_eff + 1, n_eff - p * n_eff)
    assert n_eff < 20 and clustered_rate_upper(errors, trials) == pytest.approx(expected, rel=1e-12)
    # no error: the clusters are the unit (5 of them), not the 20 trials
    assert clustered_rate_upper(np.zeros(5), trials) == pytest.approx(1 - 0.05 ** (1 / 5), rel=1e-12)
    assert clustered_rate_upper(trials, trials) == 1.0


def test_decisions_repeated_by_every_target_count_once():
    """T = 8 targets that decide every candidate alike: the clustered audit is the audit of one
    decision per candidate, where counting 8 × n trials would claim a far larger ε."""
    rng = np.random.default_rng(41)
    n = 200
    member = rng.random(n) < 0.5
    scores = rng.normal(size=n) + 1.5 * member
    select_scores, select_member = rng.normal(size=n) + 1.5 * (m := rng.random(n) < 0.5), m
    once = epsilon_lower_bound_split(select_scores, select_member, scores, member, DELTA)
    clustered = epsilon_lower_bound_split_clustered(select_scores, select_member, np.tile(scores, 8),
                                                    np.tile(member, 8), np.tile(np.arange(n), 8), DELTA)
    naive = epsilon_lower_bound_split(select_scores, select_member, np.tile(scores, 8), np.tile(member, 8), DELTA)
    assert clustered["eps_lower_bound"] == pytest.approx(once["eps_lower_bound"], rel=1e-9)
    assert naive["eps_lower_bound"] > clustered["eps_lower_bound"] + 0.2
    assert (clustered["member_clusters"], clustered["nonmember_clusters"]) == (int(member.sum()), int((~member).sum()))
    assert clustered["eps_ceiling"] == pytest.approx(hypothesis_test_ceiling(int((~member).sum()), int(member.sum()),
                                                                             DELTA))
