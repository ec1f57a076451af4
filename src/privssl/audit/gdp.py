"""Gaussian differential privacy (Dong, Roth, Su 2022) as the audits read it: a statistic that is
Gaussian with equal variance in both worlds and shifted by μ standard deviations between them
describes a μ-GDP mechanism, and a lower confidence bound on μ gives a lower bound on ε at δ.

Parametric: the bound rests on the statistic's Gaussianity (a sum over many steps, a Gaussian
release's likelihood ratio), which each caller states."""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε at δ of μ-GDP: the root of Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) = δ; 0 where μ ≤ 0 or δ(0) ≤ δ."""
    if mu <= 0:
        return 0.0

    def excess(eps: float) -> float:
        # e^ε Φ(x) in logs: e^ε alone overflows a float beyond ε ≈ 709, which μ ≈ 30 already asks for
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps + stats.norm.logcdf(-eps / mu - mu / 2)) - delta

    if excess(0.0) <= 0:
        return 0.0
    high = 1.0
    while excess(high) > 0:
        high *= 2
    return float(optimize.brentq(excess, 0.0, high, xtol=1e-10))


def mu_standard_error(mu: float, r_in: int, r_out: int) -> float:
    """The standard error of the standardised shift μ̂ of r_in against r_out Gaussian scores:
    √(1/R_in + 1/R_out + μ² / (2 (R_in + R_out)))."""
    return math.sqrt(1 / r_in + 1 / r_out + mu ** 2 / (2 * (r_in + r_out)))


def expected_gdp_bound(mu: float, r_in: int, r_out: int, delta: float, confidence: float) -> float:
    """The bound `gdp_fit` shows, to first order, on scores whose true shift is μ: the ε of
    (μ − z · SE)-GDP. What an audit of these sizes can reach on a mechanism of shift μ."""
    return gdp_epsilon(mu - stats.norm.ppf(confidence) * mu_standard_error(mu, r_in, r_out), delta)


SPREAD = 0.95  # `low_gdp_bound`: the bound a correct mechanism's fit stays above this often


def low_gdp_bound(mu: float, r_in: int, r_out: int, delta: float, confidence: float) -> float:
    """The bound `gdp_fit` at `confidence` stays above with probability SPREAD on scores whose true
    shift is μ (μ̂ at its lower SPREAD quantile): below it, a fit says the mechanism separates the
    worlds less than μ, not that it was unlucky."""
    z = stats.norm.ppf(confidence) + stats.norm.ppf(SPREAD)
    return gdp_epsilon(mu - z * mu_standard_error(mu, r_in, r_out), delta)


def gdp_fit(scores_in: np.ndarray, scores_out: np.ndarray, delta: float, confidence: float = 0.95) -> dict:
    """μ̂ = (mean_in − mean_out) / pooled sd of the scores, μ_lo its one-sided normal bound at
    `confidence` (SE² = 1/R_in + 1/R_out + μ̂² / (2 (R_in + R_out))), and the ε of μ_lo-GDP at δ."""
    scores_in, scores_out = np.asarray(scores_in, dtype=np.float64), np.asarray(scores_out, dtype=np.float64)
    r_in, r_out = len(scores_in), len(scores_out)
    if r_in < 2 or r_out < 2:
        raise ValueError(f"the GDP fit needs at least 2 scores per world, got {r_in} and {r_out}")
    pooled = math.sqrt(((r_in - 1) * scores_in.var(ddof=1) + (r_out - 1) * scores_out.var(ddof=1))
                       / (r_in + r_out - 2))
    if pooled == 0:  # both worlds constant: they are told apart exactly or not at all
        mu = math.inf if scores_in.mean() > scores_out.mean() else 0.0
        return {"eps_lower_bound": math.inf if mu else 0.0, "mu_hat": mu, "mu_lo": mu, "n": r_in + r_out}
    mu = float((scores_in.mean() - scores_out.mean()) / pooled)
    mu_lo = mu - stats.norm.ppf(confidence) * mu_standard_error(mu, r_in, r_out)
    return {"eps_lower_bound": gdp_epsilon(mu_lo, delta), "mu_hat": mu, "mu_lo": mu_lo, "n": r_in + r_out}
