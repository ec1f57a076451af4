"""The analytic Gaussian calibration (privssl.release.calibration.analytic_gaussian_sigma) over the
whole ε grid, 0.01 … 1e5, against Balle & Wang (2018, "Improving the Gaussian Mechanism for
Differential Privacy", ICML), Theorem 8: the Gaussian mechanism N(f(D), σ²I) with L2 sensitivity Δ
is (ε, δ)-DP iff

    δ ≥ δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ),

evaluated here with mpmath at 60 digits: at ε = 1e5 the factor e^ε is far beyond a double (the
code rewrites it as exp(ε + log Φ)), which is why a high-precision reference is needed. δ(σ)
decreases in σ, so the exact calibration σ* (smallest σ with δ(σ) ≤ δ) is the root of δ(σ) = δ,
found here by bisection in log σ from a bracket that does not depend on the code.

What the code promises: σ = exp(brentq(...)) on log σ with xtol = rtol = 1e-12, i.e. (scipy's
documented guarantee) |log σ − log σ_root| ≤ 1e-12 + 1e-12·|log σ_root|, where σ_root is the root
of the double-precision δ(σ) (itself within ~1e-11 relative of Theorem 8, see below).
"""

import math

import mpmath
import pytest

from privssl.release.calibration import analytic_gaussian_delta, analytic_gaussian_sigma

EPS_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5)
DELTAS = (1e-5, 1e-8)
SENSITIVITIES = (1.0, 0.37, 250.0)
CASES = [(s, e, d) for s in SENSITIVITIES for d in DELTAS for e in EPS_GRID]


def theorem8_delta(sigma, sensitivity, eps) -> mpmath.mpf:
    """Balle & Wang (2018), Theorem 8, at 60 significant digits."""
    with mpmath.workdps(60):
        sigma, sensitivity, eps = mpmath.mpf(sigma), mpmath.mpf(sensitivity), mpmath.mpf(eps)
        a, b = sensitivity / (2 * sigma), eps * sigma / sensitivity
        return mpmath.ncdf(a - b) - mpmath.exp(eps) * mpmath.ncdf(-a - b)


def exact_log_sigma(sensitivity, eps, delta) -> mpmath.mpf:
    """log σ* with δ(σ*) = δ (Theorem 8, 60 digits), by 90 bisections of [log Δ − 30, log Δ + 30]
    (δ(σ) → 1 − ... > δ as σ → 0 and → 0 as σ → ∞ for these ε, δ): width 60 / 2^90 ≈ 5e-26."""
    with mpmath.workdps(60):
        lo, hi = mpmath.log(sensitivity) - 30, mpmath.log(sensitivity) + 30
        assert theorem8_delta(mpmath.exp(lo), sensitivity, eps) > delta > theorem8_delta(mpmath.exp(hi), sensitivity, eps)
        for _ in range(90):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if theorem8_delta(mpmath.exp(mid), sensitivity, eps) > delta else (lo, mid)
        return hi


@pytest.fixture(scope="module")
def calibrations():
    """(Δ, ε, δ) → (the code's σ, log σ* of Theorem 8)."""
    return {case: (analytic_gaussian_sigma(*case), exact_log_sigma(*case)) for case in CASES}


def test_calibrated_sigma_is_the_exact_root_rounded_up_by_the_root_tolerance(calibrations):
    """0 ≤ log σ − log σ* ≤ 3e-12 (1 + |log σ*|): brentq lands within its tolerance (1e-12 +
    1e-12 |log σ|) on either side of the root, and the calibration then steps up by that much, so
    σ is never below the root and at most twice the tolerance above it (plus the rounding of the
    double-precision δ whose root brentq finds; observed worst over the grid: 2.4e-13)."""
    below = {case: float(mpmath.log(sigma) - exact) for case, (sigma, exact) in calibrations.items()
             if mpmath.log(sigma) < exact}
    assert not below
    far = {case: float((mpmath.log(sigma) - exact) / (1 + abs(exact)))
           for case, (sigma, exact) in calibrations.items()
           if mpmath.log(sigma) - exact > 3e-12 * (1 + abs(exact))}
    assert not far


def test_calibrated_sigma_never_under_noises_and_is_tight(calibrations):
    """(1 − 1e-3) δ ≤ δ(σ) ≤ δ at every grid point, Theorem 8 in 60 digits: the one-sided contract
    (the released σ supports the claimed δ) and no more than 0.1 % of δ given away."""
    for (sensitivity, eps, delta), (sigma, _) in calibrations.items():
        reached = theorem8_delta(sigma, sensitivity, eps)
        assert (1 - 1e-3) * delta <= reached <= delta, (sensitivity, eps, delta, float(reached / delta))


@pytest.mark.parametrize("sensitivity, eps, delta", CASES)
def test_delta_formula_matches_theorem_8_in_high_precision(sensitivity, eps, delta):
    """analytic_gaussian_delta (doubles, exp(ε + log Φ)) against the 60-digit formula at σ*, 0.9σ*
    and 0.5σ*, to 1e-10 relative: rounding ε + log Φ(·) costs ε · 2^-53 ≈ 1e-11 at ε = 1e5."""
    sigma_star = mpmath.exp(exact_log_sigma(sensitivity, eps, delta))
    for factor in (1.0, 0.9, 0.5):
        sigma = float(sigma_star * factor)
        assert analytic_gaussian_delta(sigma, sensitivity, eps) == pytest.approx(
            float(theorem8_delta(sigma, sensitivity, eps)), rel=1e-10)


def test_large_epsilon_is_beyond_doubles_but_not_beyond_the_formula():
    """At ε = 1e5, e^ε overflows a double; the code's δ stays finite and equals Theorem 8's."""
    with pytest.raises(OverflowError):
        math.exp(1e5)
    sigma = analytic_gaussian_sigma(1.0, 1e5, 1e-5)
    assert math.isfinite(analytic_gaussian_delta(sigma, 1.0, 1e5))
    assert float(theorem8_delta(sigma, 1.0, 1e5)) == pytest.approx(1e-5, rel=1e-8)


def test_a_release_of_zero_sensitivity_needs_no_noise():
    """Δ = 0 (a head that no record can move): σ = 0 at every budget, where any positive σ would
    be noise the guarantee does not ask for."""
    assert [analytic_gaussian_sigma(0.0, eps, delta) for eps in (0.1, 10.0) for delta in DELTAS] == [0.0] * 4
