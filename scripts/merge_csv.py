#!/usr/bin/env python
"""Concatenate tidy CSV files into one (e.g. all release methods of a dataset). Every part must
have the columns that all parts share at least (a method may add its own, e.g. DP-SGD's
accounting); a column a part lacks is left empty in its rows."""

import argparse

import pandas as pd

from privssl.artefacts import read_table
from privssl.io import atomic_write_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("parts", nargs="+", help="CSV files to concatenate, in order")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    frames = [read_table(p) for p in args.parts]  # whole files only; the consumers check the values
    core = min((list(f.columns) for f in frames), key=len)
    for path, frame in zip(args.parts, frames):
        missing = [c for c in core if c not in frame.columns]
        if missing:
            raise SystemExit(f"{path} lacks columns {missing} that other parts have (expected at least {core})")
    atomic_write_csv(pd.concat(frames, ignore_index=True), args.out)


if __name__ == "__main__":
    main()
