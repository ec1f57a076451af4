"""The ledger's rows about the releases' own guarantees, from audit.csv: every release whose
guarantee is proven is audited below its claim, and how close the tightest audit of each comes.

- `proven_release_below_claim`, one row per (dataset, method) with a proven guarantee (`pure_dp`,
  `approx_dp`): the largest ratio of an audited lower bound to its claimed ε over every audit and
  ε of the method. Reproduced when no bound exceeds its claim, contradicted when one does (the
  rule that produced it stops first for the tight audits; the black-box ones are too loose to).
  Each bound is a one-sided 95 % confidence bound (the white-box one at 1 − 10⁻⁶), so the row is a
  computation on them, with no interval of its own.
- `tight_audit_reaches_claim`, one row per (dataset, method, ε) of the tight audits: the DP-SGD
  head's white-box gradient canary (the setting in which Nasr et al. 2023 find DP-SGD's audit
  tight), the certified heads' crafted pair (the Gaussian-DP fit for Gaussian noise, the
  Clopper–Pearson test for the Gamma-norm). Reproduced at ≥ TIGHT × the claim; contradicted below,
  with what caps it: the audit's ceiling, or for the crafted pair the share of Δ2 the pair reaches
  and the ε a perfect test of that pair would show; unresolved (more runs, not records) where the
  audit's ceiling itself lies below TIGHT × the claim.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.reports.claims_ledger import CONTRADICTED, NO_DIFFERENCE, REPRODUCED, UNRESOLVED, Ledger, bound, side

PROVEN = ("pure_dp", "approx_dp")
TIGHT = 0.9  # "within 10 % of the claim": the ledger's margin for a tight audit
# the tightest audit of each release method whose audits are tight by design
TIGHT_AUDITS = {"dpsgd": "white_box_all_updates", "certified_gaussian": "crafted_pair_gdp",
                "certified_pure": "crafted_pair_test"}
COMPUTATION = "computation on 95 % lower bounds"
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
        note = (f"largest: {worst.audit} ({worst.threat_model.replace('_', ' ')}, attack {worst.attack}) at ε = "
                f"{worst.eps:g}: ε ≥ {worst.eps_lower_bound:.3g} against the claimed {worst.claimed_eps:.3g}; "
                f"{len(over)} of {len(group)} audit rows above their claim")
        ledger.add(dataset, "proven_release_below_claim", method,
                   f"audited lower bound / claimed ε, the largest of {len(group)} audit rows (audits × attacks × ε)",
                   "every audit of the release vs its claimed ε", side(worst.ratio, worst.ratio, worst.ratio, np.nan,
                                                                      np.nan),
                   bound(1.0), NO_DIFFERENCE, COMPUTATION, "bound / claim ≤ 1 for every row", verdict, note=note)


def _tight_note(row: pd.Series) -> str:
    if row.audit.startswith("crafted_pair"):
        perfect = (f"; a perfect test of this pair would show ε = {row.eps_of_pair:.3g}"
                   if pd.notna(row.get("eps_of_pair", np.nan)) else "")
        return (f"the crafted pair moves the head {row.pair_fraction:.2f} of the proven Δ2 (the proof's slack on "
                f"this family of pairs){perfect}; {int(row.runs_per_world)} releases per world")
    return (f"ceiling {row.eps_ceiling:.3g}; {int(row.runs_per_world)} trainings per world, confidence "
            f"{row.confidence:g}")


def tight_audit_rows(ledger: Ledger, audit: pd.DataFrame) -> None:
    rows = _claimed(audit)
    for method, kind in TIGHT_AUDITS.items():
        for row in rows[(rows.method == method) & (rows.audit == kind)].itertuples(index=False):
            row = pd.Series(row._asdict())
            need = np.nan
            if row.eps_lower_bound >= TIGHT * row.claimed_eps:
                verdict = REPRODUCED
            elif row.eps_ceiling < TIGHT * row.claimed_eps:  # no outcome of these runs could reach it
                verdict, need = UNRESOLVED, np.inf
            else:
                verdict = CONTRADICTED
            ledger.add(row.dataset, "tight_audit_reaches_claim", f"{method}, ε = {row.eps:g}",
                       f"{kind} ({row.threat_model.replace('_', ' ')}): audited lower bound on ε",
                       "the tightest audit vs the claimed ε",
                       side(row.eps_lower_bound, row.eps_lower_bound, row.eps_lower_bound, np.nan, np.nan),
                       bound(row.claimed_eps), NO_DIFFERENCE, COMPUTATION, f"bound ≥ {TIGHT:g} × claim", verdict,
                       need, _tight_note(row))


def audit_claims(ledger: Ledger, audit: pd.DataFrame) -> None:
    """Both claims' rows from the concatenated audit.csv of the image datasets."""
    below_claim_rows(ledger, audit)
    tight_audit_rows(ledger, audit)
