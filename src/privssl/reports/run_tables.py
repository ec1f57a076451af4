"""The tables of the run that a report rule writes and the digest shows, each built from its
validated sources by one function here: rule `claims` and rule `table1` write them to tables/,
and rule `digest` builds them again from the same sources rather than read another rule's
Markdown, so that a table edited or cut after it was written cannot reach the digest."""

from __future__ import annotations

import pandas as pd

from privssl.accounting.dpcl import paper_settings_rows
from privssl.reports import claims_ledger


def ledger(catalogue: pd.DataFrame, utility: pd.DataFrame | None = None, mia: pd.DataFrame | None = None,
           dpcl_paper: bool = False, dpadapter: pd.DataFrame | None = None,
           contrastive_claims: pd.DataFrame | None = None, semileak_claims: pd.DataFrame | None = None) -> pd.DataFrame:
    """The claims ledger (privssl.reports.claims_ledger) of whatever the run measured: the ALM and
    DPCL claims from the image datasets' utility and MIA tables, the DPCL paper's noise multipliers,
    DPAdapter's from its results, and thesis Ch. 4's and Ch. 3's from their reports' claims tables;
    every other claim of the catalogue as `not tested`."""
    table = claims_ledger.Ledger(catalogue)
    if utility is not None:
        claims_ledger.alm_claims(table, utility, mia)
        claims_ledger.dpcl_claims(table, utility)
    if dpcl_paper:
        claims_ledger.dpcl_accounting_claims(table, paper_settings_rows())
    if dpadapter is not None:
        claims_ledger.dpadapter_claims(table, dpadapter)
    if contrastive_claims is not None:
        claims_ledger.contrastive_claims(table, contrastive_claims)
    if semileak_claims is not None:
        claims_ledger.semileak_claims(table, semileak_claims)
    table.add_not_tested()
    return table.frame()


def table1(records: list[tuple[str, dict]]) -> pd.DataFrame:
    """The paper's Table 1 from each dataset's sensitivity.json (as loaded by
    privssl.artefacts.load_sensitivity): |D|, |d|, how Δ was sampled, m, k, ρ, γ, Δ1, Δ2 and the
    guarantee it supports."""
    return pd.DataFrame([{"dataset": dataset, "|D|": record["pretrain_size"], "|d|": record["finetune_size"],
                          "sampling": record["sampling"], "pool": record.get("pool", {}).get("size"),
                          "m": record["m"], "k": record["k"], "rho": record.get("rho"), "gamma": record.get("gamma"),
                          "delta1": record["delta1"], "delta2": record["delta2"],
                          "guarantee_kind": record["guarantee_kind"], "statement": record["statement"]}
                         for dataset, record in records])


def table1_markdown(table: pd.DataFrame) -> str:
    def optional(value, show) -> str:  # a population-sampler field, absent for the other samplers
        return "" if value is None or pd.isna(value) else show(value)

    lines = ["| dataset | \\|D\\| | \\|d\\| | sampling | pool | m | k | ρ | γ | Δ1 | Δ2 | guarantee |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in table.to_dict("records"):
        lines.append(f"| {r['dataset']} | {r['|D|']} | {r['|d|']} | {r['sampling']} | {optional(r['pool'], lambda v: str(int(v)))} "
                     f"| {r['m']} | {r['k']} | {optional(r['rho'], '{:g}'.format)} | {optional(r['gamma'], '{:g}'.format)} "
                     f"| {r['delta1']:.6g} | {r['delta2']:.6g} | {r['guarantee_kind']} |")
    notes = "\n".join(f"- {r['dataset']}: {r['statement']}" for r in table.to_dict("records"))
    return "\n".join(lines) + "\n\n" + notes + "\n"
