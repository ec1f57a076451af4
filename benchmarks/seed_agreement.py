#!/usr/bin/env python
"""Do two runs of one config with different seeds agree as their intervals say? (issue 49)

A ledger row's 95 % interval is a statement about what a replication would find. Run the same
config twice, `--config seed=0` and `seed=1` (two clones, or the same clone moved aside), and
compare the two `tables/claims.csv`: for each row both runs judged, does the second run's estimate
land inside the first's 95 % interval, and does a verdict flip between reproduced and
contradicted? The estimate is the row's difference where it has one (the quantity its verdict is
about), else its value.

For a calibrated interval the second estimate lands inside the first's about 83 % of the time
(two independent estimates of equal variance: P(|X − Y| < 1.96 σ) with X − Y ~ N(0, 2σ²) is
2Φ(1.96/√2) − 1 = 0.834); far fewer says the intervals leave out a source of variance (a
training's luck), far more that they are wide.

    python benchmarks/seed_agreement.py RUN0/results/tables/claims.csv RUN1/results/tables/claims.csv \
        --out benchmarks/seed_agreement.csv

prints each claim's share inside and the flips, and writes one row per compared ledger row.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd
from scipy import stats

from privssl.reports.regime import FEW_TRAININGS

KEY = ["dataset", "claim", "setting"]
CALIBRATED = 2 * stats.norm.cdf(stats.norm.ppf(0.975) / math.sqrt(2)) - 1


def estimate_columns(row: pd.Series) -> tuple[float, float, float]:
    """(estimate, lo, hi): the row's difference where it has one, else its value."""
    if pd.notna(row.difference) and pd.notna(row.difference_lo):
        return row.difference, row.difference_lo, row.difference_hi
    return row.value, row.value_lo, row.value_hi


def compare(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """One row per ledger row both runs judged (no 'not tested'), with an interval of non-zero width
    in the first run, and an interval for its claim: a row about a training procedure with fewer
    than 3 trainings per arm has none (its interval counts the records of one training; the ledger
    leaves it unresolved whatever that interval says), so it is left out here and counted apart."""
    judged = [frame[(frame.verdict != "not tested") & (frame.unresolved_because != FEW_TRAININGS)].set_index(KEY)
              for frame in (first, second)]
    rows = []
    for key in judged[0].index.intersection(judged[1].index):
        a, b = judged[0].loc[key], judged[1].loc[key]
        value, lo, hi = estimate_columns(a)
        other, _, _ = estimate_columns(b)
        if not (np.isfinite([value, lo, hi, other]).all() and hi > lo):
            continue  # a computation or a bound: nothing sampled to compare
        flip = {a.verdict, b.verdict} == {"reproduced", "contradicted"}
        rows.append(dict(zip(KEY, key)) | {"first": value, "first_lo": lo, "first_hi": hi, "second": other,
                                            "inside": bool(lo <= other <= hi), "verdict_first": a.verdict,
                                            "verdict_second": b.verdict, "flip": flip})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("first", help="claims.csv of the first run (its intervals are the reference)")
    parser.add_argument("second", help="claims.csv of the second run")
    parser.add_argument("--out", default=None, help="write the per-row comparison here")
    args = parser.parse_args()
    ledgers = [pd.read_csv(path, keep_default_na=False, na_values=[""]) for path in (args.first, args.second)]
    rows = compare(*ledgers)
    few = ledgers[0][ledgers[0].unresolved_because == FEW_TRAININGS]
    print(f"left out: {len(few)} rows of the first run with fewer than 3 trainings per arm (no interval for their "
          f"claim): " + ", ".join(f"{claim} {count}" for claim, count in few.claim.value_counts().sort_index().items()))
    if rows.empty:
        raise SystemExit("seed_agreement.py: error: the two ledgers share no row with an interval")
    by_claim = rows.groupby("claim").agg(rows=("inside", "size"), inside=("inside", "sum"), flips=("flip", "sum"))
    by_claim["share"] = by_claim.inside / by_claim.rows
    print(by_claim.to_string())
    print(f"\n{int(rows.inside.sum())} of {len(rows)} rows inside the first run's interval "
          f"({rows.inside.mean():.0%}; a calibrated interval: {CALIBRATED:.0%}); "
          f"{int(rows.flip.sum())} reproduced <-> contradicted flips")
    verdicts = rows.verdict_first != rows.verdict_second
    print(f"{int(verdicts.sum())} verdicts differ: " + "; ".join(
        f"{r.claim} {r.setting} ({r.dataset}): {r.verdict_first} -> {r.verdict_second}"
        for r in rows[verdicts].itertuples()))
    if args.out:
        rows.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
