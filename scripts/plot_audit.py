#!/usr/bin/env python
"""Rule `audit_figures`: Fig. 4 (log-log ROC of the strongest attack per method at a few ε) and
Fig. 5 (claimed ε against the audited lower bound) from lira.csv, roc.csv.gz and audit.csv; LiRA
against RMIA at 1, 2, 4, … reference heads (figure and Markdown table) from references.csv."""

import argparse

from privssl.artefacts.image import AUDIT, LIRA, LIRA_REFERENCES, ROC
from privssl.artefacts.tables import load_csv_files
from privssl.cli import expect_argument
from privssl.io import atomic_path, script_logger
from privssl.reports.audit_plots import figure4, figure5, figure_references, references_markdown
from privssl.reports.plotting import save_figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lira", nargs="+", required=True, help="lira.csv of each dataset")
    parser.add_argument("--roc", nargs="+", required=True, help="roc.csv.gz of each dataset")
    parser.add_argument("--audit", nargs="+", required=True, help="audit.csv of each dataset")
    parser.add_argument("--references", nargs="+", required=True, help="attack/lira/references.csv of each dataset")
    parser.add_argument("--fig4", nargs="+", required=True, help="output files of Fig. 4 (.png, .pdf)")
    parser.add_argument("--fig5", nargs="+", required=True, help="output files of Fig. 5 (.png, .pdf)")
    parser.add_argument("--fig-references", nargs="+", required=True, help="output files of the references figure")
    parser.add_argument("--md-references", required=True, help="output: the references table (Markdown)")
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("plot_audit")  # an input error in one line
    lira, roc, audit = (load_csv_files(paths, schema, args.expect)
                         for paths, schema in ((args.lira, LIRA), (args.roc, ROC), (args.audit, AUDIT)))
    save_figure(figure4(lira, roc), args.fig4)
    save_figure(figure5(audit), args.fig5)
    references = load_csv_files(args.references, LIRA_REFERENCES, args.expect)
    save_figure(figure_references(references), args.fig_references)
    with atomic_path(args.md_references) as tmp:
        tmp.write_text(references_markdown(references))


if __name__ == "__main__":
    main()
