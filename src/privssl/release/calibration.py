"""Noise calibration: the scale each additive mechanism needs for a budget ε, from a sensitivity.

Free of torch on purpose (scipy is imported where it is needed): the release-method registry,
which the Snakefile reads, refers to these functions.

| calibration             | scale for budget ε                           | source                        |
|-------------------------|----------------------------------------------|-------------------------------|
| `l1_scale`              | s = Δ1 / ε  (logistic s, Laplace b)          | paper Theorem 4.1; Dwork 2006 |
| `l2_norm_scale`         | θ = Δ2 / ε  (norm ~ Gamma(p, θ))             | Chaudhuri et al. 2011, Alg. 1 |
| `classical_gaussian_sigma` | σ = Δ2 √(2 ln(1.25/δ)) / ε (proof: ε < 1) | Dwork & Roth 2014, Thm A.1    |
| `analytic_gaussian_sigma`  | smallest σ with δ(σ) ≤ δ                  | Balle & Wang 2018, Thm 8      |
"""

from __future__ import annotations

import math

# The exact privacy profile of the Gaussian mechanism is accounting (the DP-SGD search starts
# from it); the release methods use it from here.
from privssl.accounting.gaussian import (  # noqa: F401 (re-exported)
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    check_budget,
)


def l1_scale(sensitivity: float, eps: float, delta: float | None = None) -> float:
    """s = Δ1/ε: the logistic (ALM) and Laplace scales for ε-DP; δ is not used."""
    check_budget(eps)
    return sensitivity / eps


def l2_norm_scale(sensitivity: float, eps: float, delta: float | None = None) -> float:
    """θ = Δ2/ε: noise with density ∝ exp(−ε‖b‖/Δ2) has ‖b‖ ~ Gamma(p, θ); δ is not used."""
    check_budget(eps)
    return sensitivity / eps


def classical_gaussian_sigma(sensitivity: float, eps: float, delta: float) -> float:
    """σ = Δ2 √(2 ln(1.25/δ)) / ε (Dwork & Roth 2014, Thm A.1; a proof only for ε < 1)."""
    check_budget(eps, delta)
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / eps
