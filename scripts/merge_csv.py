#!/usr/bin/env python
"""Concatenate tidy CSV files with the same columns into one (e.g. all mechanisms of a dataset)."""

import argparse

import pandas as pd

from privssl.io import atomic_write_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("parts", nargs="+", help="CSV files to concatenate, in order")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    frames = [pd.read_csv(p) for p in args.parts]
    columns = list(frames[0].columns)
    for path, frame in zip(args.parts, frames):
        if list(frame.columns) != columns:
            raise SystemExit(f"{path} has columns {list(frame.columns)}, expected {columns}")
    atomic_write_csv(pd.concat(frames, ignore_index=True), args.out)


if __name__ == "__main__":
    main()
