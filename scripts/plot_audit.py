#!/usr/bin/env python
"""Rule `audit_figures`: Fig. 4 (log-log ROC of the strongest attack per method at a few ε) and
Fig. 5 (claimed ε against the audited lower bound) from lira.csv, roc.csv.gz and audit.csv."""

import argparse

from privssl.artefacts import AUDIT, LIRA, ROC, load_csv_files
from privssl.cli import expect_argument
from privssl.io import script_logger
from privssl.reports.audit_plots import figure4, figure5
from privssl.reports.plotting import save_figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lira", nargs="+", required=True, help="lira.csv of each dataset")
    parser.add_argument("--roc", nargs="+", required=True, help="roc.csv.gz of each dataset")
    parser.add_argument("--audit", nargs="+", required=True, help="audit.csv of each dataset")
    parser.add_argument("--fig4", nargs="+", required=True, help="output files of Fig. 4 (.png, .pdf)")
    parser.add_argument("--fig5", nargs="+", required=True, help="output files of Fig. 5 (.png, .pdf)")
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("plot_audit")  # an input error in one line
    lira, roc, audit = (load_csv_files(paths, schema, args.expect)
                         for paths, schema in ((args.lira, LIRA), (args.roc, ROC), (args.audit, AUDIT)))
    save_figure(figure4(lira, roc), args.fig4)
    save_figure(figure5(audit), args.fig5)


if __name__ == "__main__":
    main()
