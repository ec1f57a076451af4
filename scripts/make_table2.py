#!/usr/bin/env python
"""Rule `table2`: per dataset and release method, at target budgets ε (the grid's nearest ε),
test accuracy, utility loss, the shadow-MLP MIA accuracy and AUC, and the guarantee the release
supports; plus the non-private head (CSV and Markdown)."""

import argparse

from privssl.artefacts.image import UTILITY, load_mia
from privssl.artefacts.tables import load_csv_files
from privssl.cli import expect_argument, mia_arguments
from privssl.io import atomic_path, atomic_write_csv, script_logger
from privssl.reports.release_table import markdown, table2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--utility", nargs="+", required=True, help="utility.csv of each dataset")
    mia_arguments(parser)
    parser.add_argument("--targets", nargs="+", type=float, default=[1.0, 10.0], help="target budgets ε")
    parser.add_argument("--csv", required=True)
    parser.add_argument("--md", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("make_table2")  # an input error in one line
    table = table2(load_csv_files(args.utility, UTILITY, args.expect),
                   load_mia(args.mia, args.mia_scores, args.expect), args.targets)
    atomic_write_csv(table, args.csv)
    with atomic_path(args.md) as tmp:
        tmp.write_text(markdown(table))


if __name__ == "__main__":
    main()
