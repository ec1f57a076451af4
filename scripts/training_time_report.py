#!/usr/bin/env python
"""Rule `training_time_report`: Fig. `fig_training_time_dp` (test accuracy and membership
inference vs ε: ALM, the certified releases and the DP-SGD head against DPCL and DPAdapter), the
DPAdapter table with the paper's Table 1 claim, and the DPCL accounting table with the paper's
settings (PNG, PDF, CSV, Markdown)."""

import argparse
from pathlib import Path

import pandas as pd

from privssl.accounting.dpcl import paper_settings_rows
from privssl.artefacts.image import UTILITY, load_image_splits, load_mia
from privssl.artefacts.tables import load_csv_files
from privssl.artefacts.training_time import DPADAPTER_RESULTS, DPCL_ACCOUNTING
from privssl.cli import expect_argument, mia_arguments
from privssl.io import atomic_write_bytes, atomic_write_csv, script_logger
from privssl.reports.plotting import save_figure
from privssl.reports.training_time_report import (
    accounting_markdown,
    dpadapter_markdown,
    dpadapter_table,
    dpadapter_verdicts,
    figure,
)


def write_markdown(text: str, path: str) -> None:
    atomic_write_bytes(text.encode(), path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--utility", nargs="+", required=True, help="utility.csv of each image dataset")
    mia_arguments(parser, "each image dataset")
    parser.add_argument("--splits", nargs="+", required=True, help="splits.json of each image dataset (|test|)")
    parser.add_argument("--dpadapter", nargs="*", default=[], help="dpadapter/results.csv of each dataset")
    parser.add_argument("--accounting", nargs="*", default=[], help="dpcl/accounting.csv of each dataset")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--figure", nargs="+", required=True, help="output files of the figure (.png, .pdf)")
    parser.add_argument("--dpadapter-table", nargs="*", default=[], help="output .csv and .md")
    parser.add_argument("--accounting-table", nargs="*", default=[], help="output .csv and .md")
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("training_time_report")  # an input error in one line
    for given, out, name in ((args.dpadapter, args.dpadapter_table, "dpadapter"),
                             (args.accounting, args.accounting_table, "accounting")):
        if bool(given) != bool(out) or (out and [Path(p).suffix for p in out] != [".csv", ".md"]):
            parser.error(f"--{name} needs --{name}-table CSV.md outputs and vice versa, got {given} -> {out}")
    utility, mia = load_csv_files(args.utility, UTILITY, args.expect), load_mia(args.mia, args.mia_scores, args.expect)
    n_test = {}
    for path in args.splits:
        splits = load_image_splits(path)
        n_test[splits["dataset"]] = len(splits["splits"]["test"])
    save_figure(figure(utility, mia, n_test), args.figure)
    if args.dpadapter:
        results = load_csv_files(args.dpadapter, DPADAPTER_RESULTS, args.expect)
        table = dpadapter_table(results)
        atomic_write_csv(table, args.dpadapter_table[0])
        write_markdown(dpadapter_markdown(table, dpadapter_verdicts(results)), args.dpadapter_table[1])
    if args.accounting:
        ours = load_csv_files(args.accounting, DPCL_ACCOUNTING, args.expect)
        paper = pd.DataFrame(paper_settings_rows(delta=args.delta))
        atomic_write_csv(pd.concat([ours.assign(source="this run"), paper.assign(source="paper settings")],
                                   ignore_index=True), args.accounting_table[0])
        write_markdown(accounting_markdown(ours, paper), args.accounting_table[1])


if __name__ == "__main__":
    main()
