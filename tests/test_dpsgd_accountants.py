"""The DP-SGD head's three accountants (privssl.accounting.dpsgd: `pld`, `rdp`, `prv`), each against
a value the library that publishes it computes without our wrapper, the PLD accountant also
against the Gaussian mechanism's exact ε (no subsampling; Balle & Wang 2018, Theorem 8, via
privssl.release.calibration), the ordering PLD ≤ RDP at the default config's q and steps, and the
calibration's promise: the accountant's ε at the calibrated σ lies in [(1 − 1e-3) ε, ε]."""

import math
import re
import types
import warnings

import pytest
import torch
from dp_accounting import GaussianDpEvent, NeighboringRelation, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.pld import PLDAccountant
from opacus.accountants import PRVAccountant
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

from privssl.accounting import dpsgd, pld
from privssl.accounting.dpsgd import accountant_epsilon, calibrate_grid, epsilon_spent, noise_multiplier
from privssl.accounting.rdp import RDP_ORDERS, UnreachableEpsilon
from privssl.release.calibration import analytic_gaussian_delta
from privssl.release.dpsgd import train_dpsgd_head
from privssl.release.dpsgd_spec import ACCOUNTANTS, DPSGDSpec, sampling_plan
from privssl.release.methods import dpsgd_guarantee
from privssl.training.heads import HeadSpec

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order is the")  # Opacus' RDP at the orders' ends
DELTA = 1e-5
DEFAULT_Q, DEFAULT_STEPS = 1 / 3, 90  # config.yaml: |d| = 150, batch 50, 30 epochs
# σ that the accountants calibrate for ε = 0.1 … 1e5 at the default's q and steps
SIGMAS = [107.65, 12.95, 1.874, 0.4814, 0.1692, 0.06717, 0.02215]


def pld_by_hand(sigma, q, steps, interval, delta=DELTA) -> float:
    accountant = PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=interval)
    accountant.compose(SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps))
    return accountant.get_epsilon(delta)


def rdp_by_hand(sigma, q, steps, delta=DELTA) -> float:
    return get_privacy_spent(orders=RDP_ORDERS, rdp=compute_rdp(q=q, noise_multiplier=sigma, steps=steps,
                                                                 orders=RDP_ORDERS), delta=delta)[0]


def exact_gaussian_epsilon(sigma, steps, delta=DELTA) -> float:
    """ε(δ) of `steps` unsampled Gaussian steps at σ (sensitivity 1): one Gaussian at σ/√steps."""
    lo, hi = 0.0, 1.0
    while analytic_gaussian_delta(sigma / math.sqrt(steps), 1.0, hi) > delta:
        lo, hi = hi, 2 * hi
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if analytic_gaussian_delta(sigma / math.sqrt(steps), 1.0, mid) > delta else (lo, mid)
    return hi


@pytest.mark.parametrize("sigma", SIGMAS)
def test_pld_matches_dp_accounting_pld_accountant_composed_by_hand(sigma):
    """Ours is within 1e-3 of dp_accounting's PLDAccountant at a 5× finer interval, and not below
    it (both are pessimistic: ε only falls as the interval shrinks)."""
    ours = pld.estimate((pld.poisson_gaussian(sigma, DEFAULT_Q, DEFAULT_STEPS),), DELTA)
    assert accountant_epsilon(sigma, DEFAULT_Q, DEFAULT_STEPS, DELTA, "pld") == ours.eps
    finer = pld_by_hand(sigma, DEFAULT_Q, DEFAULT_STEPS, ours.interval / 5)
    assert finer * (1 - 1e-9) <= ours.eps <= finer * (1 + 1e-3)
    assert ours.error <= 1e-3 * ours.eps


@pytest.mark.parametrize("sigma, steps", [(1.0, 1), (1.0, 10), (5.0, 90), (0.5, 4), (30.0, 90)])
def test_pld_without_subsampling_is_the_exact_gaussian_mechanism(sigma, steps):
    """q = 1: within 1e-3 above Balle & Wang's exact ε; RDP is a valid, looser upper bound."""
    exact = exact_gaussian_epsilon(sigma, steps)
    ours = accountant_epsilon(sigma, 1.0, steps, DELTA, "pld")
    assert exact * (1 - 1e-9) <= ours <= exact * (1 + 1e-3)
    assert accountant_epsilon(sigma, 1.0, steps, DELTA, "rdp") >= ours


@pytest.mark.parametrize("sigma", SIGMAS)
def test_rdp_is_opacus_rdp_over_dp_accountings_orders(sigma):
    assert accountant_epsilon(sigma, DEFAULT_Q, DEFAULT_STEPS, DELTA, "rdp") == pytest.approx(
        rdp_by_hand(sigma, DEFAULT_Q, DEFAULT_STEPS), rel=1e-12)


def test_prv_is_opacus_prv_accountant():
    for sigma in (12.95, 1.874):
        accountant = PRVAccountant()
        accountant.history = [(sigma, DEFAULT_Q, DEFAULT_STEPS)]
        assert accountant_epsilon(sigma, DEFAULT_Q, DEFAULT_STEPS, DELTA, "prv") == accountant.get_epsilon(DELTA)


@pytest.mark.parametrize("sigma", SIGMAS)
def test_pld_is_below_rdp_at_the_default_sampling_rate_and_steps(sigma):
    """PLD (exact up to 1e-3, pessimistic) against RDP (an upper bound): tighter at every ε of the grid."""
    ours, rdp = (accountant_epsilon(sigma, DEFAULT_Q, DEFAULT_STEPS, DELTA, a) for a in ("pld", "rdp"))
    assert ours < rdp
    if sigma == 1.874:  # the figures quoted in config.yaml and docs/privacy.md
        assert (round(ours, 2), round(rdp, 2)) == (9.20, 9.99)


GRID = [0.1, 1.0, 10.0, 100.0, 1000.0, 1e4, 1e5]  # config.yaml's protect.eps


@pytest.mark.parametrize("accountant, eps_grid", [("pld", GRID), ("rdp", GRID), ("prv", [1.0])])
def test_calibrated_sigma_reaches_each_eps_of_the_grid_within_0_1_percent(accountant, eps_grid):
    """ε(σ) ∈ [(1 − 1e-3) ε, ε] at the σ returned, and for PLD also by dp_accounting's accountant
    at a 5× finer interval (never above the target). PRV at ε = 1 only: it takes seconds to
    minutes per evaluation at the grid's small σ."""
    reached, unreachable = calibrate_grid(eps_grid, DELTA, DEFAULT_Q, DEFAULT_STEPS, accountant)
    assert unreachable == [] and [c.eps for c in reached] == eps_grid
    for cal in reached:
        again = accountant_epsilon(cal.noise_multiplier, DEFAULT_Q, DEFAULT_STEPS, DELTA, accountant)
        assert again == pytest.approx(cal.eps_at_sigma, rel=1e-12), cal
        assert (1 - 1e-3) * cal.eps <= again <= cal.eps, cal
        if accountant == "pld":
            interval = pld.estimate((pld.poisson_gaussian(cal.noise_multiplier, DEFAULT_Q, DEFAULT_STEPS),),
                                    DELTA).interval
            finer = pld_by_hand(cal.noise_multiplier, DEFAULT_Q, DEFAULT_STEPS, interval / 5)
            assert (1 - 2e-3) * cal.eps <= finer <= cal.eps
    sigmas = [c.noise_multiplier for c in reached]
    assert sigmas == sorted(sigmas, reverse=True)


def test_pld_reaches_an_eps_that_rdp_cannot_and_every_accountant_names_what_it_cannot():
    """RDP's conversion keeps ε above ~log(1/δ)/(α_max − 1) at any σ; PLD's ε falls to 0 once the
    Gaussians' total variation is below δ, so it calibrates ε = 1e-4 at q = 1/4 over 8 steps."""
    with pytest.raises(UnreachableEpsilon, match=r"ε = 0\.0001 is unreachable: .*privacy budget is too low"):
        noise_multiplier(1e-4, DELTA, 0.25, 8, "rdp")
    cal = noise_multiplier(1e-4, DELTA, 0.25, 8, "pld")
    assert (1 - 1e-3) * 1e-4 <= cal.eps_at_sigma <= 1e-4
    with pytest.raises(UnreachableEpsilon, match="must be finite and > 0"):
        noise_multiplier(0.0, DELTA, 0.25, 8, "pld")


def test_epsilon_spent_composes_the_engines_history_in_the_chosen_accountant():
    """Opacus' engine has no PLD accountant: its history of (σ, q, steps) is composed by PLD."""
    history = [(1.3, 0.25, 5), (0.9, 0.25, 3)]
    engine = types.SimpleNamespace(accountant=types.SimpleNamespace(history=history, mechanism=lambda: "rdp"))
    accountant = PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=3e-4)
    for sigma, q, steps in history:
        accountant.compose(SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps))
    by_hand = accountant.get_epsilon(DELTA)
    assert by_hand * (1 - 1e-9) <= epsilon_spent(engine, DELTA, "pld") <= by_hand * (1 + 1e-3)
    rdp = epsilon_spent(engine, DELTA)  # the engine's own accountant
    assert rdp == pytest.approx(get_privacy_spent(orders=RDP_ORDERS, rdp=sum(
        compute_rdp(q=q, noise_multiplier=s, steps=n, orders=RDP_ORDERS) for s, q, n in history), delta=DELTA)[0],
        rel=1e-12)


def test_a_pld_training_reports_the_pld_epsilon_of_its_steps():
    """A DP-SGD head trained with accountant `pld`: Opacus runs its steps, the run's ε is PLD's."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(40, 5, generator=generator, dtype=torch.float64)
    y = torch.arange(40) % 2
    spec = DPSGDSpec(batch_size=10, epochs=2, repeats=1, accountant="pld")
    assert DPSGDSpec().accountant == "pld" and ACCOUNTANTS == ("rdp", "pld", "prv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = train_dpsgd_head(x, y, 2, HeadSpec(architecture="linear"), spec, 1.3, DELTA, seed=1)
    assert (run.sample_rate, run.steps) == sampling_plan(40, spec) == (0.25, 8)
    assert run.eps_spent == accountant_epsilon(1.3, 0.25, 8, DELTA, "pld")
    assert run.eps_spent < accountant_epsilon(1.3, 0.25, 8, DELTA, "rdp")


def test_the_claim_names_the_accountant():
    claim = dpsgd_guarantee(1.0, 1e-5, 11.94, 1 / 3, 90, 1.0, "pld").statement
    assert "pld accountant: dp_accounting's privacy loss distribution" in claim and "addition or removal" in claim


def test_the_search_refuses_an_accountant_whose_epsilon_jumps_over_the_band(monkeypatch):
    """PRV overflows below some σ: ε jumps from finite to ∞ there. Where the jump skips the band
    [(1 − 1e-3) ε, ε], no σ is calibrated (rather than one with needless noise)."""
    import privssl.accounting.dpsgd as dpsgd

    monkeypatch.setattr(dpsgd, "accountant_epsilon", lambda sigma, *args: 1 / sigma if sigma >= 1 else math.inf)
    with pytest.raises(UnreachableEpsilon, match="ε jumps from 1 at σ = 1 to inf just below it"):
        noise_multiplier(1.5, DELTA, 0.5, 10, "rdp")
    monkeypatch.setattr(dpsgd, "accountant_epsilon", lambda sigma, *args: 3 / sigma ** 2)  # smooth: found
    cal = noise_multiplier(1.5, DELTA, 0.5, 10, "rdp")
    assert (1 - 1e-3) * 1.5 <= cal.eps_at_sigma <= 1.5 and cal.noise_multiplier == pytest.approx(math.sqrt(2), 1e-3)


def test_calibrate_grid_defaults_to_pld_and_records_an_unreachable_eps_with_its_delta():
    """PLD, the default accountant, reaches ε = 1e-4 at q = 1/4 over 8 steps; RDP cannot (its
    conversion keeps ε above ~log(1/δ)/(α_max − 1)), and the grid records that ε at its δ."""
    reached, unreachable = calibrate_grid([1e-4], DELTA, 0.25, 8)
    assert unreachable == [] and [(c.eps, c.delta, c.accountant) for c in reached] == [(1e-4, DELTA, "pld")]
    assert (1 - 1e-3) * 1e-4 <= reached[0].eps_at_sigma <= 1e-4
    assert noise_multiplier(1e-4, DELTA, 0.25, 8) == reached[0]  # its default is PLD too
    reached, unreachable = calibrate_grid([1e-4], DELTA, 0.25, 8, "rdp")
    assert reached == [] and [(u.eps, u.delta) for u in unreachable] == [(1e-4, DELTA)]
    assert unreachable[0].reason.startswith("the σ search failed (ValueError: the privacy budget is too low")


@pytest.mark.parametrize("args, message", [
    ((0.0, DELTA, 0.25, 8), r"^ε = 0 is unreachable: ε must be finite and > 0$"),
    ((1.0, 0.0, 0.25, 8), r"^δ must lie in \(0, 1\), got 0\.0$"),
    ((1.0, 1.0, 0.25, 8), r"^δ must lie in \(0, 1\), got 1\.0$"),
    ((1.0, 1.5, 0.25, 8), r"^δ must lie in \(0, 1\), got 1\.5$"),
    ((1.0, DELTA, 0.0, 8), r"^need 0 < q <= 1 and steps >= 1, got q = 0\.0, steps = 8$"),
    ((1.0, DELTA, 1.5, 8), r"^need 0 < q <= 1 and steps >= 1, got q = 1\.5, steps = 8$"),
    ((1.0, DELTA, 0.25, 0), r"^need 0 < q <= 1 and steps >= 1, got q = 0\.25, steps = 0$"),
])
def test_noise_multiplier_refuses_a_bad_target_or_run_naming_the_value(args, message):
    with pytest.raises(ValueError, match=message):
        noise_multiplier(*args, "rdp")


def test_a_one_step_full_batch_is_calibrated():
    """q = 1 over one step is a valid run (the Gaussian mechanism itself)."""
    for accountant in ("rdp", "pld"):
        cal = noise_multiplier(1.0, DELTA, 1.0, 1, accountant)
        assert (cal.sample_rate, cal.steps, cal.accountant) == (1.0, 1, accountant)
        assert (1 - 1e-3) * 1.0 <= accountant_epsilon(cal.noise_multiplier, 1.0, 1, DELTA, accountant) <= 1.0
    exact = exact_gaussian_epsilon(cal.noise_multiplier, 1)  # PLD without subsampling is exact within 1e-3
    assert exact * (1 - 1e-9) <= cal.eps_at_sigma <= exact * (1 + 1e-3)


def test_a_prv_search_that_fails_is_reported_with_the_accountants_error():
    """PRV's ε stays near 0.01 at σ = 1e6 (q = 1/4, 8 steps): ε = 1e-9 is unreachable, and says why."""
    with pytest.raises(UnreachableEpsilon, match=r"^ε = 1e-09 is unreachable: the σ search failed \(ValueError: the "
                                                 r"privacy budget is too low: .* prv accountant .*\)$"):
        noise_multiplier(1e-9, DELTA, 0.25, 8, "prv")


@pytest.mark.parametrize("sigma, q, steps", [(2.0, 1 / 3, 90), (0.3, 1 / 3, 90), (0.5, 0.25, 8), (1.0, 1.0, 1)])
def test_the_prv_work_bound_counts_the_points_opacus_discretises_on(sigma, q, steps):
    """prv_grid_points, from Opacus' public functions, against the domain that Opacus' own
    PRVAccountant builds for its default errors (a private method: what the bound must count)."""
    from opacus.accountants.analysis.prv import PoissonSubsampledGaussianPRV

    reference = PRVAccountant()._get_domain([PoissonSubsampledGaussianPRV(q, sigma)], [steps], 0.01, DELTA / 1000)
    assert dpsgd.prv_grid_points(((sigma, q, steps),), DELTA) == reference.size


def test_a_prv_evaluation_above_the_work_bound_is_refused_before_it_runs(monkeypatch):
    """At q = 1/3 over 90 steps the grid has 224,872 points at σ = 1 and 93,518 at σ = 2: with the
    bound between them, σ = 2 is evaluated and σ = 1 refused without a discretisation; a grid of
    exactly the bound is evaluated."""
    monkeypatch.setattr(dpsgd, "PRV_MAX_POINTS", 224_872)
    at_bound = accountant_epsilon(1.0, DEFAULT_Q, DEFAULT_STEPS, DELTA, "prv")
    assert at_bound == pytest.approx(23.76, abs=0.02)
    monkeypatch.setattr(dpsgd, "PRV_MAX_POINTS", 150_000)
    assert accountant_epsilon(2.0, DEFAULT_Q, DEFAULT_STEPS, DELTA, "prv") == pytest.approx(8.424, abs=0.01)
    dpsgd._history_epsilon.cache_clear()  # σ = 1 was evaluated above: ask the accountant again

    def no_discretisation(*args, **kwargs):
        raise AssertionError("the PRV accountant ran above its work bound")

    monkeypatch.setattr(PRVAccountant, "_get_dprv", no_discretisation)
    with pytest.raises(dpsgd.PrvTooCostly, match=r"^the PRV accountant would discretise the privacy loss at σ = 1 "
                                                 r"\(q = 0\.3333, 90 steps\), δ = 1e-05, on 224,872 points, above "
                                                 r"its bound of 150,000 \(PRV_MAX_POINTS\)"):
        accountant_epsilon(1.0, DEFAULT_Q, DEFAULT_STEPS, DELTA, "prv")
    # a history of two phases (σ changed during a training) names both
    with pytest.raises(dpsgd.PrvTooCostly, match=r"^the PRV accountant would discretise the privacy loss at σ = 1 "
                                                 r"\(q = 0\.3333, 90 steps\); σ = 0\.5 \(q = 0\.25, 10 steps\), "
                                                 r"δ = 1e-05, on [\d,]+ points"):
        dpsgd._history_epsilon("prv", ((1.0, DEFAULT_Q, DEFAULT_STEPS), (0.5, 0.25, 10)), DELTA)


def test_a_search_that_would_exceed_the_prv_work_bound_is_unreachable_and_stops_the_larger_eps(monkeypatch):
    """ε = 8 needs σ ≈ 2 (93,518 points), ε = 20 and 50 a smaller σ: with a bound of 150,000 points
    ε = 8 is calibrated, ε = 20 is unreachable for the bound, and ε = 50 is not searched. The
    outcome depends on the arguments only: the same grid gives the same records again."""
    monkeypatch.setattr(dpsgd, "PRV_MAX_POINTS", 150_000)
    runs = [calibrate_grid([50.0, 8.0, 20.0], DELTA, DEFAULT_Q, DEFAULT_STEPS, "prv") for _ in range(2)]
    assert runs[0] == runs[1]
    reached, unreachable = runs[0]
    assert [c.eps for c in reached] == [8.0] and [u.eps for u in unreachable] == [50.0, 20.0]
    assert re.fullmatch(r"the σ search stopped: the PRV accountant would discretise the privacy loss at σ = \S+ "
                        r"\(q = 0\.3333, 90 steps\), δ = 1e-05, on [\d,]+ points, above its bound of 150,000 "
                        r"\(PRV_MAX_POINTS\); the pld accountant is tighter and has no such bound",
                        unreachable[1].reason)
    assert unreachable[0].reason == ("not searched: the search for the smaller ε = 20 already exceeded the work "
                                     f"bound ({unreachable[1].reason})")
    with pytest.raises(dpsgd.SearchTooCostly):
        noise_multiplier(20.0, DELTA, DEFAULT_Q, DEFAULT_STEPS, "prv")


def test_the_first_sigma_of_a_search_is_within_1_5x_of_the_calibrated_one():
    """initial_sigma's promise, which keeps a search at 3-6 accountant evaluations: within ×1.5 of
    the calibrated σ at the default's q and steps for ε = 0.1 … 1e5, from below at small ε (the
    central-limit σ, within 3 % there) and from above at large ε (the unsubsampled Gaussians')."""
    for eps in GRID:
        ratio = dpsgd.initial_sigma(eps, DELTA, DEFAULT_Q, DEFAULT_STEPS) / noise_multiplier(
            eps, DELTA, DEFAULT_Q, DEFAULT_STEPS).noise_multiplier
        assert (0.97 <= ratio <= 1.0) if eps <= 10 else (1.3 <= ratio <= 1.5), (eps, ratio)


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_a_search_asks_its_accountant_at_most_4_times_per_eps_of_the_default_grid(accountant, monkeypatch):
    """The search's point (the module's docstring): from the closed-form first σ, false position
    on log ε reaches the band in 2-4 accountant evaluations at the default's q and steps, where
    Opacus' bisection takes ~20. A slower step rule or a lost bracket would still reach the band,
    in more evaluations."""
    asked = []
    monkeypatch.setattr(dpsgd, "accountant_epsilon", lambda *args: asked.append(args) or
                        accountant_epsilon(*args))
    for eps in GRID:
        asked.clear()
        cal = noise_multiplier(eps, DELTA, DEFAULT_Q, DEFAULT_STEPS, accountant)
        assert 1 <= len(asked) <= 4 and (1 - 1e-3) * eps <= cal.eps_at_sigma <= eps, (eps, len(asked))


# ------------------------------------------------------------------------------ the checks around the search


@pytest.mark.parametrize("returned, refused", [
    ((1.0, 2.0 * (1 + 1e-6)), True),   # ε above the target, beyond rounding
    ((1.0, 2.0 * (1 + 1e-9)), False),  # within 1e-9 of the target (the search's rounding) is a calibration
    ((0.0, 1.0), True),                # σ = 0 is no noise
    ((1.0, math.inf), True),
])
def test_a_sigma_the_search_returns_is_checked_against_the_target(monkeypatch, returned, refused):
    """The search promises ε(σ) ≤ ε; whatever it returns, noise_multiplier releases no σ that is not
    finite and > 0 with a finite ε(σ) within 1e-9 of the target (a guard against a search bug)."""
    monkeypatch.setattr(dpsgd, "_search", lambda *args, **kwargs: returned)
    if not refused:
        calibration = noise_multiplier(2.0, 1e-5, 0.01, 100)
        assert (calibration.noise_multiplier, calibration.eps_at_sigma) == returned
        return
    with pytest.raises(UnreachableEpsilon) as err:
        noise_multiplier(2.0, 1e-5, 0.01, 100)
    assert err.value.eps == 2.0
    assert err.value.reason == (f"the search returned σ = {returned[0]:g}, at which the pld accountant reports "
                                f"ε = {returned[1]:g} (> target or not finite)")


def test_accountant_epsilon_defaults_to_pld_and_names_an_unknown_accountant():
    assert accountant_epsilon(1.0, 0.01, 100, 1e-5) == accountant_epsilon(1.0, 0.01, 100, 1e-5, "pld")
    assert accountant_epsilon(1.0, 0.01, 100, 1e-5) != accountant_epsilon(1.0, 0.01, 100, 1e-5, "rdp")
    with pytest.raises(ValueError, match=r"^unknown accountant 'moments'; allowed: rdp, pld, prv$"):
        accountant_epsilon(1.0, 0.01, 100, 1e-5, "moments")


def test_the_search_starts_at_sigma_1_where_the_closed_form_fails(monkeypatch):
    def overflow(*args):
        raise OverflowError("math range error")

    monkeypatch.setattr(dpsgd, "analytic_gaussian_sigma", overflow)
    assert dpsgd.initial_sigma(2.0, 1e-5, 0.01, 100) == 1.0


def test_the_prv_work_bound_names_every_phase_of_the_history(monkeypatch):
    monkeypatch.setattr(dpsgd, "PRV_MAX_POINTS", 10)
    with pytest.raises(dpsgd.PrvTooCostly, match=r"at σ = 1 \(q = 0\.01, 100 steps\); σ = 2 \(q = 0\.02, 50 steps\), "
                                                 r"δ = 1e-05, on [\d,]+ points, above its bound of 10"):
        dpsgd._check_prv_work(((1.0, 0.01, 100), (2.0, 0.02, 50)), 1e-5)


def test_the_prv_grid_is_sized_without_opacus_warning_that_its_rdp_orders_end(monkeypatch):
    """At σ = 5, q = 0.001 the RDP bound Opacus sizes the PRV domain with is optimal at its largest
    order, and Opacus warns so; the warning says nothing about the grid and is not passed on, while
    any other warning of the domain's sizing is."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dpsgd.prv_grid_points(((5.0, 0.001, 10),), 1e-5) > 0

    from opacus.accountants.analysis import prv

    def sizing(*args):
        warnings.warn("Optimal order is the largest alpha. Please consider expanding the range of alphas")
        warnings.warn("another note of the sizing", UserWarning)
        return 10.0

    monkeypatch.setattr(prv, "compute_safe_domain_size", sizing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dpsgd.prv_grid_points(((5.0, 0.001, 10),), 1e-5)
    assert [str(w.message) for w in caught] == ["another note of the sizing"]


def synthetic_accountant(monkeypatch, epsilon_of):
    """The search's accountant replaced by ε(σ) = epsilon_of(σ) (which may raise, or return NaN)."""
    monkeypatch.setattr(dpsgd, "accountant_epsilon", lambda sigma, *args: epsilon_of(sigma))


def inverse_square(sigma: float) -> float:
    return 1 / sigma**2


@pytest.mark.parametrize("start, failure, floor, target", [(0.1, "raises", 0.5, 3.9), (0.2, "nan", 0.5, 3.9),
                                                           (1000.0, "zero", 0.5, 3.9), (0.01, "raises", 0.05, 100.0)])
def test_the_search_steps_out_of_sigmas_where_the_accountant_fails_or_reports_0(monkeypatch, start, failure, floor,
                                                                               target):
    """ε(σ) = 1/σ² where the accountant works; below σ = `floor` it raises (PRV overflows) or returns
    NaN, both read as ε = ∞ (step up, then bisect towards the failing end); above σ = 100 it reports
    0 (log ε = −∞: step down). From a start in either region, the search still lands in the band
    (ε = 3.9: σ ≈ 0.506; ε = 100: σ ≈ 0.1, a bracket below σ = 1, where log σ < 0)."""
    def epsilon_of(sigma):
        if sigma < floor:
            if failure == "raises":
                raise ValueError("overflow in the privacy loss")
            return math.nan
        return 0.0 if sigma > 100 else inverse_square(sigma)

    synthetic_accountant(monkeypatch, epsilon_of)
    sigma, eps_at = dpsgd._search(target, 1e-5, 0.01, 100, "pld", start=start)
    assert (1 - dpsgd.EPS_RTOL) * target <= eps_at <= target
    assert eps_at == pytest.approx(inverse_square(sigma), rel=1e-12)


def test_illinois_false_position_needs_8_evaluations_on_a_curved_accountant(monkeypatch):
    """ε(σ) = e^{3/σ} − 1 is far from a power law, so plain false position keeps one end of the
    bracket for many steps (16 evaluations here); Illinois halves that end's weight when it stays
    twice, and the search lands in the band of ε = 1000 after 8 (from σ = 1)."""
    calls = []

    def epsilon_of(sigma):
        calls.append(sigma)
        return math.expm1(3 / sigma)

    synthetic_accountant(monkeypatch, epsilon_of)
    _, eps_at = dpsgd._search(1000.0, 1e-5, 0.01, 100, "pld", start=1.0)
    assert (1 - dpsgd.EPS_RTOL) * 1000 <= eps_at <= 1000
    assert len(calls) <= 8, calls


def test_an_accountant_that_jumps_over_the_band_is_reported_with_both_sides(monkeypatch):
    """ε(σ) = 10 below σ = 1 and 1 from it: no σ has ε in [0.999 · 5, 5]; the search narrows the
    jump to σ = 1 and says so, with the band."""
    synthetic_accountant(monkeypatch, lambda sigma: 10.0 if sigma < 1 else 1.0)
    band = f"[{(1 - dpsgd.EPS_RTOL) * 5:.6g}, 5]"
    with pytest.raises(ValueError, match=re.escape(f"the pld accountant's ε jumps from 1 at σ = 1 to 10 just below "
                                                   f"it, over {band}")):
        dpsgd._search(5.0, 1e-5, 0.01, 100, "pld", start=3.0)


def test_a_target_reached_below_the_smallest_sigma_is_refused_naming_it(monkeypatch):
    """ε = 1e12 needs σ = 1e-6 under ε = 1/σ²: below the smallest σ searched, whose ε (1e6) is
    already under the target, so no σ is calibrated to within the band."""
    synthetic_accountant(monkeypatch, inverse_square)
    with pytest.raises(ValueError, match=re.escape(f"ε = 1e+12 is reached at σ = {dpsgd.MIN_MULTIPLIER:g}, the "
                                                   f"smallest searched (ε there: 1e+06), so no σ is calibrated to "
                                                   f"within {dpsgd.EPS_RTOL:g} of it")):
        dpsgd._search(1e12, 1e-5, 0.01, 100, "pld", start=1.0)


def test_only_the_accountants_overflow_warnings_are_silenced(monkeypatch):
    """RuntimeWarnings (PRV's overflows at small σ, read as ε = ∞) are the search's to ignore; any
    other warning of the accountant reaches the caller."""
    def epsilon_of(sigma):
        warnings.warn("accountant note", UserWarning)
        warnings.warn("overflow encountered", RuntimeWarning)
        return inverse_square(sigma)

    synthetic_accountant(monkeypatch, epsilon_of)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dpsgd._search(3.9, 1e-5, 0.01, 100, "pld", start=0.6)
    assert {w.category for w in caught} == {UserWarning}
