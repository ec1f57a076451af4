"""Accounting of the DP-SGD head: the noise multiplier σ that reaches a target (ε, δ) for a run
of `steps` Poisson-subsampled Gaussian steps at rate q, and the ε a run spent, by Opacus'
accountants (`rdp`: Mironov et al.; `prv`: Gopi et al.), checked against Google's dp_accounting
in tests/test_dpsgd.py.

Choices, and why:
- The RDP accountant searches the orders of Google's dp_accounting (`privssl.accounting.rdp.RDP_ORDERS`)
  for σ and for the reported ε alike.
- The σ search runs in a forked child with a time limit: the PRV accountant needs seconds to
  minutes per evaluation at small σ (and overflows to ε = ∞), so a large ε can take longer
  than a job should. Such an ε is reported unreachable, never silently replaced.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import time
import warnings
from dataclasses import dataclass

from opacus.accountants import create_accountant
from opacus.accountants.utils import MAX_SIGMA, get_noise_multiplier

from privssl.accounting.rdp import RDP_ORDERS, UnreachableEpsilon

SEARCH_SECONDS = 60.0  # default time limit of one σ search


class SearchTimeout(UnreachableEpsilon):
    """The σ search for this ε outlasted its time limit."""


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


def accountant_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                       accountant: str = "rdp") -> float:
    """ε at δ of `steps` Poisson-subsampled Gaussian steps (σ, q), by our Opacus accountant."""
    acc = create_accountant(mechanism=accountant)
    acc.history = [(noise_multiplier, sample_rate, steps)]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the")
        return float(acc.get_epsilon(delta=delta, **_accountant_kwargs(accountant)))


def _search(eps: float, delta: float, sample_rate: float, steps: int, accountant: str) -> tuple[float, float]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the")
        warnings.filterwarnings("ignore", category=RuntimeWarning)  # PRV overflows at small σ: ε = ∞
        try:
            sigma = get_noise_multiplier(target_epsilon=eps, target_delta=delta, sample_rate=sample_rate,
                                         steps=steps, accountant=accountant, epsilon_tolerance=1e-3 * eps,
                                         **_accountant_kwargs(accountant))
        except ValueError as err:
            floor = accountant_epsilon(MAX_SIGMA, sample_rate, steps, delta, accountant)
            raise ValueError(f"{err} (Opacus caps σ at {MAX_SIGMA:g}, where the {accountant} accountant "
                             f"still reports ε = {floor:.4g})") from err
    return float(sigma), accountant_epsilon(sigma, sample_rate, steps, delta, accountant)


def _search_child(conn, args) -> None:
    try:
        conn.send(("ok", _search(*args)))
    except Exception as err:  # sent to the parent, which raises UnreachableEpsilon
        conn.send(("error", f"{type(err).__name__}: {err}"))
    finally:
        conn.close()


def noise_multiplier(eps: float, delta: float, sample_rate: float, steps: int, accountant: str = "rdp",
                     time_limit: float | None = SEARCH_SECONDS) -> NoiseCalibration:
    """σ with accountant ε(σ) ≤ eps, within 0.1 % of eps: Opacus' `get_noise_multiplier` (its
    doubling then bisection over σ), with a relative tolerance instead of its absolute 0.01.

    Raises UnreachableEpsilon where Opacus fails (σ would exceed its 1e6 cap: ε too small for
    this q, steps and δ), returns no valid σ (ε(σ) not finite or above the target), or the
    search outlasts `time_limit` seconds (run in a forked child that is then killed; None, or
    a platform without fork: in this process, unlimited)."""
    if not (eps > 0 and math.isfinite(eps)):
        raise UnreachableEpsilon(eps, "ε must be finite and > 0")
    if not 0 < delta < 1:
        raise ValueError(f"δ must lie in (0, 1), got {delta}")
    if not 0 < sample_rate <= 1 or steps < 1:
        raise ValueError(f"need 0 < q <= 1 and steps >= 1, got q = {sample_rate}, steps = {steps}")
    args = (eps, delta, sample_rate, steps, accountant)
    accountant_epsilon(1.0, 0.5, 1, delta, accountant)  # load the accountant's lazy parts before forking
    if time_limit is None or "fork" not in multiprocessing.get_all_start_methods():
        try:
            sigma, eps_at = _search(*args)
        except Exception as err:
            raise UnreachableEpsilon(eps, f"Opacus' noise search failed ({type(err).__name__}: {err})") from err
    else:
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        child = context.Process(target=_search_child, args=(send, args), daemon=True)
        start = time.monotonic()
        child.start()
        send.close()
        try:
            if not receive.poll(time_limit):
                raise SearchTimeout(eps, f"the {accountant} accountant's σ search did not finish in "
                                         f"{time_limit:g} s (q = {sample_rate:.4g}, {steps} steps)")
            try:
                status, value = receive.recv()
            except EOFError as err:
                raise UnreachableEpsilon(eps, f"the σ search process died (exit code {child.exitcode})") from err
        finally:
            if child.is_alive():
                child.kill()
            child.join()
            receive.close()
        if status == "error":
            raise UnreachableEpsilon(eps, f"Opacus' noise search failed ({value}) after "
                                          f"{time.monotonic() - start:.1f} s")
        sigma, eps_at = value
    if not (math.isfinite(sigma) and sigma > 0 and math.isfinite(eps_at) and eps_at <= eps * (1 + 1e-9)):
        raise UnreachableEpsilon(eps, f"Opacus' search returned σ = {sigma:g}, at which the {accountant} accountant "
                                      f"reports ε = {eps_at:g} (> target or not finite)")
    return NoiseCalibration(eps, delta, sigma, eps_at, sample_rate, steps, accountant)


def calibrate_grid(eps_grid, delta: float, sample_rate: float, steps: int, accountant: str = "rdp",
                   time_limit: float | None = SEARCH_SECONDS) -> tuple[list[NoiseCalibration], list[Unreachable]]:
    """σ for every reachable ε of the grid, in grid order, and a record for every other ε.

    The grid is searched from the smallest ε up. Once a search times out, every larger ε is
    recorded unreachable without a search: it needs a smaller σ, where the accountant is slower
    still (PRV: seconds at σ = 0.2, minutes at σ = 0.1 for q = 1/3 over 90 steps)."""
    found: dict[float, NoiseCalibration | Unreachable] = {}
    timed_out = None
    for eps in sorted(set(eps_grid)):
        if timed_out is not None:
            found[eps] = Unreachable(eps, delta, f"not searched: the search for the smaller ε = {timed_out.eps:g} "
                                                 f"already timed out ({timed_out.reason})")
            continue
        try:
            found[eps] = noise_multiplier(eps, delta, sample_rate, steps, accountant, time_limit)
        except SearchTimeout as err:
            timed_out = err
            found[eps] = Unreachable(eps, delta, err.reason)
        except UnreachableEpsilon as err:
            found[eps] = Unreachable(eps, delta, err.reason)
    ordered = [found[eps] for eps in eps_grid]
    return ([f for f in ordered if isinstance(f, NoiseCalibration)],
            [f for f in ordered if isinstance(f, Unreachable)])


def epsilon_spent(engine, delta: float) -> float:
    """ε at δ that the engine's accountant reports for the steps it has recorded."""
    accountant = engine.accountant
    return _history_epsilon(accountant.mechanism(), tuple(map(tuple, accountant.history)), delta)


@functools.lru_cache(maxsize=256)
def _history_epsilon(mechanism: str, history: tuple, delta: float) -> float:
    """The accountant's ε for a history of (σ, q, steps) — a pure function, cached because
    every draw at one ε has the same history."""
    accountant = create_accountant(mechanism=mechanism)
    accountant.history = [tuple(h) for h in history]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the")
        return float(accountant.get_epsilon(delta=delta, **_accountant_kwargs(mechanism)))
