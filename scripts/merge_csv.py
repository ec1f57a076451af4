#!/usr/bin/env python
"""Concatenate tidy CSV files of one table kind into one (e.g. all release methods of a dataset).
Every part is checked as its readers check it (columns, values, the relations between them) and,
with --expect, against the config's grid of its rows, so that a part cut short or copied from
another run is refused here, naming the part, instead of being merged. A column a part lacks (a
method may add its own, e.g. DP-SGD's accounting) is left empty in its rows."""

import argparse

import pandas as pd

from privssl.artefacts.audits import AUDIT_TABLE
from privssl.artefacts.graphs import LINK_PROTECTION_TABLE
from privssl.artefacts.image import LIRA_TABLE, MIA_TABLE, UTILITY_TABLE
from privssl.artefacts.tables import expected_of
from privssl.cli import expect_argument
from privssl.io import atomic_write_csv, script_logger

# the tables merged from parts (their declarations name the parts and the merged file)
MERGED = (UTILITY_TABLE, MIA_TABLE, LIRA_TABLE, AUDIT_TABLE, LINK_PROTECTION_TABLE)
TABLES = {table.name: table for table in MERGED}
assert len(TABLES) == len(MERGED), "two merged tables share a name: merge_csv --table could not tell them apart"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("parts", nargs="+", help="CSV files to concatenate, in order")
    parser.add_argument("--table", required=True, choices=sorted(TABLES), help="the kind of table of every part")
    parser.add_argument("--out", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("merge_csv")  # an input error in one line
    table = TABLES[args.table]
    grids = [expected_of(args.expect, p) for p in args.parts]
    atomic_write_csv(pd.concat([table.load(p, g) for p, g in zip(args.parts, grids)], ignore_index=True), args.out)


if __name__ == "__main__":
    main()
