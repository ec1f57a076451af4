#!/usr/bin/env python
"""Rule `figures`: the paper's Fig. 1 (utility loss vs ε), Fig. 2 (MIA accuracy vs ε and vs utility
loss) and Fig. 3 (test accuracy vs ε, the privacy-utility frontier) from the utility and MIA CSVs
(PNG and PDF)."""

import argparse

from privssl.artefacts.image import UTILITY, load_mia
from privssl.artefacts.tables import load_csv_files
from privssl.cli import expect_argument, mia_arguments
from privssl.io import script_logger
from privssl.reports.plotting import figure1, figure2, figure3, save_figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--utility", nargs="+", required=True, help="utility.csv of each dataset")
    mia_arguments(parser)
    parser.add_argument("--fig1", nargs="+", required=True, help="output files of Fig. 1 (.png, .pdf)")
    parser.add_argument("--fig2", nargs="+", required=True, help="output files of Fig. 2 (.png, .pdf)")
    parser.add_argument("--fig3", nargs="+", required=True, help="output files of Fig. 3 (.png, .pdf)")
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("plot_figures")  # an input error in one line
    utility, mia = load_csv_files(args.utility, UTILITY, args.expect), load_mia(args.mia, args.mia_scores, args.expect)
    save_figure(figure1(utility), args.fig1)
    save_figure(figure2(utility, mia), args.fig2)
    save_figure(figure3(utility), args.fig3)


if __name__ == "__main__":
    main()
