#!/usr/bin/env python
"""The peak memory and wall time of every rule, from the benchmark TSVs of a finished run, into
benchmarks/measured_peaks.csv (what rules/resources.smk asks a scheduler for, with its margins).

    make run PRIVSSL_WARM_START=0 && python benchmarks/measure_peaks.py   # the default config, cold

A rule's peak is the largest over its jobs (datasets, graphs, wildcards). A benchmark file is
named after its rule, optionally followed by `_<wildcard>`; the longest rule name that prefixes
the file's stem is its rule."""

from __future__ import annotations

import argparse
import csv
import datetime
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
# Under the warm start (PRIVSSL_WARM_START=1, `make run`'s default) a job runs in a process forked
# from the warm-start server, outside the process tree Snakemake's benchmark measures: its file then
# holds the client's ~14 MB. Every job of this workflow imports numpy and pandas (≥ 500 MB measured).
CLIENT_ONLY_MB = 100.0


def warm_start_files(tsvs: list[Path]) -> list[Path]:
    """The benchmark files that measured a warm-start client, not its job."""
    return [tsv for tsv in tsvs if float(pd.read_csv(tsv, sep="\t").iloc[-1]["max_rss"]) < CLIENT_ONLY_MB]


def workflow_rules() -> list[str]:
    listed = subprocess.run([sys.executable, "-m", "snakemake", "--list-rules"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    # one rule per line, its docstring after it (continuation lines indented)
    return [line.split()[0] for line in listed.splitlines() if line and not line[0].isspace()]


def rule_of(stem: str, rules: list[str]) -> str | None:
    matches = [r for r in rules if stem == r or stem.startswith(f"{r}_")]
    return max(matches, key=len) if matches else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=str(REPO / "results"))
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "measured_peaks.csv"))
    args = parser.parse_args()
    tsvs = sorted(Path(args.results).glob("*/benchmarks/*.tsv"))
    client_only = warm_start_files(tsvs)
    if client_only:  # before anything is written: the peaks of the last cold run stay
        sys.exit(f"{len(client_only)} benchmark files measured the warm-start client, not the job (peak RSS under "
                 f"{CLIENT_ONLY_MB:g} MB), e.g. {client_only[0]}: measure in a cold run, `make run "
                 f"PRIVSSL_WARM_START=0` in a fresh clone (or PRIVSSL_WARM_START=0 snakemake --cores 2 "
                 f"--max-threads 1 --forceall here)")
    rules = workflow_rules()
    peaks: dict[str, dict] = {}
    for tsv in tsvs:
        rule = rule_of(tsv.stem, rules)
        if rule is None:
            print(f"skipped {tsv}: no rule of the workflow is named like it", file=sys.stderr)
            continue
        row = pd.read_csv(tsv, sep="\t").iloc[-1]
        peak = peaks.setdefault(rule, {"rule": rule, "max_rss_mb": 0.0, "s": 0.0, "jobs": 0})
        peak["max_rss_mb"] = max(peak["max_rss_mb"], round(float(row["max_rss"]), 1))
        peak["s"] = max(peak["s"], round(float(row["s"]), 1))
        peak["jobs"] += 1
    if not peaks:
        sys.exit(f"no benchmark TSV under {args.results}/*/benchmarks/: run the workflow first")
    when = datetime.date.fromtimestamp(max(p.stat().st_mtime for p in Path(args.results).glob("*/benchmarks/*.tsv")))
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["rule", "max_rss_mb", "s", "jobs", "measured"])
        writer.writeheader()
        for rule in sorted(peaks):
            writer.writerow({**peaks[rule], "measured": when.isoformat()})
    print(f"{len(peaks)} rules -> {args.out}")


if __name__ == "__main__":
    main()
