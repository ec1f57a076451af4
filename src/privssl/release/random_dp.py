"""Random differential privacy from a sampled sensitivity (Rubinstein & Aldà, ICML 2017): which
order statistic of m sampled neighbour distances to use for a coverage ρ and a confidence γ.

Random DP (Hall, Rinaldo & Wasserman 2012): a mechanism is (ε, γ)-random DP with respect to a
distribution P if, with probability ≥ 1 − γ over neighbouring data sets drawn from P (and here
over the sampler), the ε-DP inequality holds for that pair. Free of torch on purpose: the config
validation (before any job) checks that m suffices for ρ and γ.
"""

from __future__ import annotations

import math


def order_statistic_index(m: int, rho: float, gamma: float) -> int:
    """k of the sampled sensitivity Δ̂ = G_(k) (Rubinstein & Aldà 2017, Theorem 4 and Table 1):

        k = ⌈m (1 − ρ + √(log(1/(γ − ρ)) / (2m)))⌉,  for ρ < γ, and k ≤ m.

    Why: by the one-sided Dvoretzky–Kiefer–Wolfowitz inequality (Massart's constant), with
    probability ≥ 1 − (γ − ρ) over the m samples the empirical CDF exceeds the true one by at
    most √(log(1/(γ−ρ))/(2m)) everywhere, so F(G_(k)) ≥ k/m − that ≥ 1 − ρ: a fresh
    neighbouring pair has distance > Δ̂ with probability ≤ ρ. Both failures together: ≤ γ.
    k ≤ m needs m ≥ log(1/(γ − ρ)) / (2ρ²) (`minimum_pairs`).
    """
    check_rho_gamma(rho, gamma)
    k = math.ceil(m * (1.0 - rho + math.sqrt(math.log(1.0 / (gamma - rho)) / (2.0 * m))) - 1e-9)
    if k > m:
        raise ValueError(f"sensitivity.m = {m} pairs are too few for rho = {rho:g}, gamma = {gamma:g}: the order "
                         f"statistic would be k = {k} > m (allowed: m >= {minimum_pairs(rho, gamma)})")
    return k


def minimum_pairs(rho: float, gamma: float) -> int:
    """The smallest m for which `order_statistic_index` exists: m ≥ log(1/(γ − ρ)) / (2ρ²)."""
    check_rho_gamma(rho, gamma)
    m = math.ceil(math.log(1.0 / (gamma - rho)) / (2.0 * rho**2))
    while math.ceil(m * (1.0 - rho + math.sqrt(math.log(1.0 / (gamma - rho)) / (2.0 * m))) - 1e-9) > m:
        m += 1  # the closed form can be one short after the ceiling
    return m


def check_rho_gamma(rho: float, gamma: float) -> None:
    if not 0 < rho < 1:
        raise ValueError(f"sensitivity.rho must lie in (0, 1), got {rho!r}")
    if not 0 < gamma < 1:
        raise ValueError(f"sensitivity.gamma must lie in (0, 1), got {gamma!r}")
    if not gamma > rho:
        raise ValueError(f"sensitivity.gamma = {gamma!r} must exceed sensitivity.rho = {rho!r} "
                         f"(gamma bounds rho plus the sampling's own failure probability)")
