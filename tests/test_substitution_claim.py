"""privssl.release.methods.substitution_claim: every release method's claim restated for the
substitution of one record (the adjacency every membership audit tests; each audit row's
`claimed_eps` and `delta`), against the group-privacy argument written out here independently.

First principles (Dwork & Roth 2014, Thm. 2.2's group privacy; here for a group of 2, spelled
out): a substitution D → D' is a removal D → D⁻ followed by an addition D⁻ → D'. If M is (ε, δ)-DP
under addition/removal, for every event S

    P[M(D) ∈ S] ≤ e^ε P[M(D⁻) ∈ S] + δ ≤ e^ε (e^ε P[M(D') ∈ S] + δ) + δ = e^{2ε} P[M(D') ∈ S] + (1 + e^ε) δ,

so M is (2ε, (1 + e^ε) δ)-DP under substitution, and (1 + e^ε) δ is the best δ at 2ε that uses
only the two (ε, δ) steps (the linear program below attains it), which is what the code claims:
the textbook form k e^{(k-1)ε} δ at k = 2, 2 e^ε δ, is valid but up to twice looser. A pure
method (δ = 0) stays pure: (2ε, 0). Methods whose guarantee is already stated for substitution
keep their (ε, δ).
"""

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import linprog

from privssl.release.methods import ADD_REMOVE, REGISTRY, SUBSTITUTION, substitution_claim

EPS_GRID = (0.01, 0.5, 1.0, 3.0, 8.0)
DELTA = 1e-5


def two_step_delta(eps: float, delta: float) -> float:
    """(1 + e^ε) δ: the substitution δ at 2ε of an (ε, δ)-DP add/remove mechanism (docstring)."""
    return (1 + math.exp(eps)) * delta


def worst_two_step_delta_lp(eps: float, delta: float, outcomes: int = 4) -> float:
    """max over distributions P0, P1, P2 on `outcomes` points with (P0, P1) and (P1, P2) each
    (ε, δ)-indistinguishable (both directions, every event) of max_S P0(S) - e^{2ε} P2(S):
    the exact worst substitution δ at 2ε of two add/remove steps, by linear programming."""
    events = [s for r in range(1, outcomes + 1) for s in itertools.combinations(range(outcomes), r)]
    size = 3 * outcomes
    rows = []
    for i, j in ((0, 1), (1, 0), (1, 2), (2, 1)):
        for s in events:
            row = np.zeros(size)
            row[[i * outcomes + x for x in s]] += 1
            row[[j * outcomes + x for x in s]] -= math.exp(eps)
            rows.append(row)
    sums = np.kron(np.eye(3), np.ones(outcomes))
    best = 0.0
    for s in events:
        objective = np.zeros(size)
        objective[list(s)] -= 1
        objective[[2 * outcomes + x for x in s]] += math.exp(2 * eps)
        result = linprog(objective, A_ub=np.array(rows), b_ub=np.full(len(rows), delta), A_eq=sums,
                         b_eq=np.ones(3), bounds=(0, 1), method="highs")
        assert result.status == 0
        best = max(best, -result.fun)
    return best


@pytest.mark.parametrize("eps, delta", [(0.1, 0.05), (1.0, 1e-2), (2.0, 1e-3)])
def test_group_privacy_reference_is_the_exact_worst_case_of_two_steps(eps, delta):
    """The reference itself, from first principles: an LP over all chains P0 ~ P1 ~ P2 attains
    (1 + e^ε) δ and does not exceed it."""
    assert worst_two_step_delta_lp(eps, delta) == pytest.approx(two_step_delta(eps, delta), rel=1e-9)


def test_registry_states_one_of_the_two_adjacencies():
    assert {m.adjacency for m in REGISTRY.values()} <= {SUBSTITUTION, ADD_REMOVE}
    assert any(m.adjacency == ADD_REMOVE for m in REGISTRY.values())  # else the group step is untested


@pytest.mark.parametrize("name", sorted(n for n, m in REGISTRY.items() if m.adjacency == SUBSTITUTION))
@pytest.mark.parametrize("eps", EPS_GRID)
def test_substitution_native_methods_keep_their_claim(name, eps):
    """Already a substitution claim: ε unchanged; δ the method's own (0 only for ε-DP methods,
    dp_kind pure_dp; the (ε, δ) of approx_dp and of DPCL's heuristic_dp accountant kept)."""
    pure = REGISTRY[name].dp_kind == "pure_dp"
    assert substitution_claim(name, eps, DELTA) == (eps, 0.0 if pure else DELTA)


@pytest.mark.parametrize("name", sorted(n for n, m in REGISTRY.items() if m.adjacency == ADD_REMOVE))
@pytest.mark.parametrize("eps", EPS_GRID)
def test_add_remove_methods_get_the_group_privacy_claim_of_two_steps(name, eps):
    """ε' = 2ε; δ' the first-principles (1 + e^ε) δ, the tightest the two steps allow (the linear
    program's optimum); where that reaches 1 there is no claim: ε' = ∞ at the method's own δ."""
    claimed_eps, claimed_delta = substitution_claim(name, eps, DELTA)
    tight = (1 + math.exp(eps)) * DELTA
    if tight < 1:
        assert claimed_eps == 2 * eps
        assert claimed_delta >= two_step_delta(eps, DELTA) * (1 - 1e-9)  # sound
        assert claimed_delta == pytest.approx(tight, rel=1e-12)
    else:
        assert (claimed_eps, claimed_delta) == (math.inf, DELTA)


def test_add_remove_claim_by_hand():
    """DP-SGD at (1, 1e-5): (2, (1 + e) · 1e-5) = (2, 3.718281828459045e-05), not the textbook
    2e · 1e-5 = 5.437e-05; at (12, 1e-5) (1 + e^12) · 1e-5 = 1.63 ≥ 1: no claim, (∞, 1e-5);
    at (5, 1e-3) (1 + e^5) · 1e-3 = 0.149413 < 1: (10, 0.14941315910257660)."""
    eps, delta = substitution_claim("dpsgd", 1.0, 1e-5)
    assert eps == 2.0 and delta == pytest.approx(3.718281828459045e-05, rel=1e-12)
    assert substitution_claim("dpsgd", 12.0, 1e-5) == (math.inf, 1e-5)
    eps, delta = substitution_claim("dpsgd", 5.0, 1e-3)
    assert eps == 10.0 and delta == pytest.approx(0.1494131591025766, rel=1e-12)


def test_claim_by_hand_for_substitution_native_methods():
    assert substitution_claim("laplace", 0.5, 1e-5) == (0.5, 0.0)  # ε-DP: no δ
    assert substitution_claim("gaussian_analytic", 0.5, 1e-5) == (0.5, 1e-5)
    assert substitution_claim("dpcl_naive", 4.0, 1e-6) == (4.0, 1e-6)


def test_dpcl_claim_keeps_the_accountants_delta_by_hand():
    assert substitution_claim("dpcl", 4.0, 1e-6) == (4.0, 1e-6)


def test_the_unprotected_head_has_no_method_and_is_refused():
    """`none` (no protection) is not a release method: the audit script writes its claim itself
    (ε = ∞); substitution_claim refuses it, like any unknown name."""
    with pytest.raises(ValueError, match="unknown release method 'none'"):
        substitution_claim("none", 1.0, 1e-5)
