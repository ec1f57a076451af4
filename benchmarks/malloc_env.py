#!/usr/bin/env python
"""One job's command with and without the malloc settings of privssl.job_env: wall time, user and
system CPU, minor page faults and peak RSS, medians of alternating runs, and whether the two
produce the same output bytes.

    python benchmarks/malloc_env.py --runs 3 --output OUT -- python scripts/semileak_train.py … --models OUT

The command must write OUT (compared by SHA-256 between the two settings); each run's environment
is this process's with every MALLOC_* variable removed, then (for the second setting) the
settings added."""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from privssl.job_env import MALLOC_SETTINGS  # noqa: E402


def run(command: list[str], env: dict, output: Path) -> dict:
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"the command failed (wait status {status}): {' '.join(command)}")
    return {"wall_s": wall, "user_s": usage.ru_utime, "sys_s": usage.ru_stime, "minor_faults": usage.ru_minflt,
            "peak_rss_mb": usage.ru_maxrss / 1024, "sha256": hashlib.sha256(output.read_bytes()).hexdigest()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", type=Path, required=True, help="a file the command writes")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.runs < 1:
        parser.error("give --runs >= 1 and the command after --")
    bare = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    settings = {"glibc default": bare, "privssl.job_env": {**bare, **MALLOC_SETTINGS}}
    results: dict[str, list[dict]] = {name: [] for name in settings}
    for _ in range(args.runs):  # alternating, so that drift of the machine hits both alike
        for name, env in settings.items():
            results[name].append(run(command, env, args.output))
    medians = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "sha256"}
               for name, rows in results.items()}
    for name, m in medians.items():
        print(f"{name:16s} " + "  ".join(f"{k} {v:.4g}" for k, v in m.items()))
    base, new = medians["glibc default"], medians["privssl.job_env"]
    print("ratio (job_env / default): " + "  ".join(f"{k} {new[k] / base[k]:.3f}" for k in base if base[k]))
    digests = {r["sha256"] for rows in results.values() for r in rows}
    print(f"outputs identical across all {2 * args.runs} runs: {len(digests) == 1}")


if __name__ == "__main__":
    main()
