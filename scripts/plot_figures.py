#!/usr/bin/env python
"""Rule `figures`: the paper's Fig. 1 and Fig. 2 from the utility and MIA CSVs (PNG and PDF)."""

import argparse

import pandas as pd

from privssl.plotting import figure1, figure2, save_figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--utility", nargs="+", required=True, help="utility.csv of each dataset")
    parser.add_argument("--mia", nargs="+", required=True, help="mia.csv of each dataset")
    parser.add_argument("--fig1", nargs="+", required=True, help="output files of Fig. 1 (.png, .pdf)")
    parser.add_argument("--fig2", nargs="+", required=True, help="output files of Fig. 2 (.png, .pdf)")
    args = parser.parse_args()
    utility = pd.concat([pd.read_csv(p) for p in args.utility], ignore_index=True)
    mia = pd.concat([pd.read_csv(p) for p in args.mia], ignore_index=True)
    save_figure(figure1(utility), args.fig1)
    save_figure(figure2(utility, mia), args.fig2)


if __name__ == "__main__":
    main()
