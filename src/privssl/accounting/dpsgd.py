"""Accounting of the DP-SGD head: the noise multiplier σ that reaches a target (ε, δ) for a run
of `steps` Poisson-subsampled Gaussian steps at rate q (addition or removal of one record), and
the ε a run spent, by one of three accountants:

- `pld` (the default): Google dp_accounting's privacy loss distribution accountant on
  SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), steps), ADD_OR_REMOVE_ONE,
  its discretisation refined until ε is within 1e-3 (relative) of the accountant's limit
  (`privssl.accounting.pld`). The tightest of the three: at the default's q = 1/3 and 90 steps,
  σ = 1.874 gives ε = 9.20 by PLD and 9.99 by RDP (tests/test_dpsgd_accountants.py).
- `rdp`: Opacus' RDP accountant (Mironov et al.) over the orders of Google's dp_accounting
  (`privssl.accounting.rdp.RDP_ORDERS`).
- `prv`: Opacus' PRV accountant (Gopi et al.), whose ε carries an absolute error of 0.01.

Opacus' PrivacyEngine has no PLD accountant: a `pld` training records its steps in an Opacus
accountant's history of (σ, q, steps), and `epsilon_spent` composes that history in the PLD
accountant.

Choices, and why:
- One σ search for every accountant (`_search`): from a closed-form first σ (`initial_sigma`),
  false position on log ε against log σ, so a search costs 2–4 accountant evaluations where
  Opacus' bisection (`get_noise_multiplier`) takes ~20: 0.1–0.5 s per ε for `pld` and `rdp` at
  q = 1/3, 90 steps. The accountants' ε are cached per (σ, q, steps, δ): a pure function, which
  every draw at one ε asks for again.
- The PRV accountant's work is bounded before it starts: it discretises the privacy loss on a
  grid whose size it derives from (σ, q, steps, δ) (Gopi et al., remark 5.6), and its time and
  memory grow with that size (about 0.7 µs a point on this project's CPU: 3.5 s for the 4.5 M
  points of σ = 0.2 at q = 1/3, 90 steps, and 1/σ² more below). A σ whose grid would exceed
  `PRV_MAX_POINTS` is not evaluated (`PrvTooCostly`), so whether an ε is reachable depends on
  the arguments alone, never on how loaded the machine is.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass


from privssl.accounting import pld
from privssl.accounting.gaussian import analytic_gaussian_sigma
from privssl.accounting.rdp import MAX_MULTIPLIER, RDP_ORDERS, UnreachableEpsilon

OPACUS_ACCOUNTANTS = ("rdp", "prv")  # the rest (pld) are dp_accounting's
EPS_RTOL = 1e-3  # a calibrated σ's accountant ε lies in [(1 - EPS_RTOL) ε, ε]
MIN_MULTIPLIER = 1e-3  # the smallest σ a search tries (a full-batch step there costs ε ≈ 5e5)
# the most grid points of one PRV evaluation: ~6 s and ~1 GiB here, where a σ search makes 3-6
PRV_MAX_POINTS = 2 ** 23
PRV_EPS_ERROR = 0.01  # Opacus' default absolute error of the PRV accountant's ε


class PrvTooCostly(RuntimeError):  # not an ArithmeticError: the search must not read it as ε = ∞
    """The PRV accountant's grid at this (σ, q, steps, δ) exceeds PRV_MAX_POINTS."""


class SearchTooCostly(UnreachableEpsilon):
    """The σ search for this ε would evaluate the PRV accountant above its work bound."""


@dataclass(frozen=True)
class NoiseCalibration:
    """σ for one target (ε, δ) of a run with Poisson rate q and `steps` steps."""

    eps: float  # the target
    delta: float
    noise_multiplier: float  # σ
    eps_at_sigma: float  # the accountant's ε at σ (≤ eps)
    sample_rate: float
    steps: int
    accountant: str


@dataclass(frozen=True)
class Unreachable:
    """A target ε that no σ could be calibrated for, and why."""

    eps: float
    delta: float
    reason: str


def _accountant_kwargs(accountant: str) -> dict:
    return {"alphas": RDP_ORDERS} if accountant == "rdp" else {}


def _check_accountant(accountant: str) -> None:
    if accountant not in (*OPACUS_ACCOUNTANTS, "pld"):
        raise ValueError(f"unknown accountant {accountant!r}; allowed: rdp, pld, prv")


def accountant_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                       accountant: str = "pld") -> float:
    """ε at δ of `steps` Poisson-subsampled Gaussian steps (σ, q), addition or removal of one
    record, by the accountant (`pld`: dp_accounting, within 1e-3 of its limit; `rdp`, `prv`: Opacus)."""
    _check_accountant(accountant)
    return _history_epsilon(accountant, ((float(noise_multiplier), float(sample_rate), int(steps)),), float(delta))


def initial_sigma(eps: float, delta: float, sample_rate: float, steps: int) -> float:
    """A first σ for the search, from closed forms: the smaller of the central-limit approximation
    of the Poisson-subsampled Gaussian (μ-GDP with μ = q √(T (e^{1/σ²} − 1)); Dong, Roth & Su 2022,
    §5) and the σ of the T Gaussians without subsampling, each through the Gaussian mechanism's
    exact ε(δ) (Balle & Wang 2018). Within ×1.5 of the calibrated σ at q = 1/3, 90 steps, for
    ε = 0.1 … 1e5 (the first from below at small ε, the second from above at large ε)."""
    try:
        gaussian = analytic_gaussian_sigma(1.0, eps, delta)  # = 1/μ
    except (ValueError, ArithmeticError):
        return 1.0
    clt = 1 / math.sqrt(math.log1p(1 / (gaussian * gaussian * sample_rate * sample_rate * steps)))
    return min(clt, gaussian * math.sqrt(steps))


def _search(eps: float, delta: float, sample_rate: float, steps: int, accountant: str,
            start: float | None = None) -> tuple[float, float]:
    """(σ, ε(σ)) with (1 - EPS_RTOL) eps ≤ ε(σ) ≤ eps, ε(σ) the accountant's.

    ε falls with σ, between ∝ 1/σ (large σ) and ∝ 1/σ² (small σ). From `start` (default
    `initial_sigma`), steps of |log ε(σ) − log eps| in log σ (the 1/σ law's step, which
    overshoots where ε falls faster; at most ×1000 up and ×8 down, ×2 down for PRV, which is slow
    at small σ) bracket the target; Illinois false position on log ε against log σ then aims at
    the middle of the band. An accountant that fails at some σ (PRV overflows at small σ) counts
    as ε = ∞ there."""
    aim = math.log((1 - EPS_RTOL / 2) * eps)
    log_max, log_min = math.log(MAX_MULTIPLIER), math.log(MIN_MULTIPLIER)
    down = math.log(2) if accountant == "prv" else math.log(8)

    def at(x: float) -> tuple[float, float]:  # (ε, log ε - aim) at σ = e^x
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=RuntimeWarning)  # PRV overflows at small σ: ε = ∞
            try:
                e = accountant_epsilon(math.exp(x), sample_rate, steps, delta, accountant)
            except (ValueError, ArithmeticError):
                e = math.inf
        e = math.inf if math.isnan(e) else e
        return e, (math.log(e) - aim if e > 0 else -math.inf)

    def in_band(e: float) -> bool:
        return (1 - EPS_RTOL) * eps <= e <= eps

    start = start or initial_sigma(eps, delta, sample_rate, steps)
    x = min(max(math.log(start) if math.isfinite(start) and start > 0 else 0.0, log_min), log_max)
    e, g = at(x)
    lo = hi = None  # log σ where ε > eps (lo) and ε ≤ eps (hi), with their g
    for _ in range(200):
        if in_band(e):
            return math.exp(x), e
        if e > eps:
            lo, g_lo, e_lo = x, g, e
        else:
            hi, g_hi, e_hi = x, g, e
        if lo is not None and hi is not None:
            break
        if hi is None:  # every σ so far too small
            if x >= log_max:
                raise ValueError(f"the privacy budget is too low: even at σ = {MAX_MULTIPLIER:g}, the largest "
                                 f"searched, the {accountant} accountant reports ε = {e:.4g}")
            x = min(x + (min(g, math.log(1000)) if math.isfinite(g) else math.log(4)), log_max)
        else:  # every σ so far large enough
            if x <= log_min:
                raise ValueError(f"ε = {eps:g} is reached at σ = {MIN_MULTIPLIER:g}, the smallest searched "
                                 f"(ε there: {e:.4g}), so no σ is calibrated to within {EPS_RTOL:g} of it")
            x = max(x - min(-g if math.isfinite(g) else down, down), log_min)
        e, g = at(x)
    kept = None  # which end the last step left in place (Illinois: halve its g when it stays twice)
    for _ in range(200):
        if in_band(e_hi) or hi - lo <= 1e-12:
            break
        finite = math.isfinite(g_lo) and math.isfinite(g_hi)
        x = hi - g_hi * (hi - lo) / (g_hi - g_lo) if finite else (lo + hi) / 2
        e, g = at(x)
        if e > eps:
            lo, g_lo, e_lo = x, g, e
            g_hi, kept = (g_hi / 2 if kept == "hi" else g_hi), "hi"
        else:
            hi, g_hi, e_hi = x, g, e
            g_lo, kept = (g_lo / 2 if kept == "lo" else g_lo), "lo"
    if not in_band(e_hi):  # ε(σ) jumps over the band (PRV: from a finite ε to an overflow)
        raise ValueError(f"the {accountant} accountant's ε jumps from {e_hi:.4g} at σ = {math.exp(hi):.6g} to "
                         f"{e_lo:.4g} just below it, over [{(1 - EPS_RTOL) * eps:.6g}, {eps:g}]")
    return math.exp(hi), e_hi


def noise_multiplier(eps: float, delta: float, sample_rate: float, steps: int,
                     accountant: str = "pld") -> NoiseCalibration:
    """σ with accountant ε(σ) in [(1 - EPS_RTOL) eps, eps] (`_search`).

    Raises UnreachableEpsilon where the search fails (σ would exceed 1e6: ε too small for this
    q, steps and δ) or returns no valid σ (ε(σ) not finite or above the target), and its subclass
    SearchTooCostly where the PRV accountant would exceed its work bound at a σ the search tries."""
    if not (eps > 0 and math.isfinite(eps)):
        raise UnreachableEpsilon(eps, "ε must be finite and > 0")
    if not 0 < delta < 1:
        raise ValueError(f"δ must lie in (0, 1), got {delta}")
    if not 0 < sample_rate <= 1 or steps < 1:
        raise ValueError(f"need 0 < q <= 1 and steps >= 1, got q = {sample_rate}, steps = {steps}")
    _check_accountant(accountant)
    try:
        sigma, eps_at = _search(eps, delta, sample_rate, steps, accountant)
    except PrvTooCostly as err:
        raise SearchTooCostly(eps, f"the σ search stopped: {err}") from err
    except Exception as err:
        raise UnreachableEpsilon(eps, f"the σ search failed ({type(err).__name__}: {err})") from err
    if not (math.isfinite(sigma) and sigma > 0 and math.isfinite(eps_at) and eps_at <= eps * (1 + 1e-9)):
        raise UnreachableEpsilon(eps, f"the search returned σ = {sigma:g}, at which the {accountant} accountant "
                                      f"reports ε = {eps_at:g} (> target or not finite)")
    return NoiseCalibration(eps, delta, sigma, eps_at, sample_rate, steps, accountant)


def calibrate_grid(eps_grid, delta: float, sample_rate: float, steps: int,
                   accountant: str = "pld") -> tuple[list[NoiseCalibration], list[Unreachable]]:
    """σ for every reachable ε of the grid, in grid order, and a record for every other ε.

    The grid is searched from the smallest ε up. Once a search exceeds the PRV accountant's work
    bound, every larger ε is recorded unreachable without a search: it needs a smaller σ, where
    the accountant's grid is larger still."""
    found: dict[float, NoiseCalibration | Unreachable] = {}
    too_costly = None
    for eps in sorted(set(eps_grid)):
        if too_costly is not None:
            found[eps] = Unreachable(eps, delta, f"not searched: the search for the smaller ε = {too_costly.eps:g} "
                                                 f"already exceeded the work bound ({too_costly.reason})")
            continue
        try:
            found[eps] = noise_multiplier(eps, delta, sample_rate, steps, accountant)
        except SearchTooCostly as err:
            too_costly = err
            found[eps] = Unreachable(eps, delta, err.reason)
        except UnreachableEpsilon as err:
            found[eps] = Unreachable(eps, delta, err.reason)
    ordered = [found[eps] for eps in eps_grid]
    return ([f for f in ordered if isinstance(f, NoiseCalibration)],
            [f for f in ordered if isinstance(f, Unreachable)])


def epsilon_spent(engine, delta: float, accountant: str | None = None) -> float:
    """ε at δ of the steps the engine's accountant has recorded (its history of (σ, q, steps)), by
    `accountant` (default: the engine's own; `pld`, which Opacus lacks, composes the history)."""
    history = tuple((float(s), float(q), int(n)) for s, q, n in engine.accountant.history)
    return _history_epsilon(accountant or engine.accountant.mechanism(), history, float(delta))


@functools.lru_cache(maxsize=4096)
def _history_epsilon(mechanism: str, history: tuple, delta: float) -> float:
    """The accountant's ε for a history of (σ, q, steps) — a pure function, cached: a calibration
    evaluates it at the σ it returns, and every draw at one ε has the same history."""
    if mechanism == "pld":
        return pld.epsilon(tuple(pld.poisson_gaussian(*h) for h in history), delta, pld.ADD_OR_REMOVE)
    from opacus.accountants import create_accountant  # here only: Opacus' import costs a job 1.5 s

    if mechanism == "prv":
        _check_prv_work(history, delta)

    accountant = create_accountant(mechanism=mechanism)
    accountant.history = [tuple(h) for h in history]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the")
        return float(accountant.get_epsilon(delta=delta, **_accountant_kwargs(mechanism)))


def prv_grid_points(history: tuple, delta: float) -> int:
    """The number of points on which Opacus' PRV accountant discretises the privacy loss of a
    history of (σ, q, steps) at δ, with its default errors (PRVAccountant._get_domain: the domain
    [-L, L] of Gopi et al.'s remark 5.6 at the mesh eps_error / √(T log(12 / δ_error) / 2))."""
    from opacus.accountants.analysis.prv import Domain, PoissonSubsampledGaussianPRV, compute_safe_domain_size

    delta_error = delta / 1000  # PRVAccountant.get_epsilon's default
    prvs = [PoissonSubsampledGaussianPRV(q, sigma) for sigma, q, _ in history]
    compositions = [steps for _, _, steps in history]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the")
        half_width = compute_safe_domain_size(prvs, compositions, PRV_EPS_ERROR, delta_error)
    mesh = PRV_EPS_ERROR / math.sqrt(sum(compositions) * math.log(12 / delta_error) / 2)
    return int(Domain.create_aligned(-half_width, half_width, mesh).size)


def _check_prv_work(history: tuple, delta: float) -> None:
    points = prv_grid_points(history, delta)
    if points > PRV_MAX_POINTS:
        phases = "; ".join(f"σ = {sigma:.4g} (q = {q:.4g}, {steps} steps)" for sigma, q, steps in history)
        raise PrvTooCostly(f"the PRV accountant would discretise the privacy loss at {phases}, δ = {delta:g}, on "
                           f"{points:,} points, above its bound of {PRV_MAX_POINTS:,} (PRV_MAX_POINTS); the pld "
                           f"accountant is tighter and has no such bound")
