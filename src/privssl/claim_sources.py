"""The claim branches' files as rules `claims` and `digest` name them: their arguments (written by
rules/common.smk's `branch_arguments`), the checks between them, and the files loaded with their
schemas and the config's grids. Above both privssl.artefacts and privssl.reports in the layers of
pyproject.toml: it reads files and builds the branch reports' claims tables."""

from __future__ import annotations

import argparse

import pandas as pd

from privssl.artefacts.claims import THESIS_CLAIMS, THESIS_SEMILEAK
from privssl.artefacts.contrastive import load_contrastive
from privssl.artefacts.semileak import load_semileak_metrics
from privssl.artefacts.tables import load_csv_file, load_csv_files
from privssl.artefacts.training_time import DPADAPTER_RESULTS
from privssl.reports import contrastive_report, semileak_report


def add_branch_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of the claim branches, as rules/common.smk's `branch_arguments` writes them."""
    parser.add_argument("--catalogue", required=True, help="resources/claims.csv")
    parser.add_argument("--contrastive", nargs="*", default=[], help="contrastive/metrics.csv of each dataset")
    parser.add_argument("--contrastive-scores", nargs="*", default=[],
                        help="contrastive/scores.parquet of each dataset, in the order of --contrastive")
    parser.add_argument("--contrastive-guesses", nargs="*", default=[],
                        help="contrastive/attribute_guesses.parquet of each dataset, in the order of --contrastive")
    parser.add_argument("--contrastive-thesis", help="resources/thesis_contrastive.csv")
    parser.add_argument("--semileak", nargs="*", default=[], help="semileak/metrics.csv of each dataset")
    parser.add_argument("--semileak-scores", nargs="*", default=[],
                        help="semileak/scores.parquet of each dataset, in the order of --semileak")
    parser.add_argument("--semileak-thesis", help="resources/thesis_semileak.csv")
    parser.add_argument("--early-stopping", type=int, help="semileak.defences.early_stopping")
    parser.add_argument("--views", type=int, help="semileak.attack.views")
    parser.add_argument("--similarity", help="semileak.attack.similarity")
    parser.add_argument("--dpadapter", nargs="*", default=[], help="dpadapter/results.csv of each dataset")
    parser.add_argument("--dpcl-paper", action="store_true", help="the DPCL paper's noise multipliers' rows")


def check_branch_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.contrastive and not args.contrastive_thesis:
        parser.error("--contrastive needs --contrastive-thesis")
    if args.semileak and None in (args.semileak_thesis, args.early_stopping, args.views, args.similarity):
        parser.error("--semileak needs --semileak-thesis, --early-stopping, --views and --similarity")
    for option, files in (("--contrastive-scores", args.contrastive_scores),
                          ("--contrastive-guesses", args.contrastive_guesses)):
        if len(files) != len(args.contrastive):
            parser.error(f"{option}: {len(files)} files for {len(args.contrastive)} --contrastive files (allowed: "
                         f"one each, in the same order)")
    if len(args.semileak_scores) != len(args.semileak):
        parser.error(f"--semileak-scores: {len(args.semileak_scores)} files for {len(args.semileak)} --semileak files "
                     f"(allowed: one each, in the same order)")


def branch_tables(args: argparse.Namespace) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None]:
    """The contrastive and Semi-Leak reports' claims tables and DPAdapter's results, each from its
    files as the arguments name them (loaded with their schemas and the config's grids, `--expect`);
    None for a branch the run does not have."""
    contrastive = semileak = dpadapter = None
    if args.contrastive:
        contrastive = contrastive_report.claims_table(load_contrastive(args.contrastive, args.contrastive_scores,
                                                                       args.contrastive_guesses, args.expect),
                                                      load_csv_file(args.contrastive_thesis, THESIS_CLAIMS))
    if args.semileak:
        semileak = semileak_report.claims_table(load_semileak_metrics(args.semileak, args.semileak_scores, args.expect),
                                                load_csv_file(args.semileak_thesis, THESIS_SEMILEAK),
                                                args.early_stopping, args.views, args.similarity)
    if args.dpadapter:
        dpadapter = load_csv_files(args.dpadapter, DPADAPTER_RESULTS, args.expect)
    return contrastive, semileak, dpadapter
