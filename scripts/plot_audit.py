#!/usr/bin/env python
"""Rule `audit_figures`: Fig. 4 (log-log ROC of the strongest attack per method at a few ε) and
Fig. 5 (claimed ε against the audited lower bound) from lira.csv, the lira rule's per-record
scores (each curve computed from its row's scores) and audit.csv; LiRA against RMIA at 1, 2, 4, …
reference heads (figure and Markdown table) from references.csv."""

import argparse

import pandas as pd

from privssl.artefacts.audits import AUDIT
from privssl.artefacts.image import LIRA, LIRA_REFERENCES, LIRA_SCORES
from privssl.artefacts.tables import expected_of, load_csv_file, load_csv_files
from privssl.cli import expect_argument
from privssl.io import InputError, atomic_path, script_logger
from privssl.reports.audit_plots import (
    figure4,
    figure5,
    figure_references,
    references_markdown,
    roc_curves,
    strongest_attacks,
)
from privssl.reports.plotting import save_figure


def strongest_curves(paths: list, strongest: pd.DataFrame, expect: dict | None) -> pd.DataFrame:
    """The ROC curves of Fig. 4's rows (`strongest`), from the scores files read one at a time: a
    file holds millions of lines, of which the figure draws a few keys. Every row needs its scores."""
    grids = [expected_of(expect, p) for p in paths]  # every path has its grid before any file is read
    curves, drawn = [], 0
    for path, grid in zip(paths, grids):
        scores = load_csv_file(path, LIRA_SCORES, grid)
        points = strongest[strongest.dataset.isin(scores.dataset.unique())
                           & strongest.method.isin(scores.method.unique())]
        if not points.empty:
            curves.append(roc_curves(scores, points))
            drawn += len(points)
    if drawn != len(strongest):
        raise InputError(f"per-record scores of {drawn} of Fig. 4's {len(strongest)} lira.csv rows; allowed: a scores "
                         f"file of every dataset and method of lira.csv")
    return pd.concat(curves, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lira", nargs="+", required=True, help="lira.csv of each dataset")
    parser.add_argument("--scores", nargs="+", required=True,
                        help="attack/lira/scores_<method>.parquet of every dataset and method of lira.csv")
    parser.add_argument("--audit", nargs="+", required=True, help="audit.csv of each dataset")
    parser.add_argument("--references", nargs="+", required=True, help="attack/lira/references.csv of each dataset")
    parser.add_argument("--fig4", nargs="+", required=True, help="output files of Fig. 4 (.png, .pdf)")
    parser.add_argument("--fig5", nargs="+", required=True, help="output files of Fig. 5 (.png, .pdf)")
    parser.add_argument("--fig-references", nargs="+", required=True, help="output files of the references figure")
    parser.add_argument("--md-references", required=True, help="output: the references table (Markdown)")
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("plot_audit")  # an input error in one line
    lira, audit = (load_csv_files(paths, schema, args.expect) for paths, schema in ((args.lira, LIRA),
                                                                                   (args.audit, AUDIT)))
    save_figure(figure4(lira, strongest_curves(args.scores, strongest_attacks(lira), args.expect)), args.fig4)
    save_figure(figure5(audit), args.fig5)
    references = load_csv_files(args.references, LIRA_REFERENCES, args.expect)
    save_figure(figure_references(references), args.fig_references)
    with atomic_path(args.md_references) as tmp:
        tmp.write_text(references_markdown(references))


if __name__ == "__main__":
    main()
