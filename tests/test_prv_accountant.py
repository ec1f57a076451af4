"""The DP-SGD head's PRV accountant (privssl.accounting.dpsgd, accountant="prv": Opacus' PRV
accountant, Gopi, Lee & Wutschitz 2021, "Numerical Composition of Differential Privacy") against
independent references, asserting only what is guaranteed.

Error guarantee used throughout. Opacus returns ε_up = ε̃(δ − δ_err) + ε_err with ε_err = 0.01 and
δ_err = δ/1000 (its defaults; ε̃ the discretised curve). Gopi et al. (§5, the error analysis of
the discretised, truncated composition, with the mesh and domain Opacus derives from ε_err and
δ_err) give, for the true curve δ(·) and the computed one δ̃(·),
δ̃(ε + ε_err) − δ_err ≤ δ(ε) ≤ δ̃(ε − ε_err) + δ_err. Hence

    ε_true(δ) ≤ ε_up ≤ ε_true(δ − 2δ_err) + 2ε_err = ε_true((1 − 2e-3) δ) + 0.02,

so every check below is: reference lower bound on ε_true(δ) ≤ ε_up ≤ reference upper bound on
ε_true((1 − 2e-3) δ) + 0.02.

References:
- q = 1 (every record in every step): T Gaussian mechanisms at noise multiplier σ compose to
  exactly a μ-GDP mechanism with μ = √T/σ (Dong, Roth & Su 2022, Cor. 3.3), whose exact privacy
  curve is δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (ibid. Cor. 2.13; Balle & Wang 2018, Thm. 8).
  ε(δ) is solved with mpmath (40 digits).
- q < 1, one step: the Poisson-subsampled Gaussian's dominating pair P = (1 − q)N(0, σ²) + qN(1, σ²)
  vs Q = N(0, σ²) (and the reverse); its privacy loss is monotone, so δ(ε) is a closed form in
  normal tails (mpmath), the max over both directions.
- q < 1, T steps: Google's dp_accounting PLD (a different library and algorithm; Koskela et al.
  / Doroshenko et al. 2022), both directions: its optimistic estimate is a lower bound on ε_true,
  its pessimistic one an upper bound. Also: a valid RDP bound (Opacus' RDP accountant here) and the
  q = 1 (GDP) value bound ε_true from above: each subsampled step's pair is a post-processing of
  the full-batch pair (with probability 1 − q replace the output by fresh N(0, σ²) noise, which
  maps N(1, σ²) to the mixture and N(0, σ²) to itself), and composition preserves that order
  (Dong, Roth & Su 2022, §3: the tensor product of trade-off functions is monotone).
"""

import math
import warnings

import mpmath
import pytest
from dp_accounting.pld import privacy_loss_distribution

from privssl.accounting.dpsgd import accountant_epsilon, noise_multiplier

EPS_ERR = 0.01  # Opacus' PRVAccountant.get_epsilon default, which accountant_epsilon uses
DELTA_SHIFT = 1 - 2e-3  # δ − 2 δ_err with δ_err = δ/1000


def prv_epsilon(sigma, q, steps, delta):
    with warnings.catch_warnings():  # q = 1: Opacus' PRV takes log(1 − q) = log 0 (handled by np.where)
        warnings.simplefilter("ignore", RuntimeWarning)
        return accountant_epsilon(sigma, q, steps, delta, accountant="prv")


def gdp_delta(eps, mu) -> mpmath.mpf:
    with mpmath.workdps(40):
        eps, mu = mpmath.mpf(eps), mpmath.mpf(mu)
        return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


def solve_epsilon(delta_of_eps, delta) -> float:
    """ε ≥ 0 with δ(ε) = δ for a decreasing δ(·) (0 if δ(0) ≤ δ), by 80 bisections after doubling."""
    with mpmath.workdps(40):
        if delta_of_eps(mpmath.mpf(0)) <= delta:
            return 0.0
        lo, hi = mpmath.mpf(0), mpmath.mpf(1)
        while delta_of_eps(hi) > delta:
            lo, hi = hi, 2 * hi
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if delta_of_eps(mid) > delta else (lo, mid)
        return float(hi)


def gdp_epsilon(sigma, steps, delta) -> float:
    """Exact ε(δ) of `steps` full-batch Gaussian steps at noise multiplier σ (μ = √steps / σ)."""
    return solve_epsilon(lambda e: gdp_delta(e, math.sqrt(steps) / sigma), delta)


def poisson_step_delta(eps, q, sigma) -> mpmath.mpf:
    """Exact δ(ε) of one Poisson-subsampled Gaussian step, max over the two directions."""
    with mpmath.workdps(40):
        q, sigma, eps = mpmath.mpf(q), mpmath.mpf(sigma), mpmath.mpf(eps)

        def mix_cdf(x):
            return (1 - q) * mpmath.ncdf(x / sigma) + q * mpmath.ncdf((x - 1) / sigma)

        # log(P/Q)(x) = log(1 − q + q e^{(2x − 1)/(2σ²)}) increases in x; = ε at x1, = −ε at x2
        x1 = sigma ** 2 * mpmath.log((mpmath.exp(eps) - 1 + q) / q) + mpmath.mpf(1) / 2
        forward = (1 - mix_cdf(x1)) - mpmath.exp(eps) * (1 - mpmath.ncdf(x1 / sigma))
        backward = mpmath.mpf(0)
        if mpmath.exp(-eps) > 1 - q:
            x2 = sigma ** 2 * mpmath.log((mpmath.exp(-eps) - 1 + q) / q) + mpmath.mpf(1) / 2
            backward = mpmath.ncdf(x2 / sigma) - mpmath.exp(eps) * mix_cdf(x2)
        return max(forward, backward)


def pld_epsilon(sigma, q, steps, delta, pessimistic) -> float:
    """dp_accounting's PLD ε (add/remove, both directions), privacy buckets at 1e-4."""
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        sigma, sampling_prob=q, pessimistic_estimate=pessimistic, use_connect_dots=pessimistic,
        value_discretization_interval=1e-4)
    return pld.self_compose(steps).get_epsilon_for_delta(delta)


@pytest.mark.parametrize("sigma, steps, delta", [(0.8, 1, 1e-5), (1.0, 10, 1e-5), (2.0, 100, 1e-5),
                                                 (10.0, 50, 1e-5), (5.0, 1000, 1e-6)])
def test_full_batch_prv_epsilon_matches_the_exact_gaussian_dp_curve(sigma, steps, delta):
    """q = 1: ε_GDP(δ) ≤ PRV ε ≤ ε_GDP((1 − 2e-3) δ) + 2 ε_err (μ = √T/σ, exact curve)."""
    ours = prv_epsilon(sigma, 1.0, steps, delta)
    assert gdp_epsilon(sigma, steps, delta) <= ours <= gdp_epsilon(sigma, steps, DELTA_SHIFT * delta) + 2 * EPS_ERR


@pytest.mark.parametrize("q, sigma, delta", [(0.2, 0.8, 1e-5), (0.01, 0.5, 1e-5), (0.5, 2.0, 1e-6)])
def test_one_subsampled_step_matches_the_exact_poisson_subsampled_gaussian_curve(q, sigma, delta):
    """q < 1, T = 1: the exact one-step curve (closed form, both directions) brackets PRV's ε."""
    ours = prv_epsilon(sigma, q, 1, delta)
    exact = solve_epsilon(lambda e: poisson_step_delta(e, q, sigma), delta)
    shifted = solve_epsilon(lambda e: poisson_step_delta(e, q, sigma), DELTA_SHIFT * delta)
    assert exact <= ours <= shifted + 2 * EPS_ERR


@pytest.mark.parametrize("q, sigma, steps, delta", [(0.01, 1.0, 1000, 1e-5), (1 / 3, 1.8737, 90, 1e-5),
                                                    (0.05, 0.8, 300, 1e-6)])
def test_subsampled_prv_epsilon_lies_between_pld_bounds_and_below_rdp_and_full_batch(q, sigma, steps, delta):
    """dp_accounting's optimistic PLD ε ≤ ε_true ≤ PRV ε, and PRV ε ≤ X((1 − 2e-3) δ) + 2 ε_err
    for each valid upper bound X: dp_accounting's pessimistic PLD, Opacus' RDP, the q = 1 GDP."""
    ours = prv_epsilon(sigma, q, steps, delta)
    shifted = DELTA_SHIFT * delta
    assert pld_epsilon(sigma, q, steps, delta, pessimistic=False) <= ours
    assert ours <= pld_epsilon(sigma, q, steps, shifted, pessimistic=True) + 2 * EPS_ERR
    assert ours <= accountant_epsilon(sigma, q, steps, shifted, accountant="rdp") + 2 * EPS_ERR
    assert ours <= gdp_epsilon(sigma, steps, shifted) + 2 * EPS_ERR


def test_noise_multiplier_full_batch_reaches_the_target_by_the_exact_curve():
    """The inverse at q = 1: the σ returned has PRV ε in [(1 − 1e-3) ε, ε] (the code's promise) and,
    by the exact GDP curve, true ε(δ) ≤ target (never under-noised) and ε((1 − 2e-3) δ) ≥
    (1 − 1e-3) target − 2 ε_err (not over-noised beyond the PRV's error)."""
    target, delta, steps = 2.0, 1e-5, 50
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        calibration = noise_multiplier(target, delta, 1.0, steps, accountant="prv")
    sigma = calibration.noise_multiplier
    assert (1 - 1e-3) * target <= calibration.eps_at_sigma <= target
    assert calibration.eps_at_sigma == prv_epsilon(sigma, 1.0, steps, delta)
    assert gdp_epsilon(sigma, steps, delta) <= target
    assert gdp_epsilon(sigma, steps, DELTA_SHIFT * delta) >= (1 - 1e-3) * target - 2 * EPS_ERR


def test_noise_multiplier_subsampled_reaches_the_target_by_dp_accounting_pld():
    """The inverse at q = 0.01, 500 steps: PRV ε(σ) in [(1 − 1e-3) ε, ε]; dp_accounting's
    optimistic PLD (a lower bound on the true ε) is ≤ target; its pessimistic PLD at (1 − 2e-3) δ
    is ≥ (1 − 1e-3) target − 2 ε_err (σ not larger than the PRV's error allows)."""
    target, delta, q, steps = 1.0, 1e-5, 0.01, 500
    calibration = noise_multiplier(target, delta, q, steps, accountant="prv")
    sigma = calibration.noise_multiplier
    assert (1 - 1e-3) * target <= calibration.eps_at_sigma <= target
    assert pld_epsilon(sigma, q, steps, delta, pessimistic=False) <= target
    assert pld_epsilon(sigma, q, steps, DELTA_SHIFT * delta, pessimistic=True) >= (1 - 1e-3) * target - 2 * EPS_ERR
