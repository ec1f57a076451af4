"""Accounting of DPCL-style private contrastive training (SimCLR / Barlow Twins, paper §3–4):
the (ε, δ) of a training whose every step samples a fixed-size batch of |B| of the n private
records without replacement (a fresh uniform subset per step) and releases Gaussian mechanisms
on it — the clipped gradient sum and, in DPCL, the noisy similarity matrix (SimCLR) or the two
views' noisy means and SSEs (Barlow Twins) — and the common noise scale that reaches a target ε.

- Adjacency: replace-one, a substitution of one record of the private set (n is public), as in
  the paper (§3.2) and as sampling without replacement requires.
- Per step, the RDP of the Gaussian subsampled without replacement (Wang, Balle & Kasiviswanathan
  2019, the paper's Thm. 4, in its Gaussian form: Thm. 27 of arXiv:1808.00087, as Google's
  dp_accounting computes it, in `wor_rdp`), composed over steps and phases and converted to
  (ε, δ) by dp_accounting's `compute_epsilon` (the paper's conversion, its Thm. 5, or the KL
  bound where smaller), minimised over `RDP_ORDERS` (1.1 … 1024): what dp_accounting's
  `RdpAccountant` reports for the training as its events (tests/test_dpcl_accounting.py).
- A noise multiplier is std / replace-one L2 sensitivity of its query, so a caller passes the
  replace-one sensitivity: 4|B|C for naive DP-SGD of SimCLR with per-view clipping at C (every
  view's gradient may change), 4C under DPCL's heuristic (only the substituted record's two
  views change once the similarity matrix is noisy).
- The mechanisms of one step see the same batch, so they are amplified together, as one
  Gaussian at `effective_noise_multiplier`. The paper instead sums the separately amplified
  RDPs of its mechanisms (§4.2.2, §4.3.2), which composition justifies only for independently
  drawn batches: at its DPCL σ's the RDP bound for sampling without replacement gives 1e5–7e5,
  not 1000 (see `paper_settings_rows`).
- That RDP bound is loose at such small σ: it is an upper bound for the sampling used, not the
  mechanism's privacy loss. Beside it `poisson_epsilon` gives the PLD accountant's ε of the
  *Poisson analogue* (each record in each step's batch with probability |B|/n, same steps,
  substitution of one record): what the mechanisms would cost with Poisson sampling — about 27 at
  the paper's DPCL SimCLR σ. dp_accounting's PLD has no event for sampling without replacement,
  so the releases stay calibrated by the RDP bound, and neither figure is a lower bound.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import dp_accounting
import numpy as np
from dp_accounting.rdp import compute_epsilon

from privssl.accounting import pld, wor_rdp
from privssl.accounting.rdp import MAX_MULTIPLIER, RDP_ORDERS, Phase, UnreachableEpsilon  # noqa: F401 (Phase: re-exported)

EPS_RTOL = 1e-3  # calibrate: the accountant's ε at the returned scale lies in [(1 - EPS_RTOL) ε, ε]


def epsilon(phases: Sequence[Phase], delta: float) -> float:
    """ε at δ of the phases, replace-one adjacency: dp_accounting's RDP accountant's ε for them."""
    if not 0 < delta < 1:
        raise ValueError(f"δ must lie in (0, 1), got {delta}")
    return _epsilon(tuple(phases), delta)


# Cached: one evaluation takes ≈ 0.06 s (the without-replacement bound's forward differences, once
# per σ: privssl.accounting.wor_rdp), and paper_settings_rows asks for the paper's multipliers,
# where `calibrate` starts its search.
@functools.lru_cache(maxsize=1024)
def _epsilon(phases: tuple[Phase, ...], delta: float) -> float:
    # what dp_accounting's RdpAccountant reports for the phases as its events (per phase, `steps`
    # batches sampled without replacement, each releasing the phase's Gaussians), with the per-step
    # RDP from wor_rdp (the same bound, 3x faster): a step's mechanisms as one Gaussian at their
    # effective σ, as the accountant treats them
    total = np.zeros(len(RDP_ORDERS))
    for p in phases:
        if p.steps:  # a phase without steps costs nothing: its bound is not computed
            total += p.steps * wor_rdp.rdp(p.batch_size / p.n, effective_noise_multiplier(p.noise_multipliers),
                                           RDP_ORDERS)
    return float(compute_epsilon(RDP_ORDERS, total, delta)[0])


def poisson_events(phases: Sequence[Phase], separate: bool = False) -> tuple[dp_accounting.DpEvent, ...]:
    """The Poisson analogue of the phases as dp_accounting events: per step each of the n records
    joins the batch independently with probability q = |B|/n, for the same number of steps.

    dp_accounting's REPLACE_ONE pair for a Poisson-sampled Gaussian of noise multiplier s is
    (1 − q) N(0, s²) + q N(−1, s²) against (1 − q) N(0, s²) + q N(1, s²): a sampled record adds a
    vector of norm ≤ 1, so replacing it moves the sum by ≤ 2. Our σ is the std over the replace-one
    sensitivity Δ, so the record's own contribution is bounded by Δ/2 (as for a clipped sum, where
    Δ = 2C) and s = 2σ. The mechanisms of a step share its batch, so they are one Gaussian at
    `effective_noise_multiplier`; `separate` instead samples each mechanism on its own batch (the
    DPCL paper's accounting, §4.2.2, §4.3.2), mechanisms of equal σ grouped."""
    events = []
    for p in phases:
        if not p.steps:
            continue
        sigmas = p.noise_multipliers if separate else (effective_noise_multiplier(p.noise_multipliers),)
        for sigma, count in sorted(Counter(sigmas).items()):
            events.append(dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
                p.batch_size / p.n, dp_accounting.GaussianDpEvent(2 * sigma)), p.steps * count))
    return tuple(events)


def poisson_epsilon(phases: Sequence[Phase], delta: float, separate: bool = False) -> float:
    """ε at δ of the phases' Poisson analogue (`poisson_events`) by dp_accounting's PLD accountant,
    substitution of one record, within 1e-3 (relative) of the accountant's limit (privssl.accounting.pld)."""
    return pld.epsilon(poisson_events(phases, separate), delta, pld.REPLACE_ONE)


def effective_noise_multiplier(multipliers: Sequence[float]) -> float:
    """(Σ σ_k^-2)^(-1/2): Gaussians released on the same data have RDP Σ α/(2σ_k²) = α/(2σ²) at
    this σ — together they are one Gaussian mechanism, which dp_accounting then subsamples."""
    return math.fsum(s ** -2 for s in multipliers) ** -0.5


@dataclass(frozen=True)
class Calibration:
    """The smallest common scale of the noise-multiplier ratios that reaches (eps, delta)."""

    eps: float  # the target
    delta: float
    scale: float
    noise_multipliers: list[tuple[float, ...]]  # per phase: scale × its ratios
    eps_at: float  # the accountant's ε at these multipliers (≤ eps)


def _scaled(phases: Sequence[Phase], scale: float) -> list[Phase]:
    return [Phase(p.n, p.batch_size, p.steps, tuple(scale * r for r in p.noise_multipliers)) for p in phases]




def reachable(eps: float, delta: float, phases: Sequence[Phase], max_multiplier: float = MAX_MULTIPLIER) -> bool:
    """Whether `calibrate` can reach eps: one accountant evaluation at the largest scale."""
    return math.isfinite(eps) and eps > 0 and epsilon(_scaled(phases, max_multiplier), delta) <= eps


def calibrate(eps: float, delta: float, phases: Sequence[Phase], max_multiplier: float = MAX_MULTIPLIER) -> Calibration:
    """Smallest s ≤ max_multiplier with ε(phases at multipliers s · ratio) ≤ eps, where the phases'
    noise_multipliers are the ratios (so mechanisms keep their relative noise), found to within
    (1 - EPS_RTOL) eps ≤ ε(s) ≤ eps — or to 1e-12 in log s where ε(s) jumps over that band (to 0,
    where dp_accounting's conversion switches to its KL bound; eps_at then says so).

    ε(s) decreases in s: the scale is bracketed by doubling or halving from 1, then narrowed in
    log s. Raises UnreachableEpsilon where eps is not finite and > 0 or ε(max_multiplier) > eps."""
    if not (eps > 0 and math.isfinite(eps)):
        raise UnreachableEpsilon(eps, "ε must be finite and > 0")
    if not any(p.steps for p in phases):
        raise ValueError("no phase takes a step: there is nothing to calibrate")

    def eps_at(log_scale: float) -> float:
        return epsilon(_scaled(phases, math.exp(log_scale)), delta)

    log_max, log2 = math.log(max_multiplier), math.log(2)
    lo, hi = -math.inf, min(0.0, log_max)  # ε(lo) > eps ≥ ε(hi)
    eps_hi = eps_at(hi)
    while eps_hi > eps:  # double until feasible
        if hi >= log_max:
            raise UnreachableEpsilon(eps, f"even at scale {max_multiplier:g} the accountant reports ε = {eps_hi:.4g} "
                                          f"(δ = {delta:g}; phases' (n, batch, steps): "
                                          f"{[(p.n, p.batch_size, p.steps) for p in phases]})")
        lo, eps_lo, hi = hi, eps_hi, min(hi + log2, log_max)
        eps_hi = eps_at(hi)
    while lo == -math.inf:  # halve until infeasible (ε → ∞ as s → 0)
        eps_half = eps_at(hi - log2)
        if eps_half > eps:
            lo, eps_lo = hi - log2, eps_half
        else:
            hi, eps_hi = hi - log2, eps_half

    # Illinois false position on log ε(s) - log((1 - EPS_RTOL / 2) eps), aiming at the middle of
    # the accepted band: bracketed like bisection, but ~5 accountant calls (≈ 0.06 s each) instead
    # of bisection's ~15 (ε ∝ s^-14 in the paper's setting). Where ε is ∞ or 0 at an end it bisects.
    def f(e: float) -> float:
        return math.log(e / ((1 - EPS_RTOL / 2) * eps)) if e > 0 else -math.inf

    f_lo, f_hi, kept = f(eps_lo), f(eps_hi), None  # kept: the end the last step left in place
    while eps_hi < (1 - EPS_RTOL) * eps and hi - lo > 1e-12:
        finite = math.isfinite(f_lo) and math.isfinite(f_hi)
        mid = hi - f_hi * (hi - lo) / (f_hi - f_lo) if finite else (lo + hi) / 2
        eps_mid = eps_at(mid)
        if eps_mid > eps:
            lo, f_lo = mid, f(eps_mid)
            f_hi, kept = (f_hi / 2 if kept == "hi" else f_hi), "hi"
        else:
            hi, eps_hi, f_hi = mid, eps_mid, f(eps_mid)
            f_lo, kept = (f_lo / 2 if kept == "lo" else f_lo), "lo"
    scale = math.exp(hi)
    return Calibration(eps, delta, scale, [p.noise_multipliers for p in _scaled(phases, scale)], eps_hi)


# DPCL's CIFAR-10 runs (§5.1: n = 50000, |B| = 128 sampled without replacement, (ε, δ) = (1000, 1e-5),
# T = E / q): (objective, variant) → (epochs E, {mechanism: noise multiplier}). Barlow Twins runs
# 100 epochs (§5.3), SimCLR 200 (§5.2): at 200 epochs the paper's σ = 0.3633 would give ε ≈ 1980.
PAPER_N = 50_000
PAPER_BATCH_SIZE = 128
PAPER = {
    ("simclr", "naive"): (200, {"gradient": 0.3812}),  # §5.2, §5.2.1
    ("simclr", "dpcl"): (200, {"gradient": 0.4021, "similarity": 0.4021}),  # §5.2.2
    ("barlow_twins", "naive"): (100, {"gradient": 0.3633}),  # §5.3, §5.3.1
    ("barlow_twins", "dpcl"): (100, {"gradient": 0.3931, "mean_a": 0.416, "mean_b": 0.416,  # §5.3.2
                                     "sse_a": 0.416, "sse_b": 0.416}),
}


def separately_sampled(phase: Phase) -> list[Phase]:
    """The phase with each mechanism on its own batch (the DPCL paper's accounting): one phase per
    distinct noise multiplier, its steps times the mechanisms that share it."""
    return [Phase(phase.n, phase.batch_size, phase.steps * count, (sigma,))
            for sigma, count in sorted(Counter(phase.noise_multipliers).items())]


def paper_settings_rows(delta: float = 1e-5, eps: float = 1000.0) -> list[dict]:
    """Per paper setting, at the paper's noise multipliers: the ε of the RDP accountant for
    sampling without replacement (the releases' accountant) and of the PLD accountant on the
    Poisson analogue (`poisson_epsilon`), each with the mechanisms sharing one batch (what the
    training does) and sampled separately (the paper's accounting); then the multipliers the
    RDP accountant needs for `eps` in the paper's ratios (DPCL's SimCLR mechanisms share one σ,
    its Barlow Twins gradient keeps 0.3931 / 0.416 of the means' and SSEs' σ)."""
    return [dict(row) for row in _paper_settings_rows(float(delta), float(eps))]


@functools.lru_cache(maxsize=8)
def _paper_settings_rows(delta: float, eps: float) -> tuple[dict, ...]:
    # a pure function of its arguments that takes seconds (the RDP accountant for sampling without
    # replacement at the paper's 50000 records): computed once per process, copied for each caller
    rows = []
    for (objective, variant), (epochs, sigmas) in PAPER.items():
        # E / q need not be whole (100 · 50000 / 128 = 39062.5): round up, at least E epochs
        steps = math.ceil(epochs * PAPER_N / PAPER_BATCH_SIZE)
        phase = Phase(PAPER_N, PAPER_BATCH_SIZE, steps, tuple(sigmas.values()))
        ours = calibrate(eps, delta, [phase])
        rows.append({
            "objective": objective, "variant": variant, "n": PAPER_N, "batch_size": PAPER_BATCH_SIZE,
            "epochs": epochs, "steps": steps, "mechanisms": "; ".join(sigmas),
            "paper_noise_multipliers": "; ".join(f"{s:g}" for s in sigmas.values()),
            "eps_rdp_without_replacement": epsilon([phase], delta),
            "eps_rdp_without_replacement_separate": epsilon(separately_sampled(phase), delta),
            "eps_pld_poisson": poisson_epsilon([phase], delta),
            "eps_pld_poisson_separate": poisson_epsilon([phase], delta, separate=True),
            "noise_multipliers": "; ".join(f"{s:.8g}" for s in ours.noise_multipliers[0]),
            "effective_noise_multiplier": effective_noise_multiplier(ours.noise_multipliers[0]),
            "eps": eps, "delta": delta, "eps_at": ours.eps_at,
        })
    return tuple(rows)
