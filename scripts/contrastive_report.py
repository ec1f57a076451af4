#!/usr/bin/env python
"""Rule `contrastive_report`: thesis Ch. 4's three claims (membership, attribute, Talos) beside the
measured metrics of every dataset, pooled over repeats with 95 % intervals and a verdict per
comparison (CSV and Markdown), and the two figures: the privacy of each model kind, and Talos
against its adversarial factor λ (PNG and PDF each)."""

import argparse

from privssl.artefacts.claims import THESIS_CLAIMS
from privssl.artefacts.contrastive import load_contrastive
from privssl.artefacts.tables import load_csv_file
from privssl.cli import expect_argument
from privssl.io import atomic_path, atomic_write_csv, script_logger
from privssl.reports.contrastive_plots import privacy_figure, talos_lambda_figure
from privssl.reports.contrastive_report import claims_table, markdown
from privssl.reports.plotting import save_figure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metrics", nargs="+", required=True, help="results/{dataset}/contrastive/metrics.csv")
    parser.add_argument("--scores", nargs="+", required=True,
                        help="results/{dataset}/contrastive/scores.parquet, in the order of --metrics")
    parser.add_argument("--guesses", nargs="+", required=True,
                        help="results/{dataset}/contrastive/attribute_guesses.parquet, in the order of --metrics")
    parser.add_argument("--thesis", required=True, help="resources/thesis_contrastive.csv")
    parser.add_argument("--fig-privacy", nargs="+", required=True, metavar="PATH", help="PNG and/or PDF")
    parser.add_argument("--fig-lambda", nargs="+", required=True, metavar="PATH", help="PNG and/or PDF")
    parser.add_argument("--csv", required=True)
    parser.add_argument("--md", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("contrastive_report")  # an input error in one line
    for option, files in (("--scores", args.scores), ("--guesses", args.guesses)):
        if len(files) != len(args.metrics):
            parser.error(f"{option}: {len(files)} files for {len(args.metrics)} --metrics files (allowed: one each)")
    metrics = load_contrastive(args.metrics, args.scores, args.guesses, args.expect)
    table = claims_table(metrics, load_csv_file(args.thesis, THESIS_CLAIMS))
    atomic_write_csv(table, args.csv)
    with atomic_path(args.md) as tmp:
        tmp.write_text(markdown(table))
    save_figure(privacy_figure(metrics), args.fig_privacy)
    save_figure(talos_lambda_figure(metrics), args.fig_lambda)


if __name__ == "__main__":
    main()
