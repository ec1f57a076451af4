"""The paper's Table 1 from each dataset's sensitivity.json, for rule `table1` and the digest."""

from __future__ import annotations

import pandas as pd


def table1(records: list[tuple[str, dict]]) -> pd.DataFrame:
    """The paper's Table 1 from each dataset's sensitivity.json (as loaded by
    privssl.artefacts.image.load_sensitivity): |D|, |d|, how Δ was sampled, m, k, ρ, γ, Δ1, Δ2 and the
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
        pool, rho, gamma = optional(r["pool"], lambda v: str(int(v))), optional(r["rho"], "{:g}".format), optional(
            r["gamma"], "{:g}".format)
        lines.append(f"| {r['dataset']} | {r['|D|']} | {r['|d|']} | {r['sampling']} | {pool} | {r['m']} | {r['k']} "
                     f"| {rho} | {gamma} | {r['delta1']:.6g} | {r['delta2']:.6g} | {r['guarantee_kind']} |")
    notes = "\n".join(f"- {r['dataset']}: {r['statement']}" for r in table.to_dict("records"))
    return "\n".join(lines) + "\n\n" + notes + "\n"
