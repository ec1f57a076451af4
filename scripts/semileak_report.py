#!/usr/bin/env python
"""Rule `semileak_report`: thesis Ch. 3's claims (A_DA above the baselines, no over-fitting, the JS
distance rising with the AUC, the views and similarity ablations, the defences) beside the measured
metrics of every dataset, with 95 % intervals and a verdict per claim (CSV and Markdown), and the
three figures: the attacks (Fig. 3.3), the training steps (Fig. 3.4) and the ablations with the
defences (Figs. 3.5-3.6, Table 3.4), PNG and PDF each."""

import argparse

from privssl.artefacts.claims import THESIS_SEMILEAK
from privssl.artefacts.semileak import load_semileak_metrics
from privssl.artefacts.tables import load_csv_file
from privssl.cli import expect_argument
from privssl.io import atomic_path, atomic_write_csv, script_logger
from privssl.reports.plotting import save_figure
from privssl.reports.semileak_plots import ablations_figure, attacks_figure, steps_figure
from privssl.reports.semileak_report import claims_table, markdown
from privssl.reports.semileak_trend import steps_trend, trend_markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metrics", nargs="+", required=True, help="results/{dataset}/semileak/metrics.csv")
    parser.add_argument("--scores", nargs="+", required=True,
                        help="results/{dataset}/semileak/scores.parquet, in the order of --metrics")
    parser.add_argument("--thesis", required=True, help="resources/thesis_semileak.csv")
    parser.add_argument("--early-stopping", type=int, required=True, help="the early-stopping checkpoint step")
    parser.add_argument("--views", type=int, required=True, help="A_DA's default number of views K")
    parser.add_argument("--similarity", required=True, help="A_DA's default similarity function")
    parser.add_argument("--fig-attacks", nargs="+", required=True, metavar="PATH", help="PNG and/or PDF")
    parser.add_argument("--fig-steps", nargs="+", required=True, metavar="PATH", help="PNG and/or PDF")
    parser.add_argument("--fig-ablations", nargs="+", required=True, metavar="PATH", help="PNG and/or PDF")
    parser.add_argument("--csv", required=True)
    parser.add_argument("--md", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("semileak_report")  # an input error in one line
    if len(args.scores) != len(args.metrics):
        parser.error(f"--scores: {len(args.scores)} files for {len(args.metrics)} --metrics files (allowed: one each)")
    metrics = load_semileak_metrics(args.metrics, args.scores, args.expect)
    table = claims_table(metrics, load_csv_file(args.thesis, THESIS_SEMILEAK), args.early_stopping, args.views,
                         args.similarity)
    atomic_write_csv(table, args.csv)
    with atomic_path(args.md) as tmp:
        tmp.write_text(markdown(table) + trend_markdown(steps_trend(metrics)))
    save_figure(attacks_figure(metrics), args.fig_attacks)
    save_figure(steps_figure(metrics, args.early_stopping), args.fig_steps)
    save_figure(ablations_figure(metrics, args.early_stopping), args.fig_ablations)


if __name__ == "__main__":
    main()
