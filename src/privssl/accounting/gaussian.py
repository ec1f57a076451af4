"""The Gaussian mechanism's exact privacy profile (Balle & Wang 2018, Theorem 8) and the
smallest noise that meets a budget: the analytic Gaussian calibration of the release methods
(privssl.release.calibration) and the starting point of the DP-SGD noise search
(privssl.accounting.dpsgd). Free of torch; scipy is imported where it is needed."""

from __future__ import annotations

import math
import numbers


def check_budget(eps: float, delta: float | None = None) -> None:
    """Raise ValueError naming the value unless ε is finite and > 0 and δ (when given) is in (0, 1)."""
    if isinstance(eps, bool) or not (isinstance(eps, numbers.Real) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    if delta is not None and not (0 < delta < 1):
        raise ValueError(f"delta must lie in the open interval (0, 1), got {delta!r}")


def analytic_gaussian_delta(sigma: float, sensitivity: float, eps: float) -> float:
    """The exact δ of the Gaussian mechanism with noise σ (Balle & Wang 2018, Theorem 8):

    δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ).

    The second term is computed as exp(ε + log Φ(·)) so that large ε does not overflow.
    """
    from scipy import special

    a = sensitivity / (2.0 * sigma)
    b = eps * sigma / sensitivity
    return float(special.ndtr(a - b) - math.exp(eps + special.log_ndtr(-a - b)))


ROOT_TOLERANCE = 1e-12  # brentq's xtol and rtol on log σ


def analytic_gaussian_sigma(sensitivity: float, eps: float, delta: float) -> float:
    """Smallest σ with δ(σ) ≤ δ, found by root bracketing (δ(σ) decreases in σ), rounded up.

    brentq returns a log σ within xtol + rtol·|log σ*| of the root on *either* side; below it,
    δ(σ) exceeds δ (by ~1e-9 relative, checked against a 60-digit evaluation of Theorem 8 in
    tests/test_analytic_gaussian.py). Stepping up by that tolerance puts σ at or above the root,
    so the released noise never falls short of the claim, at a cost of ≤ 4e-12 relative in σ."""
    from scipy import optimize

    check_budget(eps, delta)
    if sensitivity == 0:
        return 0.0

    def excess(log_sigma: float) -> float:
        return analytic_gaussian_delta(math.exp(log_sigma), sensitivity, eps) - delta

    lo = hi = math.log(sensitivity)
    while excess(lo) < 0:  # σ too large: walk down until the δ constraint binds
        lo -= 1.0
    while excess(hi) > 0:
        hi += 1.0
    root = optimize.brentq(excess, lo, hi, xtol=ROOT_TOLERANCE, rtol=ROOT_TOLERANCE)
    return math.exp(root + ROOT_TOLERANCE * (1 + abs(root)))
