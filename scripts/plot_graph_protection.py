#!/usr/bin/env python
"""Rule `graph_figures`: utility loss, node MIA accuracy and link-stealing AUC vs ε for the
self-supervised GNN's protected heads (PNG and PDF), from CSV only."""

import argparse

import pandas as pd

from privssl.plotting import graph_protection_figure, save_figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--utility", nargs="+", required=True, help="utility.csv of each graph")
    parser.add_argument("--mia", nargs="+", required=True, help="mia.csv of each graph")
    parser.add_argument("--links", nargs="+", required=True, help="link_protection.csv of each graph")
    parser.add_argument("--out", nargs="+", required=True, help="output files (.png, .pdf)")
    args = parser.parse_args()
    read = lambda paths: pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)  # noqa: E731
    save_figure(graph_protection_figure(read(args.utility), read(args.mia), read(args.links)), args.out)


if __name__ == "__main__":
    main()
