#!/usr/bin/env python
"""What reading the MIA rows' per-record decisions from the attacks' calls costs a reader of
mia.csv (figures, Table 2, the ledger, the digest, the training-time report: six rules).

The baseline, run beside it: the same rows with their decisions packed in a `decisions` cell of
mia.csv (the layout before issue 51), loaded with the MIA schema plus that cell's check. The
change: mia.csv without the cell, each row's decisions rebuilt from the `called_member` column of
every attack/scores_<target>.parquet (artefacts.image.load_mia: the score files' schema and
threshold checks, the pairing by key, the accuracy check). Both give every row's packed cell;
this script asserts they are equal, then reports the median wall time of `--repeats` loads of
each, alternating, and the peak RSS of one load of each in a process of its own (tracemalloc
would miss pyarrow's buffers).

    python benchmarks/decision_loading.py --old results_old/fashion_mnist/mia.csv \
        --new results/fashion_mnist [--repeats 5]
"""

from __future__ import annotations

import argparse
import glob
import resource
import statistics
import subprocess
import sys
import time

import pandas as pd

from privssl.artefacts.image import MIA, MIA_KEY, load_mia
from privssl.artefacts.specs import Decisions
from privssl.artefacts.tables import load_csv_files


def loaders(old: str, new: str, scores: list[str]) -> dict:
    packed = {**MIA, "decisions": Decisions(("n_members", "n_nonmembers"))}
    return {"before": lambda: load_csv_files([old], packed),
            "after": lambda: load_mia([f"{new}/mia.csv"], scores)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="a mia.csv with packed decisions cells (a run before the change)")
    parser.add_argument("--new", required=True, help="results/<dataset> of a run after it (mia.csv, attack/scores_*)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=("before", "after"), help="load once and print the process's peak RSS")
    args = parser.parse_args()
    scores = sorted(glob.glob(f"{args.new}/attack/scores_*.parquet"))
    if not scores:
        parser.error(f"--new {args.new}: no attack/scores_*.parquet there")
    loads = loaders(args.old, args.new, scores)
    if args.only:
        loads[args.only]()
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return
    # each variant's peak memory in a process of its own, started before this one loads anything:
    # Linux keeps a process's peak RSS across fork and exec, so a child of a large parent reports
    # the parent's (the interpreter and the imports, ~100 MB, are in both figures)
    rss = {name: float(subprocess.run([sys.executable, __file__, "--old", args.old, "--new", args.new, "--only", name],
                                      capture_output=True, text=True, check=True).stdout.strip())
           for name in loads}
    before, after = loads["before"](), loads["after"]()
    paired = before.merge(after, on=list(MIA_KEY), suffixes=("_before", "_after"), validate="one_to_one")
    same = int((paired.decisions_before == paired.decisions_after).sum())
    lines = sum(len(pd.read_parquet(p, columns=["score"])) for p in scores)
    print(f"rows: {len(before)} before, {len(after)} after, {len(paired)} paired; decisions equal on {same}; "
          f"{len(scores)} score files, {lines} score lines")
    if same != len(before) or len(after) != len(before):
        raise SystemExit("the two layouts give other decisions")
    times = {name: [] for name in loads}
    for _ in range(args.repeats):  # alternating: the machine's drift falls on both
        for name, load in loads.items():
            start = time.perf_counter()
            load()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["before"])
    for name, values in times.items():
        print(f"{name:6s} median {statistics.median(values):6.2f} s over {len(values)} loads "
              f"(ratio {statistics.median(values) / base:5.2f}); peak RSS of one load {rss[name]:6.0f} MB")


if __name__ == "__main__":
    main()
