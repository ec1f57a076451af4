#!/usr/bin/env python
"""Rule `graph_figures`: utility loss, node MIA accuracy and link-stealing AUC vs ε for the
self-supervised GNN's protected heads (PNG and PDF), from CSV only."""

import argparse

from privssl.artefacts.graphs import LINK_PROTECTION
from privssl.artefacts.image import UTILITY, load_mia
from privssl.artefacts.tables import load_csv_files
from privssl.cli import expect_argument, mia_arguments
from privssl.io import script_logger
from privssl.reports.plotting import graph_protection_figure, save_figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--utility", nargs="+", required=True, help="utility.csv of each graph")
    mia_arguments(parser, "each graph")
    parser.add_argument("--links", nargs="+", required=True, help="link_protection.csv of each graph")
    parser.add_argument("--out", nargs="+", required=True, help="output files (.png, .pdf)")
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("plot_graph_protection")  # an input error in one line
    figure = graph_protection_figure(load_csv_files(args.utility, UTILITY, args.expect),
                                     load_mia(args.mia, args.mia_scores, args.expect),
                                     load_csv_files(args.links, LINK_PROTECTION, args.expect))
    save_figure(figure, args.out)


if __name__ == "__main__":
    main()
