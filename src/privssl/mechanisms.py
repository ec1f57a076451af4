"""Additive noise mechanisms on a flattened weight vector (paper §4, Remark 4.2).

Each mechanism is calibrated to a privacy budget ε from a sensitivity Δ:

| mechanism          | noise per coordinate | scale for budget ε                        | guarantee                     |
|--------------------|----------------------|-------------------------------------------|-------------------------------|
| alm                | Logistic(0, s)       | s = Δ1 / ε          (Theorem 4.1)         | ε-DP                          |
| laplace            | Laplace(0, b)        | b = Δ1 / ε          (Dwork et al. 2006)   | ε-DP                          |
| gaussian           | N(0, σ²)             | σ = Δ2 √(2 ln(1.25/δ)) / ε                | (ε, δ)-DP, proven for ε < 1   |
| gaussian_analytic  | N(0, σ²)             | smallest σ with δ(σ) ≤ δ (Balle & Wang)   | (ε, δ)-DP for every ε > 0     |

The guarantee holds for the Δ it is given; when Δ comes from the sensitivity sampler the
guarantee is *random* DP (see `privssl.sensitivity.random_dp_statement`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch
from scipy import optimize, special

MECHANISMS = ("alm", "laplace", "gaussian", "gaussian_analytic")


@dataclass(frozen=True)
class Calibration:
    """Noise scale of one mechanism at one ε, and the exact claim it supports."""

    mechanism: str
    eps: float
    delta: float  # 0 for the pure-ε mechanisms
    sensitivity_norm: str  # "l1" or "l2": which sensitivity the scale uses
    sensitivity: float
    noise_scale: float  # s, b or σ
    guarantee: str  # the DP statement, exactly


def _check_budget(eps: float, delta: float | None = None) -> None:
    if isinstance(eps, bool) or not (isinstance(eps, numbers.Real) and math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    if delta is not None and not (0 < delta < 1):
        raise ValueError(f"delta must lie in the open interval (0, 1), got {delta!r}")


def classical_gaussian_sigma(l2_sensitivity: float, eps: float, delta: float) -> float:
    """σ = Δ2 √(2 ln(1.25/δ)) / ε (Dwork & Roth 2014, Thm A.1; proven only for ε < 1)."""
    _check_budget(eps, delta)
    return l2_sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / eps


def analytic_gaussian_delta(sigma: float, l2_sensitivity: float, eps: float) -> float:
    """The exact δ of the Gaussian mechanism with noise σ (Balle & Wang 2018, Theorem 8):

    δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ).

    The second term is computed as exp(ε + log Φ(·)) so that large ε does not overflow.
    """
    a = l2_sensitivity / (2.0 * sigma)
    b = eps * sigma / l2_sensitivity
    return float(special.ndtr(a - b) - math.exp(eps + special.log_ndtr(-a - b)))


def analytic_gaussian_sigma(l2_sensitivity: float, eps: float, delta: float) -> float:
    """Smallest σ with δ(σ) ≤ δ, found by root bracketing (δ(σ) decreases in σ)."""
    _check_budget(eps, delta)
    if l2_sensitivity == 0:
        return 0.0

    def excess(log_sigma: float) -> float:
        return analytic_gaussian_delta(math.exp(log_sigma), l2_sensitivity, eps) - delta

    lo = hi = math.log(l2_sensitivity)
    while excess(lo) < 0:  # σ too large: walk down until the δ constraint binds
        lo -= 1.0
    while excess(hi) > 0:
        hi += 1.0
    log_sigma = optimize.brentq(excess, lo, hi, xtol=1e-12, rtol=1e-12)
    return math.exp(log_sigma)


def calibrate(mechanism: str, eps: float, l1_sensitivity: float, l2_sensitivity: float,
              delta: float) -> Calibration:
    """Noise scale of `mechanism` at budget `eps` (δ is used by the Gaussian mechanisms only)."""
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown mechanism {mechanism!r}; allowed: {', '.join(MECHANISMS)}")
    _check_budget(eps, delta if mechanism.startswith("gaussian") else None)
    if mechanism == "alm":
        return Calibration(mechanism, eps, 0.0, "l1", l1_sensitivity, l1_sensitivity / eps,
                           f"{eps:g}-DP (additive logistic, s = Δ1/ε)")
    if mechanism == "laplace":
        return Calibration(mechanism, eps, 0.0, "l1", l1_sensitivity, l1_sensitivity / eps,
                           f"{eps:g}-DP (Laplace, b = Δ1/ε)")
    if mechanism == "gaussian":
        sigma = classical_gaussian_sigma(l2_sensitivity, eps, delta)
        claim = (f"({eps:g}, {delta:g})-DP (classical Gaussian)" if eps < 1 else
                 f"not proven: the classical Gaussian calibration is a proof only for ε < 1 (ε = {eps:g})")
        return Calibration(mechanism, eps, delta, "l2", l2_sensitivity, sigma, claim)
    sigma = analytic_gaussian_sigma(l2_sensitivity, eps, delta)
    return Calibration(mechanism, eps, delta, "l2", l2_sensitivity, sigma,
                       f"({eps:g}, {delta:g})-DP (analytic Gaussian, Balle & Wang 2018)")


def standard_noise(mechanism: str, shape: tuple[int, ...], generator: torch.Generator,
                   dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Unit-scale noise of the mechanism's family; multiply by `Calibration.noise_scale`.

    Logistic noise by the inverse CDF log(u / (1 − u)) with u strictly inside (0, 1);
    Laplace noise as the difference of two unit exponentials −log(u) with u in (0, 1].
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown mechanism {mechanism!r}; allowed: {', '.join(MECHANISMS)}")
    if mechanism == "alm":
        u = torch.rand(shape, generator=generator, dtype=dtype)
        u = u.clamp(min=torch.finfo(dtype).tiny)  # rand is in [0, 1): only 0 must go
        return torch.log(u) - torch.log1p(-u)
    if mechanism == "laplace":
        u = 1.0 - torch.rand((2, *shape), generator=generator, dtype=dtype)  # in (0, 1]
        return torch.log(u[1]) - torch.log(u[0])
    return torch.randn(shape, generator=generator, dtype=dtype)


def logistic_log_density(x: np.ndarray, scale: float) -> np.ndarray:
    """log of the Logistic(0, s) pdf exp(−x/s) / (s (1 + exp(−x/s))²), stable for large |x|."""
    z = np.abs(np.asarray(x, dtype=float)) / scale  # the pdf is even
    return -z - 2.0 * np.log1p(np.exp(-z)) - math.log(scale)
