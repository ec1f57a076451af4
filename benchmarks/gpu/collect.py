"""The per-job wall times of a finished run, from the `benchmark:` files Snakemake writes under
results/ (one TSV per job: `s` is its wall time): one CSV row per job, named by its file's path
below results/. With --against, the same jobs of another run (the CPU baseline) beside them and
the ratio of their wall times; with --timings, one row per rule appended to benchmarks/timings.csv
naming the device.

    python benchmarks/gpu/collect.py results OUT/rule_times.csv
    python benchmarks/gpu/collect.py results OUT/ratios.csv --against cpu_rule_times.csv
"""

from __future__ import annotations

import argparse
import csv
import datetime
import subprocess
from pathlib import Path

FIELDS = ["job", "wall_s", "max_rss_mb", "cpu_time_s"]


def job_times(results: Path) -> list[dict]:
    """One row per benchmark TSV under `results`: its job name (the path below results/, without
    `benchmarks/` and the suffix) and its wall time, peak RSS and CPU time."""
    rows = []
    for tsv in sorted(results.rglob("benchmarks/**/*.tsv")):
        with open(tsv) as handle:
            record = next(csv.DictReader(handle, delimiter="\t"))
        job = tsv.relative_to(results).with_suffix("").as_posix().replace("benchmarks/", "")
        rows.append({"job": job, "wall_s": float(record["s"]), "max_rss_mb": record["max_rss"],
                     "cpu_time_s": record["cpu_time"]})
    if not rows:
        raise SystemExit(f"no benchmark files under {results}/**/benchmarks/: did the run start?")
    return rows


def with_ratios(rows: list[dict], baseline: list[dict]) -> list[dict]:
    """`rows` with the baseline's wall time of the same job and baseline / this (the speed-up);
    jobs of only one run get an empty ratio."""
    base = {row["job"]: float(row["wall_s"]) for row in baseline}
    out = []
    for row in rows:
        before = base.get(row["job"])
        out.append({**row, "baseline_wall_s": "" if before is None else before,
                    "speedup": "" if before is None else round(before / row["wall_s"], 3)})
    return out


def append_timings(rows: list[dict], timings: Path, device: str, config: str, commit: str | None,
                   idle: str) -> None:
    """One timings.csv row per job of this run (the schema of benchmarks/timings.csv); `commit`
    None: HEAD's."""
    if commit is None:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    with open(timings, "a", newline="") as handle:
        writer = csv.writer(handle)
        for row in rows:
            ratio = f"; {row['speedup']}x the 2-core CPU's {row['baseline_wall_s']} s" if row.get("speedup") else ""
            writer.writerow([datetime.date.today().isoformat(), f"snakemake --configfile {config} job {row['job']}",
                             commit, 1, round(row["wall_s"], 2), "", "", idle, "", f"on {device}{ratio}"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--against", type=Path, help="rule_times.csv of the baseline run")
    parser.add_argument("--timings", type=Path, help="append to this timings.csv")
    parser.add_argument("--device", default="", help="the device's name, for --timings")
    parser.add_argument("--config", default="configs/gpu-smoke.yaml")
    parser.add_argument("--commit", help="the measured tree's commit, for --timings (default: HEAD's; '' unknown)")
    parser.add_argument("--idle", default="unknown", choices=["yes", "no", "unknown"], help="for --timings")
    args = parser.parse_args()
    rows = job_times(args.results)
    if args.against:
        with open(args.against) as handle:
            rows = with_ratios(rows, list(csv.DictReader(handle)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    if args.timings:
        append_timings(rows, args.timings, args.device, args.config, args.commit, args.idle)
    print(f"{len(rows)} jobs, {sum(r['wall_s'] for r in rows):.0f} s of job wall time: {args.out}")


if __name__ == "__main__":
    main()
