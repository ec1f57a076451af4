"""The claims ledger of the run from its validated sources (privssl.claim_sources loads them),
shared by rule `claims` (which writes tables/claims.*) and rule `digest`, which builds every
table again from its sources rather than read another rule's Markdown, so that a table edited or
cut after it was written cannot reach the digest."""

from __future__ import annotations

import pandas as pd

from privssl.accounting.dpcl import paper_settings_rows
from privssl.reports import claims_ledger
from privssl.reports.audit_claims import audit_claims


def ledger(catalogue: pd.DataFrame, utility: pd.DataFrame | None = None, mia: pd.DataFrame | None = None,
           dpcl_paper: bool = False, dpadapter: pd.DataFrame | None = None,
           contrastive_claims: pd.DataFrame | None = None, semileak_claims: pd.DataFrame | None = None,
           audit: pd.DataFrame | None = None, lira: pd.DataFrame | None = None) -> pd.DataFrame:
    """The claims ledger (privssl.reports.claims_ledger) of whatever the run measured: the ALM and
    DPCL claims from the image datasets' utility and MIA tables, the DPCL paper's noise multipliers,
    DPAdapter's from its results, thesis Ch. 4's and Ch. 3's from their reports' claims tables, the
    releases' guarantees from the audits, the ALM claims also by the strongest attack of lira.csv;
    every other claim of the catalogue as `not tested`."""
    table = claims_ledger.Ledger(catalogue)
    if utility is not None:
        claims_ledger.alm_claims(table, utility, mia, lira)
        claims_ledger.dpcl_claims(table, utility)
    if dpcl_paper:
        claims_ledger.dpcl_accounting_claims(table, paper_settings_rows())
    if dpadapter is not None:
        claims_ledger.dpadapter_claims(table, dpadapter)
    if contrastive_claims is not None:
        claims_ledger.contrastive_claims(table, contrastive_claims)
    if semileak_claims is not None:
        claims_ledger.semileak_claims(table, semileak_claims)
    if audit is not None:
        audit_claims(table, audit)
    table.add_not_tested()
    return table.frame()
