#!/usr/bin/env python
"""Rule `table1`: the paper's Table 1 (|D|, |d|, m, Δ1, Δ2 per dataset) as CSV and Markdown,
with how Δ was sampled (population pool or inside d), its order statistic k and what it supports."""

import argparse

import pandas as pd

from privssl.artefacts import expected_of, load_sensitivity
from privssl.cli import expect_argument
from privssl.io import atomic_path, atomic_write_csv, script_logger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", nargs="+", required=True)
    parser.add_argument("--sensitivity", nargs="+", required=True, help="sensitivity.json per dataset, same order")
    parser.add_argument("--csv", required=True)
    parser.add_argument("--md", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("make_table1")  # an input error in one line
    if len(args.datasets) != len(args.sensitivity):
        parser.error(f"{len(args.datasets)} datasets but {len(args.sensitivity)} sensitivity files")
    rows = []
    for dataset, path in zip(args.datasets, args.sensitivity):
        record = load_sensitivity(path, expected_of(args.expect, path))
        rows.append({"dataset": dataset, "|D|": record["pretrain_size"], "|d|": record["finetune_size"],
                     "sampling": record["sampling"], "pool": record.get("pool", {}).get("size"),
                     "m": record["m"], "k": record["k"], "rho": record.get("rho"), "gamma": record.get("gamma"),
                     "delta1": record["delta1"], "delta2": record["delta2"],
                     "guarantee_kind": record["guarantee_kind"], "statement": record["statement"]})
    table = pd.DataFrame(rows)
    atomic_write_csv(table, args.csv)
    lines = ["| dataset | \\|D\\| | \\|d\\| | sampling | pool | m | k | ρ | γ | Δ1 | Δ2 | guarantee |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        pool = "" if r["pool"] is None else r["pool"]
        rho = "" if r["rho"] is None else f"{r['rho']:g}"
        gamma = "" if r["gamma"] is None else f"{r['gamma']:g}"
        lines.append(f"| {r['dataset']} | {r['|D|']} | {r['|d|']} | {r['sampling']} | {pool} | {r['m']} | {r['k']} "
                     f"| {rho} | {gamma} | {r['delta1']:.6g} | {r['delta2']:.6g} | {r['guarantee_kind']} |")
    notes = "\n".join(f"- {r['dataset']}: {r['statement']}" for r in rows)
    with atomic_path(args.md) as tmp:
        tmp.write_text("\n".join(lines) + "\n\n" + notes + "\n")


if __name__ == "__main__":
    main()
