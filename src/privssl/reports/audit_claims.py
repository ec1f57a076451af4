"""The ledger's rows about the releases' own guarantees, from audit.csv: every release whose
guarantee is proven is audited below its claim, and how close the tightest audit of each comes.

- `proven_release_below_claim`, one row per (dataset, method) with a proven guarantee (`pure_dp`,
  `approx_dp`): the largest ratio of an audited lower bound to its claimed ε over every audit and
  ε of the method. Reproduced when no bound exceeds its claim, contradicted when one does (the
  rule that produced it stops first for the tight audits; the black-box ones are too loose to).
  Each bound is a one-sided confidence bound (95 %; the canary's Gaussian-DP fits at 1 − 10⁻⁴), so
  the row is a computation on them, with no interval of its own; its note states the family-wise
  level: the chance that some of its k bounds exceeds a correct claim by sampling error alone is at
  most Σ (1 − confidence) over them (the union bound), which is what a contradiction rests on.
- `tight_audit_reaches_claim`, one row per (dataset, method, ε) of the tight audits: the DP-SGD
  head's white-box gradient canary (the setting in which Nasr et al. 2023 find DP-SGD's audit
  tight; its Gaussian-DP fit of the in-versus-out statistic), the certified heads' crafted pair
  (the Gaussian-DP fit for Gaussian noise, the Clopper–Pearson test for the Gamma-norm).
  Reproduced at ≥ TIGHT × the claim. Below it, the audit's reach decides (`reach`): what the audit
  shows on a release that meets its claim exactly. Where the reach itself is below TIGHT × the
  claim the audit cannot tell a tight release from a loose one: unresolved, "the audit cannot reach
  the claim", with the reach in the note and the trainings that would reach it (none where no
  number would: "not settled by data"). Where the reach is above and the bound below what such a
  release shows 95 % of the time (a model of the audit's spread: the Gaussian-DP fits),
  contradicted: the audit could have shown the claim and did not; between the two, unresolved (bad
  luck is not ruled out).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from privssl.audit.gdp import expected_gdp_bound, low_gdp_bound
from privssl.reports.claims_ledger import CONTRADICTED, NO_DIFFERENCE, REPRODUCED, UNRESOLVED, Ledger, bound, side

PROVEN = ("pure_dp", "approx_dp")
TIGHT = 0.9  # "within 10 % of the claim": the ledger's margin for a tight audit
# the tightest audit of each release method whose audits are tight by design
TIGHT_AUDITS = {"dpsgd": "white_box_gdp", "certified_gaussian": "crafted_pair_gdp",
                "certified_pure": "crafted_pair_test"}
COMPUTATION = "computation on one-sided lower bounds"
DEFAULT_CONFIDENCE = 0.95  # a row without a `confidence` column: the audits' default (config audit.confidence)
OVER_TOLERANCE = 1e-6  # float rounding, as privssl.audit.gradient_canary.check_below_claim


def _claimed(audit: pd.DataFrame) -> pd.DataFrame:
    """The rows that test a proven, finite claim."""
    return audit[audit.guarantee_kind.isin(PROVEN) & np.isfinite(audit.claimed_eps) & (audit.method != "none")]


def below_claim_rows(ledger: Ledger, audit: pd.DataFrame) -> None:
    rows = _claimed(audit).assign(ratio=lambda f: f.eps_lower_bound / f.claimed_eps)
    for (dataset, method), group in rows.groupby(["dataset", "method"], sort=False):
        worst = group.loc[group.ratio.idxmax()]
        over = group[group.eps_lower_bound > group.claimed_eps * (1 + OVER_TOLERANCE)]
        verdict = CONTRADICTED if len(over) else REPRODUCED
        confidence = group["confidence"] if "confidence" in group else pd.Series(np.nan, index=group.index)
        family = float((1 - confidence.fillna(DEFAULT_CONFIDENCE)).sum())
        level = (f"a correct release has some bound above its claim with probability ≤ {family:.3g}" if family < 1
                 else f"Σ (1 − confidence) = {family:.3g}: one bound above its claim would not by itself reject the "
                      "release at any family-wise level")
        note = (f"largest: {worst.audit} ({worst.threat_model.replace('_', ' ')}, attack {worst.attack}) at ε = "
                f"{worst.eps:g}: ε ≥ {worst.eps_lower_bound:.3g} against the claimed {worst.claimed_eps:.3g}; "
                f"{len(over)} of {len(group)} audit rows above their claim; family-wise (union bound over the "
                f"{len(group)} rows), {level}")
        ledger.add(dataset, "proven_release_below_claim", method,
                   f"audited lower bound / claimed ε, the largest of {len(group)} audit rows (audits × attacks × ε)",
                   "every audit of the release vs its claimed ε", side(worst.ratio, worst.ratio, worst.ratio, np.nan,
                                                                      np.nan),
                   bound(1.0), NO_DIFFERENCE, COMPUTATION, "bound / claim ≤ 1 for every row", verdict, note=note)


MAX_RUNS = 10 ** 7  # the search for the trainings that would reach the claim stops here (∞ beyond)


def runs_to_reach(mu: float, target: float, delta: float, confidence: float) -> float:
    """The fewest trainings per world at which a Gaussian-DP fit of shift μ reaches ε ≥ target (NaN
    where no number does: the shift's own ε is below it; the ledger reads that "not settled by data")."""
    if expected_gdp_bound(mu, MAX_RUNS, MAX_RUNS, delta, confidence) < target:
        return np.nan
    low, high = 2, 4
    while expected_gdp_bound(mu, high, high, delta, confidence) < target:
        low, high = high, high * 2
    while high - low > 1:  # invariant: low does not reach, high does
        mid = (low + high) // 2
        low, high = (mid, high) if expected_gdp_bound(mu, mid, mid, delta, confidence) < target else (low, mid)
    return float(high)


def reach(row: pd.Series) -> tuple[float, float, float, str]:
    """(the ε the audit shows on a release that meets its claim exactly, the bound such a release
    stays above 95 % of the time (NaN where no model of the audit's spread is at hand), the trainings
    or releases per world that would bring it to TIGHT × the claim, what sets it): never above the
    audit's ceiling."""
    target = TIGHT * row.claimed_eps
    if row.audit == "white_box_gdp":
        need = runs_to_reach(row.mu_reach, target, row.delta, row.confidence)
        # on a coordinate the records' gradients reach, the audit does not run (its rows read 0)
        clean = bool(row.get("coordinate_clean", True))
        value, low = (row.eps_reach, row.eps_reach_low) if clean else (0.0, np.nan)
        why = (f"the Gaussian-DP fit of the in-vs-out statistic reaches ε = {row.eps_reach:.3g} at "
               f"{int(row.runs_per_world)} trainings per world on a correct trainer (≥ {low:.3g} 95 % of the "
               f"time), {row.eps_reach_unlimited:.3g} at unlimited trainings (one μ summarises the trade-off curve; "
               f"the claim lives in its tail); confidence {row.confidence:g}"
               + ("" if clean else "; no clean coordinate: the white-box audit did not run"))
    elif row.audit.startswith("crafted_pair"):
        # Gaussian noise: the pair's own ε at δ; the Gamma-norm (pure DP): its privacy loss is at most
        # ε · ‖W_d − W_d'‖ / Δ2, the pair's own ε at δ = 0
        gaussian = pd.notna(row.get("eps_of_pair", np.nan))
        value = row.eps_of_pair if gaussian else row.claimed_eps * row.pair_fraction
        low = (low_gdp_bound(row.pair_distance / row.noise_scale, int(row.runs_per_world), int(row.runs_per_world),
                             row.delta, row.confidence) if gaussian else np.nan)
        need = np.nan  # no number of releases moves the pair's own ε: not settled by data
        why = (f"the crafted pair moves the head {row.pair_fraction:.2f} of the proven Δ2 (the proof's slack on this "
               f"family of pairs): a perfect test of this pair shows ε = {value:.3g}; "
               f"{int(row.runs_per_world)} releases per world")
    else:
        value, low, need, why = row.eps_ceiling, np.nan, np.nan, f"{int(row.runs_per_world)} runs per world"
    if row.eps_ceiling < value:
        value, need = row.eps_ceiling, math.inf if row.eps_ceiling < target else need
        why += f"; the test's ceiling at these runs is {row.eps_ceiling:.3g}"
    return value, low, need, why


def tight_audit_rows(ledger: Ledger, audit: pd.DataFrame) -> None:
    rows = _claimed(audit)
    for method, kind in TIGHT_AUDITS.items():
        for row in rows[(rows.method == method) & (rows.audit == kind)].itertuples(index=False):
            row = pd.Series(row._asdict())
            reached, low, need, why = reach(row)
            if row.eps_lower_bound >= TIGHT * row.claimed_eps:
                verdict, need = REPRODUCED, np.nan
            elif reached < TIGHT * row.claimed_eps:  # a release that meets its claim would read the same
                verdict, why = UNRESOLVED, f"the audit cannot reach the claim: {why}"
            elif row.eps_lower_bound < low:  # below what a release that meets its claim shows 95 % of the time
                verdict, need = CONTRADICTED, np.nan
            else:  # below the margin, but within the spread of a release that meets its claim
                verdict, why = UNRESOLVED, (f"below the margin, but within what a release that meets its claim "
                                            f"shows at these runs: {why}")
            ledger.add(row.dataset, "tight_audit_reaches_claim", f"{method}, ε = {row.eps:g}",
                       f"{kind} ({row.threat_model.replace('_', ' ')}): audited lower bound on ε",
                       "the tightest audit vs the claimed ε",
                       side(row.eps_lower_bound, row.eps_lower_bound, row.eps_lower_bound, np.nan, np.nan),
                       bound(row.claimed_eps), NO_DIFFERENCE, COMPUTATION, f"bound ≥ {TIGHT:g} × claim", verdict,
                       need, why)


def audit_claims(ledger: Ledger, audit: pd.DataFrame) -> None:
    """Both claims' rows from the concatenated audit.csv of the image datasets."""
    below_claim_rows(ledger, audit)
    tight_audit_rows(ledger, audit)
