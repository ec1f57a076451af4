"""A claim's verdict from the interval of a difference, as the claim is worded.

Every comparison of the ledger and of the branch reports is a difference d = a − b with its 95 %
interval (privssl.attacks.repeated: paired when a and b are decided on the same records), read by
one of three tests:

* `directional` ("a > b", "a lowers b"): reproduced when the interval lies above 0, contradicted
  when below, otherwise unresolved;
* `at_most` ("no cost", "does not raise": d ≤ margin): reproduced when the interval lies below the
  margin, contradicted when it lies above it, otherwise unresolved (a non-inferiority test);
* `within` ("roughly 50 %", "barely lowers": |d| ≤ margin): reproduced when the interval lies
  inside ±margin, contradicted when it lies entirely outside on either side, otherwise
  unresolved (an equivalence test by the two one-sided tests, each at 2.5 %).

An unresolved verdict carries the records (per side for an unpaired difference) at which a
replication would settle it with 80 % power if the measured difference held (`n_for_power`): +inf
when the draws' share of the variance alone is too large (more draws, not records, are needed),
NaN when no n can settle it (a difference of exactly 0 in a directional claim).
"""

from __future__ import annotations

import numpy as np

from privssl.attacks.repeated import Estimate, n_for_power, versus_bound
from privssl.reports.claims_spec import VERDICTS

REPRODUCED, CONTRADICTED, UNRESOLVED = VERDICTS
# The margins of the worded claims; the papers give none, so these are the ledger's, stated
# wherever a verdict rests on one (docs/claims.md says why each):
CHANCE_MARGIN = 0.05  # "roughly 50 %" (ALM): an attack accuracy within 0.5 ± 0.05
NO_COST_MARGIN = 0.03  # "at no cost" (Talos): accuracy lost, or MIA accuracy gained, below 0.03
BARELY_MARGIN = 0.03  # "barely lowers" (Semi-Leak top-1): an AUC change within ± 0.03 (the thesis: 0.918 → 0.906)


def directional(d: Estimate) -> tuple[str, float]:
    """The claim d > 0 (orient d so that the claim says "greater")."""
    if d.lo > 0:
        return REPRODUCED, np.nan
    if d.hi < 0:
        return CONTRADICTED, np.nan
    return UNRESOLVED, n_for_power(d)


def at_most(d: Estimate, margin: float) -> tuple[str, float]:
    """The claim d ≤ margin ("no cost beyond the margin")."""
    if margin < 0:
        raise ValueError(f"a margin must be >= 0, got {margin}")
    if d.hi < margin:
        return REPRODUCED, np.nan
    if d.lo > margin:
        return CONTRADICTED, np.nan
    return UNRESOLVED, n_for_power(versus_bound(d, margin))


def within(d: Estimate, margin: float) -> tuple[str, float]:
    """The claim |d| ≤ margin: both edges inside the band reproduce it, an interval wholly outside
    on either side contradicts it; otherwise the records at which the violated edges would come
    inside (the larger need), or, outside, would leave the band."""
    if margin <= 0:
        raise ValueError(f"an equivalence margin must be > 0, got {margin}")
    if -margin < d.lo and d.hi < margin:
        return REPRODUCED, np.nan
    if d.lo > margin or d.hi < -margin:
        return CONTRADICTED, np.nan
    if abs(d.value) >= margin:  # the estimate outside the band: how many to show it lies outside
        return UNRESOLVED, n_for_power(versus_bound(d, np.sign(d.value) * margin))
    needs = [n_for_power(versus_bound(d, edge)) for edge, inside in ((-margin, d.lo > -margin),
                                                                     (margin, d.hi < margin)) if not inside]
    return UNRESOLVED, max(needs)


def combined(parts: list[str]) -> str:
    """A claim of several comparisons: contradicted when any part is, reproduced when all are,
    otherwise unresolved."""
    if not parts:
        raise ValueError("a claim needs at least one compared part")
    if CONTRADICTED in parts:
        return CONTRADICTED
    return REPRODUCED if all(p == REPRODUCED for p in parts) else UNRESOLVED


def largest_need(needs: list[float]) -> float:
    """The records a claim of several unresolved parts needs: the largest part's (+inf wins, NaN
    parts cannot be settled by records and are left out unless every part is NaN)."""
    finite = [n for n in needs if not np.isnan(n)]
    return max(finite) if finite else np.nan
