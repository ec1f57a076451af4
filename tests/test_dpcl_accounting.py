"""DPCL accounting (privssl.accounting.dpcl): ε of without-replacement sampled Gaussian phases
against Google's dp_accounting driven by hand, the effective noise multiplier, amplification,
the common-scale calibration, Phase validation, the paper's CIFAR-10 settings, and the PLD
accountant's ε of the Poisson analogue against dp_accounting's PLDAccountant driven by hand and
the Gaussian mechanism's exact ε (Balle & Wang 2018)."""

import math
from collections import Counter

import dp_accounting
import numpy as np
import pytest
from dp_accounting import ComposedDpEvent, GaussianDpEvent, SampledWithoutReplacementDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant, compute_epsilon

from privssl.accounting.dpcl import PAPER, Phase, calibrate, effective_noise_multiplier, epsilon, paper_settings_rows
from privssl.accounting.rdp import RDP_ORDERS, UnreachableEpsilon

DELTA = 1e-5
REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE
# For the calibration's properties: full batches (closed-form RDP, instant where the without-
# replacement bound takes ≈ 0.3 s an evaluation); the paper rows calibrate sampled phases.
SCHEDULE = [Phase(n=2000, batch_size=2000, steps=500, noise_multipliers=(4.0, 8.0)),
            Phase(n=300, batch_size=300, steps=20, noise_multipliers=(12.0,))]


def direct_epsilon(events, delta=DELTA) -> float:
    """ε of the events, each composed on its own into dp_accounting's RDP accountant."""
    accountant = RdpAccountant(orders=dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS,
                               neighboring_relation=REPLACE_ONE)
    for event in events:
        accountant.compose(event)
    return accountant.get_epsilon(delta)


def schedule_events(phases):
    """The phases as dp_accounting events, built step by step from the paper's description."""
    return [SelfComposedDpEvent(SampledWithoutReplacementDpEvent(
        source_dataset_size=p.n, sample_size=p.batch_size,
        event=ComposedDpEvent([GaussianDpEvent(s) for s in p.noise_multipliers])), count=p.steps) for p in phases]


def test_epsilon_reproduces_dp_accounting_for_a_two_phase_schedule():
    phases = [Phase(n=1000, batch_size=50, steps=300, noise_multipliers=(1.1, 2.0)),
              Phase(n=600, batch_size=20, steps=80, noise_multipliers=(0.9,))]
    assert epsilon(phases, DELTA) == pytest.approx(direct_epsilon(schedule_events(phases)), rel=1e-12)


def test_two_mechanisms_in_a_step_equal_one_at_the_effective_noise_multiplier():
    assert effective_noise_multiplier([3.0, 4.0]) == pytest.approx(2.4, rel=1e-15)  # (1/9 + 1/16)^-1/2 = 12/5
    assert effective_noise_multiplier([0.5]) == 0.5
    both = epsilon([Phase(n=5000, batch_size=100, steps=1000, noise_multipliers=(1.5, 2.0))], DELTA)
    one = direct_epsilon([SelfComposedDpEvent(SampledWithoutReplacementDpEvent(5000, 100, GaussianDpEvent(1.2)),
                                              1000)])
    assert both == pytest.approx(one, rel=1e-12)


def test_full_batch_equals_the_gaussian_rdp_closed_form():
    sigma, steps = 2.0, 50
    orders = np.array(RDP_ORDERS)
    closed_form, _ = compute_epsilon(orders, steps * orders / (2 * sigma ** 2), DELTA)
    assert epsilon([Phase(n=100, batch_size=100, steps=steps, noise_multipliers=(sigma,))], DELTA) == \
        pytest.approx(closed_form, rel=1e-12)


def test_sampling_without_replacement_amplifies():
    full = epsilon([Phase(n=1000, batch_size=1000, steps=100, noise_multipliers=(1.0,))], DELTA)
    sampled = epsilon([Phase(n=1000, batch_size=10, steps=100, noise_multipliers=(1.0,))], DELTA)
    assert sampled < full / 10


@pytest.fixture(scope="module")
def calibrations():
    return {eps: calibrate(eps, DELTA, SCHEDULE) for eps in (2.0, 8.0)}


def test_calibrated_epsilon_is_at_most_and_within_0_2_percent_of_the_target(calibrations):
    for eps, cal in calibrations.items():
        phases = [Phase(p.n, p.batch_size, p.steps, sigmas)
                  for p, sigmas in zip(SCHEDULE, cal.noise_multipliers, strict=True)]
        reached = direct_epsilon(schedule_events(phases))
        assert reached == pytest.approx(cal.eps_at, rel=1e-12)
        assert 0.998 * eps <= reached <= eps


def test_calibration_is_monotone_and_keeps_the_ratios(calibrations):
    assert calibrations[2.0].scale > calibrations[8.0].scale
    for cal in calibrations.values():
        for phase, sigmas in zip(SCHEDULE, cal.noise_multipliers, strict=True):
            assert sigmas == pytest.approx(tuple(cal.scale * r for r in phase.noise_multipliers), rel=1e-15)


def test_unreachable_epsilon_is_reported():
    phases = [Phase(n=100, batch_size=100, steps=10_000, noise_multipliers=(1.0,))]
    with pytest.raises(UnreachableEpsilon, match="1e-06") as err:
        calibrate(1e-6, DELTA, phases, max_multiplier=10.0)
    assert err.value.eps == 1e-6
    for eps in (0.0, math.inf, math.nan):
        with pytest.raises(UnreachableEpsilon):
            calibrate(eps, DELTA, phases)


@pytest.mark.parametrize("fields, name", [
    ({"n": 10, "batch_size": 11, "steps": 1, "noise_multipliers": (1.0,)}, "batch_size"),
    ({"n": 10, "batch_size": 5, "steps": 1, "noise_multipliers": (1.0, -1.0)}, "noise_multipliers"),
    ({"n": 10, "batch_size": 5, "steps": 1, "noise_multipliers": (math.nan,)}, "noise_multipliers"),
    ({"n": 10, "batch_size": 5, "steps": 1, "noise_multipliers": (2.0, 0.0)}, "noise_multipliers"),
    ({"n": 10, "batch_size": 5, "steps": 1, "noise_multipliers": ()}, "noise_multipliers"),
    ({"n": 10, "batch_size": 5, "steps": -1, "noise_multipliers": (1.0,)}, "steps"),
    ({"n": 0, "batch_size": 0, "steps": 1, "noise_multipliers": (1.0,)}, "n"),
])
def test_phase_validation_names_the_field(fields, name):
    with pytest.raises(ValueError, match=rf"\b{name} ="):
        Phase(**fields)


def test_a_phase_keeps_its_noise_multipliers_as_a_tuple_of_floats_and_may_hold_one_record():
    """A list or NumPy values are stored as a tuple of floats, so that phases hash (`epsilon` caches
    on them); n = 1 (one record, a batch of it) is a valid set, accounted as a full batch."""
    phase = Phase(n=1, batch_size=1, steps=50, noise_multipliers=[2, np.float64(4.0)])
    assert phase.noise_multipliers == (2.0, 4.0) and {type(s) for s in phase.noise_multipliers} == {float}
    assert isinstance(phase.noise_multipliers, tuple) and hash(phase) == hash(Phase(1, 1, 50, (2.0, 4.0)))
    orders = np.array(RDP_ORDERS)
    closed_form, _ = compute_epsilon(orders, 50 * orders * (1 / 4 + 1 / 16) / 2, DELTA)
    assert epsilon([phase], DELTA) == pytest.approx(closed_form, rel=1e-12)


@pytest.mark.parametrize("delta", [0.0, 1.0, math.nan])
def test_delta_outside_0_1_is_refused(delta):
    with pytest.raises(ValueError, match="δ"):
        epsilon([Phase(n=10, batch_size=10, steps=1, noise_multipliers=(1.0,))], delta)


@pytest.fixture(scope="module")
def paper_rows():
    rows = paper_settings_rows()
    assert len(rows) == len(PAPER)
    return {(row["objective"], row["variant"]): row for row in rows}


PAPER_COLUMNS = ["objective", "variant", "n", "batch_size", "epochs", "steps", "mechanisms", "paper_noise_multipliers",
                 "eps_rdp_without_replacement", "eps_rdp_without_replacement_separate", "eps_pld_poisson",
                 "eps_pld_poisson_separate", "noise_multipliers", "effective_noise_multiplier", "eps", "delta", "eps_at"]


def test_paper_rows_reach_the_paper_budget(paper_rows):
    """(The first test of the module-scoped rows, so the one a mutation of paper_settings_rows is
    tested against: it checks every column.)"""
    assert set(paper_rows) == {(o, v) for o in ("simclr", "barlow_twins") for v in ("naive", "dpcl")} == set(PAPER)
    # E epochs of 50000 / 128 steps, rounded up: 200 · 390.625 = 78125, 100 · 390.625 = 39062.5 → 39063
    settings = {("simclr", "naive"): (200, 78125, "gradient", "0.3812"),
                ("simclr", "dpcl"): (200, 78125, "gradient; similarity", "0.4021; 0.4021"),
                ("barlow_twins", "naive"): (100, 39063, "gradient", "0.3633"),
                ("barlow_twins", "dpcl"): (100, 39063, "gradient; mean_a; mean_b; sse_a; sse_b",
                                           "0.3931; 0.416; 0.416; 0.416; 0.416")}
    for key, row in paper_rows.items():
        assert list(row) == PAPER_COLUMNS
        assert (row["objective"], row["variant"], row["n"], row["batch_size"], row["eps"], row["delta"]) == (
            *key, 50_000, 128, 1000.0, 1e-5)
        assert (row["epochs"], row["steps"], row["mechanisms"], row["paper_noise_multipliers"]) == settings[key]
        sigmas = tuple(float(s) for s in row["paper_noise_multipliers"].split("; "))
        together = [Phase(50_000, 128, row["steps"], sigmas)]
        apart = [Phase(50_000, 128, row["steps"] * count, (sigma,)) for sigma, count in Counter(sigmas).items()]
        assert row["eps_rdp_without_replacement"] == pytest.approx(direct_epsilon(schedule_events(together)), rel=1e-9)
        assert row["eps_rdp_without_replacement_separate"] == pytest.approx(direct_epsilon(schedule_events(apart)),
                                                                            rel=1e-9)
        assert 5 < row["eps_pld_poisson_separate"] <= row["eps_pld_poisson"] * (1 + 1e-3) < 200
        if key[1] == "dpcl":  # each mechanism on its own Poisson batch costs less than all on one (σ_eff)
            assert row["eps_pld_poisson_separate"] < 0.8 * row["eps_pld_poisson"]
        else:  # one mechanism: the same
            assert row["eps_pld_poisson_separate"] == row["eps_pld_poisson"]
        ours = [float(s) for s in row["noise_multipliers"].split("; ")]
        assert row["effective_noise_multiplier"] == pytest.approx(sum(s ** -2 for s in ours) ** -0.5, rel=1e-6)
    for row in paper_rows.values():
        assert len(row["mechanisms"].split("; ")) == len(row["paper_noise_multipliers"].split("; "))
        assert 998.0 <= row["eps_at"] <= 1000.0
    for objective in ("simclr", "barlow_twins"):  # the reported (rounded) multipliers stay within the budget
        row = paper_rows[objective, "dpcl"]
        sigmas = tuple(float(s) for s in row["noise_multipliers"].split("; "))
        phase = Phase(row["n"], row["batch_size"], row["steps"], sigmas)
        assert 998.0 <= direct_epsilon(schedule_events([phase])) <= 1000.0 * (1 + 1e-6)


def test_paper_naive_sigmas_match_ours_and_dpcl_sigmas_do_not(paper_rows):
    for objective in ("simclr", "barlow_twins"):
        naive, dpcl = paper_rows[objective, "naive"], paper_rows[objective, "dpcl"]
        # naive DP-SGD: the paper's σ reaches ε = 1000 in our accounting too (to its 4 digits)
        assert float(naive["noise_multipliers"]) == pytest.approx(float(naive["paper_noise_multipliers"]), rel=5e-4)
        assert naive["eps_rdp_without_replacement"] == pytest.approx(1000.0, rel=5e-3)
        # DPCL: the mechanisms share a batch, so only their effective σ counts — the same as naive's
        assert dpcl["effective_noise_multiplier"] == pytest.approx(naive["effective_noise_multiplier"], rel=2e-4)
        paper, ours = ([float(s) for s in dpcl[key].split("; ")] for key in ("paper_noise_multipliers",
                                                                             "noise_multipliers"))
        assert all(o > 1.3 * p for o, p in zip(ours, paper, strict=True))
        assert np.allclose(np.divide(ours, paper), ours[0] / paper[0], rtol=1e-6)  # the paper's ratios
        assert dpcl["eps_rdp_without_replacement"] > 100_000
        # the paper's own accounting (each mechanism on its own batch) reproduces its budget
        assert dpcl["eps_rdp_without_replacement_separate"] == pytest.approx(1000.0, rel=2e-3)
        assert naive["eps_rdp_without_replacement_separate"] == naive["eps_rdp_without_replacement"]


def test_paper_dpcl_sigmas_reach_1000_when_each_mechanism_is_amplified_alone():
    """What the paper composes (§4.2.2, §4.3.2): the RDPs of separately subsampled mechanisms,
    as if each drew its own batch."""
    for objective in ("simclr", "barlow_twins"):
        epochs, sigmas = PAPER[objective, "dpcl"]
        separate = ComposedDpEvent([
            SelfComposedDpEvent(SampledWithoutReplacementDpEvent(50_000, 128, GaussianDpEvent(s)), count)
            for s, count in Counter(sigmas.values()).items()])
        steps = math.ceil(epochs * 50_000 / 128)
        assert direct_epsilon([SelfComposedDpEvent(separate, steps)]) == pytest.approx(1000.0, rel=2e-3)


# ----------------------------------------------------------------------------------------------
# Independent references for the per-step RDP of the without-replacement subsampled Gaussian
# (replace-one adjacency), in high precision with mpmath at integer orders α = 2 … 32.
#
# Convention, as the code's (privssl.accounting.dpcl docstring): a noise multiplier σ is the noise
# std over the query's *replace-one* L2 sensitivity, so the base Gaussian on the batch has RDP
# ε(α) = α / (2σ²) under replace-one (the q = 1 case of the code: test_full_batch_... above). In
# units of a per-record clip norm C, a clipped sum has replace-one sensitivity 2C and RDP 2α/s²
# at std s·C; that is the same formula at σ = s / 2, so the references below take ε(j) = j/(2σ²).
#
# (upper) Wang, Balle & Kasiviswanathan 2019 (AISTATS; arXiv:1808.00087), Theorem 9: for integer
# α ≥ 2, a mechanism M with replace-one RDP ε(·) on subsamples of size m = γn, run on a uniform
# size-m subset drawn without replacement, has replace-one RDP at most
#   1/(α-1) · log(1 + γ² C(α,2) min{4(e^{ε(2)} - 1), e^{ε(2)} min{2, (e^{ε(∞)} - 1)²}}
#                   + Σ_{j=3..α} γ^j C(α,j) e^{(j-1)ε(j)} min{2, (e^{ε(∞)} - 1)^j}),
# and the Gaussian has ε(∞) = ∞, so each min{2, ·} is 2. dp_accounting implements the
# Gaussian-specific strengthening (their Thm. 27: each j ≥ 3 term is the min of Theorem 9's and a
# forward-difference term), so the library may be *below* Theorem 9 but never above it; at α = 2
# there is only the j = 2 term, which the two theorems share, so there they must agree exactly.
#
# (lower) Any valid RDP bound is ≥ the Rényi divergence of one concrete pair of neighbouring
# inputs. With a scalar query f ∈ [0, 1] (replace-one sensitivity 1), D holding one record with
# f = 1 among records with f = 0 and D' replacing it by a record with f = 0, the released sum is
# P = (1-γ) N(0, σ²) + γ N(1, σ²) on D (the record is in the batch with probability γ = m/n) and
# Q = N(0, σ²) on D'. For integer α (Mironov, Talwar & Zhang 2019, §3.3, binomial expansion):
#   D_α(P || Q) = 1/(α-1) · log Σ_{k=0..α} C(α,k) (1-γ)^{α-k} γ^k e^{(k²-k)/(2σ²)}.

import mpmath  # noqa: E402

from privssl.accounting import wor_rdp  # noqa: E402

WOR_ORDERS = list(range(2, 33))
# (n, batch size, σ): small q = 1/6000 … 1/2, σ from 0.5 to 5
WOR_CASES = [(60_000, 10, 0.5), (50_000, 128, 5.0), (1000, 10, 1.0), (500, 50, 2.0), (1000, 500, 0.7)]


def wbk_theorem9_rdp(q: float, sigma: float, alpha: int) -> mpmath.mpf:
    """Theorem 9 of Wang, Balle & Kasiviswanathan (2019) for the Gaussian (ε(∞) = ∞), 50 digits."""
    with mpmath.workdps(50):
        q, s2 = mpmath.mpf(q), mpmath.mpf(sigma) ** 2

        def base(j):  # replace-one RDP of the Gaussian at noise multiplier σ
            return mpmath.mpf(j) / (2 * s2)

        total = 1 + q ** 2 * mpmath.binomial(alpha, 2) * min(4 * mpmath.expm1(base(2)), 2 * mpmath.exp(base(2)))
        for j in range(3, alpha + 1):
            total += q ** j * mpmath.binomial(alpha, j) * 2 * mpmath.exp((j - 1) * base(j))
        return mpmath.log(total) / (alpha - 1)


def mixture_renyi_divergence(q: float, sigma: float, alpha: int) -> mpmath.mpf:
    """D_α((1-q) N(0, σ²) + q N(1, σ²) || N(0, σ²)) at integer α, exactly (50 digits)."""
    with mpmath.workdps(50):
        q, s2 = mpmath.mpf(q), mpmath.mpf(sigma) ** 2
        total = mpmath.fsum(mpmath.binomial(alpha, k) * (1 - q) ** (alpha - k) * q ** k
                            * mpmath.exp(mpmath.mpf(k * k - k) / (2 * s2)) for k in range(alpha + 1))
        return mpmath.log(total) / (alpha - 1)


def code_step_rdp(n: int, batch_size: int, sigma: float) -> np.ndarray:
    """The RDP at WOR_ORDERS of one step, as the code computes it (wor_rdp, which dpcl.epsilon
    composes)."""
    return wor_rdp.rdp(batch_size / n, sigma, WOR_ORDERS)


@pytest.mark.parametrize("n, batch_size, sigma", WOR_CASES)
def test_step_rdp_equals_wang_balle_kasiviswanathan_at_order_2_and_never_exceeds_theorem_9(n, batch_size, sigma):
    """Upper reference: WBK19 Theorem 9 (ε(∞)-free Gaussian form), 50-digit mpmath.

    α = 2: the bound is one term, shared by Thm. 9 and the Gaussian Thm. 27, so equality to
    double rounding (rel 1e-12). α ≥ 3: the library (Thm. 27) is ≤ Theorem 9 (same slack)."""
    q = batch_size / n
    ours = code_step_rdp(n, batch_size, sigma)
    reference = np.array([float(wbk_theorem9_rdp(q, sigma, a)) for a in WOR_ORDERS])
    assert ours[0] == pytest.approx(reference[0], rel=1e-12)
    assert np.all(ours <= reference * (1 + 1e-12)), np.c_[WOR_ORDERS, ours, reference][ours > reference * (1 + 1e-12)]


@pytest.mark.parametrize("n, batch_size, sigma", WOR_CASES)
def test_step_rdp_is_at_least_the_exact_divergence_of_a_neighbouring_pair(n, batch_size, sigma):
    """Lower reference: the exact D_α of the neighbouring pair in the comment above (any valid
    replace-one RDP bound must be ≥ it), 50-digit mpmath."""
    q = batch_size / n
    ours = code_step_rdp(n, batch_size, sigma)
    exact = np.array([float(mixture_renyi_divergence(q, sigma, a)) for a in WOR_ORDERS])
    assert np.all(ours >= exact), np.c_[WOR_ORDERS, ours, exact][ours < exact]


def _pair_delta(q, sigma, eps) -> mpmath.mpf:
    """Exact hockey-stick δ(ε) = max(H_{e^ε}(P||Q), H_{e^ε}(Q||P)) of the pair above (P the
    mixture, Q = N(0, σ²)). The privacy loss L(x) = log(1 - q + q e^{(2x-1)/(2σ²)}) increases in
    x, so each divergence is a difference of normal tails at the x where L = ±ε."""
    with mpmath.workdps(50):
        q, sigma, eps = mpmath.mpf(q), mpmath.mpf(sigma), mpmath.mpf(eps)

        def mix_cdf(x):
            return (1 - q) * mpmath.ncdf(x / sigma) + q * mpmath.ncdf((x - 1) / sigma)

        x1 = sigma ** 2 * mpmath.log((mpmath.exp(eps) - 1 + q) / q) + mpmath.mpf(1) / 2  # L(x1) = ε
        remove = (1 - mix_cdf(x1)) - mpmath.exp(eps) * (1 - mpmath.ncdf(x1 / sigma))
        add = mpmath.mpf(0)
        if mpmath.exp(-eps) > 1 - q:  # L = -ε is reachable
            x2 = sigma ** 2 * mpmath.log((mpmath.exp(-eps) - 1 + q) / q) + mpmath.mpf(1) / 2
            add = mpmath.ncdf(x2 / sigma) - mpmath.exp(eps) * mix_cdf(x2)
        return max(remove, add)


@pytest.mark.parametrize("n, batch_size, sigma", [(1000, 500, 0.7), (100, 20, 0.5), (1000, 10, 1.0)])
def test_one_step_epsilon_is_sound_for_the_exact_privacy_profile_of_a_neighbouring_pair(n, batch_size, sigma):
    """The (ε, δ) the code reports for one step must hold for every neighbouring pair, so the
    pair above must have δ_pair(ε_code) ≤ δ (its exact hockey-stick divergence, mpmath): a check
    of the RDP → (ε, δ) conversion (Canonne, Kamath & Steinke 2020, Prop. 12) independent of RDP."""
    eps = epsilon([Phase(n, batch_size, 1, (sigma,))], DELTA)
    assert _pair_delta(batch_size / n, sigma, eps) <= DELTA


def _sum_statistic_epsilon_lower_bound(q, sigma, steps, delta) -> float:
    """An ε below the true ε(δ) of `steps` compositions of the pair above: the record is in each
    step's batch independently with probability q, so on D the steps' outputs are i.i.d. P and on
    D' i.i.d. Q. Their sum S is a post-processing (data processing: its hockey-stick divergence
    is a lower bound), with S ~ Σ_k Bin(steps, q)(k) N(k, steps σ²) on D and N(0, steps σ²) on D'.
    Its privacy loss log Σ_k w_k e^{(2ks - k²)/(2 steps σ²)} increases in s, so δ_S(ε) is a
    difference of normal tails at the s where the loss is ε; bisection on ε keeps an ε with
    δ_S(ε) > δ, which the true ε(δ) therefore exceeds."""
    with mpmath.workdps(30):
        q, eps_tol = mpmath.mpf(q), mpmath.mpf(10) ** -4
        weights = [mpmath.binomial(steps, k) * q ** k * (1 - q) ** (steps - k) for k in range(steps + 1)]
        ks = [k for k in range(steps + 1) if weights[k] > mpmath.mpf(10) ** -40]  # the rest: < 1e-37 in all
        var = steps * mpmath.mpf(sigma) ** 2
        sd = mpmath.sqrt(var)

        def loss(s):
            return mpmath.log(mpmath.fsum(weights[k] * mpmath.exp((2 * k * s - k * k) / (2 * var)) for k in ks))

        def delta_s(eps):
            lo, hi = -10 * sd, 10 * sd + steps
            s = mpmath.findroot(lambda x: loss(x) - eps, (lo, hi), solver="anderson")
            return (mpmath.fsum(weights[k] * mpmath.ncdf((k - s) / sd) for k in ks)
                    - mpmath.exp(eps) * mpmath.ncdf(-s / sd))

        low, high = mpmath.mpf(0), mpmath.mpf(1)
        while delta_s(high) > delta:
            low, high = high, 2 * high
        while high - low > eps_tol:
            mid = (low + high) / 2
            low, high = (mid, high) if delta_s(mid) > delta else (low, mid)
        return float(low)


def test_composed_epsilon_lies_between_a_sum_statistic_lower_bound_and_theorem_9_converted_by_hand():
    """T steps compose additively in RDP (Mironov 2017, Prop. 1); converting T · Theorem 9 at
    α = 2 … 32 with ε = r + log(1 - 1/α) - (log δ + log α)/(α - 1) (Canonne, Kamath & Steinke
    2020, Prop. 12; valid for any RDP upper bound) gives an ε that the code, which minimises over
    a superset of orders an RDP ≤ Theorem 9, may not exceed. From below, no valid accountant
    may report less than the exact ε of the sum-statistic lower bound (function above)."""
    n, batch_size, sigma, steps = 1000, 10, 1.0, 300
    q = batch_size / n
    with mpmath.workdps(50):
        by_hand = min(steps * wbk_theorem9_rdp(q, sigma, a) + mpmath.log(1 - mpmath.mpf(1) / a)
                      - (mpmath.log(DELTA) + mpmath.log(a)) / (a - 1) for a in WOR_ORDERS)
    ours = epsilon([Phase(n, batch_size, steps, (sigma,))], DELTA)
    assert _sum_statistic_epsilon_lower_bound(q, sigma, steps, DELTA) <= ours <= float(by_hand) * (1 + 1e-12)


# ----------------------------------------------------------------------------------------------
# The Poisson analogue by the PLD accountant (privssl.accounting.dpcl.poisson_epsilon): each record
# in each step's batch with probability |B|/n, substitution of one record. dp_accounting's
# REPLACE_ONE pair for a Poisson-sampled Gaussian of noise multiplier s shifts a record's
# contribution from -1 to +1 (replace-one sensitivity 2), so our σ (std / replace-one sensitivity)
# is s = 2σ there.

from dp_accounting import PoissonSampledDpEvent  # noqa: E402
from dp_accounting.pld import PLDAccountant  # noqa: E402

from privssl.accounting.dpcl import poisson_epsilon  # noqa: E402
from privssl.release.calibration import analytic_gaussian_delta  # noqa: E402

PAPER_Q, SIMCLR_STEPS = 128 / 50_000, math.ceil(200 * 50_000 / 128)


def pld_by_hand(sigma_counts, q, steps, interval=3e-4, delta=DELTA) -> float:
    """dp_accounting's PLDAccountant (REPLACE_ONE) on Poisson-sampled Gaussians at 2σ, composed by
    hand: `steps` × `count` draws of each (σ, count)."""
    accountant = PLDAccountant(REPLACE_ONE, value_discretization_interval=interval)
    for sigma, count in sigma_counts:
        accountant.compose(SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(2 * sigma)), steps * count))
    return accountant.get_epsilon(delta)


def test_poisson_analogue_at_q_1_is_the_exact_gaussian_mechanism():
    """q = 1: T steps of a Gaussian at σ (std over the replace-one sensitivity Δ = 1) are one
    Gaussian mechanism at σ/√T, whose exact ε(δ) is Balle & Wang's (Theorem 8): the PLD value is
    an upper bound on it within 1e-3."""
    for sigma, steps in ((1.0, 10), (3.0, 50), (0.7, 2)):
        exact = _solve_decreasing(lambda e: analytic_gaussian_delta(sigma / math.sqrt(steps), 1.0, e) - DELTA)
        ours = poisson_epsilon([Phase(n=100, batch_size=100, steps=steps, noise_multipliers=(sigma,))], DELTA)
        assert exact * (1 - 1e-9) <= ours <= exact * (1 + 1e-3), (sigma, steps, ours, exact)


def _solve_decreasing(f, lo=0.0, hi=1.0) -> float:
    """The root of a decreasing f on [0, ∞) by doubling and 100 bisections."""
    while f(hi) > 0:
        lo, hi = hi, 2 * hi
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return hi


def test_paper_rows_poisson_analogue_agrees_with_dp_accounting_pld_by_hand(paper_rows):
    """Shared batch: one Gaussian at σ_eff; separate: each mechanism its own Poisson batch. The
    magnitudes are those of an independent check (≈ 27.5, 16.7 and 12.0 for SimCLR)."""
    naive, dpcl = paper_rows["simclr", "naive"], paper_rows["simclr", "dpcl"]
    shared = pld_by_hand([(0.4021 / math.sqrt(2), 1)], PAPER_Q, SIMCLR_STEPS)
    separate = pld_by_hand([(0.4021, 2)], PAPER_Q, SIMCLR_STEPS)
    alone = pld_by_hand([(0.3812, 1)], PAPER_Q, SIMCLR_STEPS)
    assert dpcl["eps_pld_poisson"] == pytest.approx(shared, rel=1e-3) and shared == pytest.approx(27.45, abs=0.05)
    assert dpcl["eps_pld_poisson_separate"] == pytest.approx(separate, rel=1e-3)
    assert separate == pytest.approx(16.65, abs=0.05)
    assert naive["eps_pld_poisson"] == naive["eps_pld_poisson_separate"] == pytest.approx(alone, rel=1e-3)
    assert alone == pytest.approx(12.03, abs=0.05)
    for row in paper_rows.values():  # the loose RDP bound for sampling without replacement, far above
        assert row["eps_pld_poisson"] < row["eps_rdp_without_replacement"] / 30
        assert row["eps_pld_poisson_separate"] <= row["eps_pld_poisson"] * (1 + 1e-3)


def test_poisson_epsilon_composes_phases_and_mechanisms_as_dp_accounting_does():
    """Two phases, two mechanisms on one batch (σ_eff) and the same with separate batches."""
    phases = [Phase(n=600, batch_size=60, steps=40, noise_multipliers=(1.2, 1.6)),
              Phase(n=600, batch_size=20, steps=90, noise_multipliers=(1.1,))]
    for separate, events in ((False, [(0.96, 0.1, 40), (1.1, 1 / 30, 90)]),
                             (True, [(1.2, 0.1, 40), (1.6, 0.1, 40), (1.1, 1 / 30, 90)])):
        accountant = PLDAccountant(REPLACE_ONE, value_discretization_interval=2e-4)
        for sigma, q, steps in events:  # σ_eff of (1.2, 1.6) is (1.2^-2 + 1.6^-2)^-1/2 = 0.96
            accountant.compose(SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(2 * sigma)), steps))
        by_hand = accountant.get_epsilon(DELTA)
        ours = poisson_epsilon(phases, DELTA, separate=separate)
        assert by_hand * (1 - 1e-9) <= ours <= by_hand * (1 + 1e-3)


# ------------------------------------------------------------------------------------ the phases, by hand

from privssl.accounting.dpcl import separately_sampled  # noqa: E402
from privssl.accounting.dpcl_spec import dpcl_phases, fine_tune_phases, training_steps  # noqa: E402


def test_separately_sampled_gives_each_distinct_sigma_its_own_phase_with_the_steps_of_its_mechanisms():
    phase = Phase(n=1000, batch_size=50, steps=30, noise_multipliers=(0.7, 0.5, 0.7, 0.7))
    assert separately_sampled(phase) == [Phase(1000, 50, 30, (0.5,)), Phase(1000, 50, 90, (0.7,))]
    assert separately_sampled(Phase(10, 5, 4, (1.0,))) == [Phase(10, 5, 4, (1.0,))]


def test_the_phases_of_a_dpcl_and_a_dpadapter_release_by_hand():
    """epochs × ⌊n/|B|⌋ steps (fixed-size batches without replacement, the last partial one dropped);
    σ = 1 by default: the ratios `calibrate` scales."""
    section = {"objective": "barlow_twins", "encoder": {"epochs": 3, "batch_size": 40},
               "head": {"epochs": 2, "batch_size": 30}}
    assert dpcl_phases(section, "dpcl", 130) == [Phase(130, 40, 9, (1.0,) * 5), Phase(130, 30, 8, (1.0,))]
    assert dpcl_phases(section, "naive", 130, 0.8) == [Phase(130, 40, 9, (0.8,)), Phase(130, 30, 8, (0.8,))]
    assert dpcl_phases(section, "dpcl", 130, 2.0, encoder_epochs=1) == [Phase(130, 40, 3, (2.0,) * 5)]
    assert fine_tune_phases({"fine_tune": {"epochs": 10, "batch_size": 50}}, 149) == [Phase(149, 50, 20, (1.0,))]
    assert fine_tune_phases({"fine_tune": {"epochs": 10, "batch_size": 50}}, 150, 0.6) == [Phase(150, 50, 30, (0.6,))]
    with pytest.raises(ValueError, match=r"^dpadapter\.fine_tune\.batch_size = 151 is not allowed: larger than the 150 "
                                         r"records it samples without replacement$"):
        training_steps(150, {"epochs": 1, "batch_size": 151}, "dpadapter.fine_tune")
    assert training_steps(150, {"epochs": 2, "batch_size": 150}, "x") == 2


def test_an_eps_that_is_not_finite_and_positive_is_refused_before_any_accounting():
    for eps in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(UnreachableEpsilon, match="is unreachable: ε must be finite and > 0$"):
            calibrate(eps, DELTA, SCHEDULE)
        assert not reachable(eps, DELTA, SCHEDULE)  # even where ε(1e6 · ratios) is 0, as here
    with pytest.raises(ValueError, match="^no phase takes a step: there is nothing to calibrate$"):
        calibrate(1.0, DELTA, [Phase(100, 10, 0, (1.0,))])


def test_an_eps_below_one_is_calibrated_like_any_other():
    assert reachable(0.5, DELTA, SCHEDULE)
    found = calibrate(0.5, DELTA, SCHEDULE)
    assert (1 - 1e-3) * 0.5 <= direct_epsilon(schedule_events(_scaled(SCHEDULE, found.scale))) <= 0.5


from privssl.accounting.dpcl import _scaled, reachable  # noqa: E402


def test_an_eps_above_the_ratios_own_is_reached_by_halving_the_scale():
    """ε(scale 1) ≈ 48 here: ε = 200 needs less noise than the ratios, a scale below 1."""
    found = calibrate(200.0, DELTA, SCHEDULE)
    assert found.scale < 0.5
    assert (1 - 1e-3) * 200 <= direct_epsilon(schedule_events(_scaled(SCHEDULE, found.scale))) <= 200


def test_where_eps_jumps_over_the_band_to_zero_the_scale_is_the_jump():
    """One full-batch Gaussian: dp_accounting's ε falls from 0.0035 to 0 (its KL bound) at
    σ ≈ 74162, over the whole band below ε = 0.001: the calibration stops at the jump (to 1e-12 in
    log σ) and says so with eps_at = 0."""
    phase = [Phase(100, 100, 1, (1.0,))]
    found = calibrate(0.001, DELTA, phase)
    assert found.eps_at == 0.0 == direct_epsilon(schedule_events(_scaled(phase, found.scale)))
    assert direct_epsilon(schedule_events(_scaled(phase, found.scale * (1 - 1e-9)))) > 0.001
    assert 7.4e4 < found.scale < 7.5e4


def test_an_eps_out_of_reach_at_the_largest_scale_is_refused_naming_the_phases():
    phases = [Phase(n=100, batch_size=100, steps=10_000, noise_multipliers=(1.0,))]
    with pytest.raises(UnreachableEpsilon, match=r"^ε = 1e-06 is unreachable: even at scale 10 the accountant "
                                                 r"reports ε = \S+ \(δ = 1e-05; phases' \(n, batch, steps\): "
                                                 r"\[\(100, 100, 10000\)\]\)$"):
        calibrate(1e-6, DELTA, phases, max_multiplier=10.0)


def test_an_eps_equal_to_the_accountants_own_at_the_largest_scale_is_reached_there():
    """ε(s) ≤ eps includes equality: where eps is dp_accounting's ε at max_multiplier × ratios,
    that scale qualifies, so `reachable` says so and `calibrate` returns it (with the target, δ and
    the multipliers it reaches) instead of raising; one part in 1e9 less is out of reach."""
    top = 2.0
    assert math.exp(math.log(top)) == top  # the search's largest scale is exactly `top`
    eps = float(direct_epsilon(schedule_events(_scaled(SCHEDULE, top))))
    assert epsilon(_scaled(SCHEDULE, top), DELTA) == eps  # the same accountant, the same float
    assert reachable(eps, DELTA, SCHEDULE, max_multiplier=top)
    assert not reachable(eps * (1 - 1e-9), DELTA, SCHEDULE, max_multiplier=top)
    found = calibrate(eps, DELTA, SCHEDULE, max_multiplier=top)
    assert (found.eps, found.delta, found.scale, found.eps_at) == (eps, DELTA, top, eps)
    assert found.noise_multipliers == [(8.0, 16.0), (24.0,)]


def test_poisson_events_share_each_steps_batch_by_default_and_skip_phases_without_steps():
    """By default the mechanisms of a step are one Poisson-sampled Gaussian at 2σ_eff (σ_eff of
    (1.2, 1.6) is 1.2 · 1.6 / 2 = 0.96); a phase of 0 steps adds nothing, wherever it stands."""
    from privssl.accounting.dpcl import poisson_events

    phases = [Phase(600, 60, 0, (0.5,)), Phase(600, 60, 40, (1.2, 1.6)), Phase(600, 20, 0, (0.3, 0.4)),
              Phase(600, 20, 90, (1.1,))]
    shared = [(e.count, e.event.sampling_probability, e.event.event.noise_multiplier) for e in poisson_events(phases)]
    assert [(count, q) for count, q, _ in shared] == [(40, pytest.approx(0.1, rel=1e-15)),
                                                      (90, pytest.approx(1 / 30, rel=1e-15))]
    assert [s for _, _, s in shared] == pytest.approx([1.92, 2.2], rel=1e-12)
    separate = [(e.count, e.event.event.noise_multiplier) for e in poisson_events(phases, separate=True)]
    assert separate == [(40, 2.4), (40, 3.2), (90, 2.2)]


def test_the_paper_rows_are_computed_once_per_process_and_each_caller_gets_its_own_copy():
    """paper_settings_rows is cached (it takes seconds): a caller that edits its rows must not
    change what the next caller gets."""
    first = paper_settings_rows()
    first[0]["eps_at"] = -1.0
    second = paper_settings_rows()
    assert second[0]["eps_at"] > 0 and second[0] is not first[0]
