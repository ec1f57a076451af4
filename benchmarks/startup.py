#!/usr/bin/env python
"""Start-up cost of the workflow's processes, which is most of what the tiny DAG and `make test`
spend: a script's imports (`python scripts/X.py --help`), a process that loads the digits pool
(the first thing of every job that trains on images), and a Snakemake start (a dry run of the
tiny config, which parses the Snakefile and asks every script's library code). With `--baseline
DIR` (another checkout, e.g. `git worktree add /tmp/base <rev>`), each measurement alternates
between the two trees, run after run, so that both see the same load; the figures are medians of
`--runs` runs and the ratio baseline / this tree.

    python benchmarks/startup.py --runs 5 --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = ["merge_csv", "make_table2", "plot_figures", "claims_ledger", "lira", "tune_head"]
# what every job that reads the image pool does first (pretrain, encode, the Semi-Leak and
# contrastive targets, DPCL, DPAdapter): import torch and load the default's digits
LOAD_DIGITS = "from privssl.data.images import load_pool; load_pool('digits', '.')"


def seconds(command: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def commands(tree: Path, workdir: Path, config: Path) -> dict[str, list[str]]:
    found = {f"{name}.py --help": [sys.executable, str(tree / "scripts" / f"{name}.py"), "--help"]
             for name in SCRIPTS}
    found["load_pool('digits')"] = [sys.executable, "-c", LOAD_DIGITS]
    found["snakemake -n (tiny config)"] = [sys.executable, "-m", "snakemake", "-n", "--snakefile",
                                           str(tree / "Snakefile"), "--directory", str(workdir), "--configfile",
                                           str(config)]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout, timed alternately with this one")
    args = parser.parse_args()
    trees = {"this": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch, "tiny.yaml")
        tiny = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
        config.write_text(yaml.safe_dump({**tiny, "data_root": str(Path(scratch, "data"))}))
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.runs):
            for label, tree in trees.items():
                # each tree's own library first on the path: its scripts import the privssl beside them
                env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": "1"}
                for name, command in commands(tree, Path(scratch, label), config).items():
                    times.setdefault((name, label), []).append(seconds(command, tree, env))
    print("command,tree,median_s,runs" + (",ratio_baseline_over_this" if args.baseline else ""))
    for name in commands(REPO, REPO, REPO):
        this = statistics.median(times[(name, "this")])
        row = f"{name},this,{this:.3f},{args.runs}"
        if args.baseline:
            base = statistics.median(times[(name, "baseline")])
            print(row + f",{base / this:.2f}")
            print(f"{name},baseline,{base:.3f},{args.runs},")
        else:
            print(row)


if __name__ == "__main__":
    main()
