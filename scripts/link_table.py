#!/usr/bin/env python
"""Rule `link_table`: every link-stealing row in one tidy CSV, the mean ± std table beside the
thesis's numbers (CSV and Markdown), and the figure (PNG and PDF), from CSV only."""

import argparse

from privssl.artefacts.graphs import LINK_ROWS
from privssl.artefacts.tables import load_csv_files
from privssl.cli import expect_argument
from privssl.graphs.link_report import headline, markdown, summarise
from privssl.io import atomic_path, atomic_write_csv, script_logger
from privssl.reports.plotting import link_stealing_figure, save_figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--parts", nargs="+", required=True, help="attacks.csv and transfer_*.csv files")
    parser.add_argument("--rows", required=True, help="output: every row (.csv)")
    parser.add_argument("--csv", required=True, help="output: mean ± std per cell with the thesis's AUC (.csv)")
    parser.add_argument("--md", required=True, help="output: the headline table (.md)")
    parser.add_argument("--figure", nargs="+", required=True, help="output figure files (.png, .pdf)")
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("link_table")  # an input error in one line
    rows = load_csv_files(args.parts, LINK_ROWS, args.expect)
    summary = summarise(rows)
    atomic_write_csv(rows, args.rows)
    atomic_write_csv(summary, args.csv)
    table = headline(summary)
    with atomic_path(args.md) as tmp:
        tmp.write_text(markdown(table))
    save_figure(link_stealing_figure(table), args.figure)


if __name__ == "__main__":
    main()
