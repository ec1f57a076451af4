#!/usr/bin/env python
"""Concatenate tidy CSV files of one table kind into one (e.g. all release methods of a dataset).
Every part is checked as its readers check it (columns, values, the relations between them) and,
with --expect, against the config's grid of its rows, so that a part cut short or copied from
another run is refused here, naming the part, instead of being merged. A column a part lacks (a
method may add its own, e.g. DP-SGD's accounting) is left empty in its rows."""

import argparse

import pandas as pd

from privssl.artefacts.graphs import LINK_PROTECTION
from privssl.artefacts.image import AUDIT, LIRA, MIA, UTILITY
from privssl.artefacts.tables import expected_of, load_csv_file
from privssl.cli import expect_argument
from privssl.io import atomic_write_csv, script_logger

TABLES = {"utility": UTILITY, "mia": MIA, "lira": LIRA, "audit": AUDIT, "link_protection": LINK_PROTECTION}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("parts", nargs="+", help="CSV files to concatenate, in order")
    parser.add_argument("--table", required=True, choices=sorted(TABLES), help="the kind of table of every part")
    parser.add_argument("--out", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("merge_csv")  # an input error in one line
    schema = TABLES[args.table]
    grids = [expected_of(args.expect, p) for p in args.parts]
    atomic_write_csv(pd.concat([load_csv_file(p, schema, g) for p, g in zip(args.parts, grids)], ignore_index=True),
                     args.out)


if __name__ == "__main__":
    main()
