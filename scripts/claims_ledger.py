#!/usr/bin/env python
"""Rule `claims`: the claims ledger across the seeds (CSV and Markdown), one row per (claim, dataset,
setting): the ALM paper's claims from every image dataset's releases, thesis Ch. 4's and Ch. 3's
from their branches' metrics, DPCL's and DPAdapter's from the training-time releases, and the
DPCL paper's noise multipliers against its stated ε. Each input group is optional: a config
without a branch has no rows of its claims."""

import argparse

from privssl.artefacts import (
    CONTRASTIVE,
    DPADAPTER_RESULTS,
    MIA,
    PAPER_CLAIMS,
    SEMILEAK,
    THESIS_CLAIMS,
    THESIS_SEMILEAK,
    UTILITY,
    load_csv_file,
    load_csv_files,
)
from privssl.cli import expect_argument
from privssl.io import atomic_path, atomic_write_csv, script_logger
from privssl.reports import contrastive_report, run_tables, semileak_report
from privssl.reports.claims_ledger import markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--catalogue", required=True, help="resources/claims.csv")
    parser.add_argument("--utility", nargs="*", default=[], help="utility.csv of each image dataset")
    parser.add_argument("--mia", nargs="*", default=[], help="mia.csv of each image dataset")
    parser.add_argument("--contrastive", nargs="*", default=[], help="contrastive/metrics.csv of each dataset")
    parser.add_argument("--contrastive-thesis", help="resources/thesis_contrastive.csv")
    parser.add_argument("--semileak", nargs="*", default=[], help="semileak/metrics.csv of each dataset")
    parser.add_argument("--semileak-thesis", help="resources/thesis_semileak.csv")
    parser.add_argument("--early-stopping", type=int, help="semileak.defences.early_stopping")
    parser.add_argument("--views", type=int, help="semileak.attack.views")
    parser.add_argument("--similarity", help="semileak.attack.similarity")
    parser.add_argument("--dpadapter", nargs="*", default=[], help="dpadapter/results.csv of each dataset")
    parser.add_argument("--dpcl-paper", action="store_true", help="add the DPCL paper's noise multipliers' rows")
    parser.add_argument("--csv", required=True)
    parser.add_argument("--md", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("claims")  # an input error in one line
    if len(args.utility) != len(args.mia):
        parser.error(f"--utility and --mia need one file per image dataset each, got {len(args.utility)} and "
                     f"{len(args.mia)}")
    if args.contrastive and not args.contrastive_thesis:
        parser.error("--contrastive needs --contrastive-thesis")
    if args.semileak and None in (args.semileak_thesis, args.early_stopping, args.views, args.similarity):
        parser.error("--semileak needs --semileak-thesis, --early-stopping, --views and --similarity")
    table = run_tables.ledger(
        load_csv_file(args.catalogue, PAPER_CLAIMS),
        *((load_csv_files(args.utility, UTILITY, args.expect), load_csv_files(args.mia, MIA, args.expect))
          if args.utility else (None, None)),
        dpcl_paper=args.dpcl_paper,
        dpadapter=load_csv_files(args.dpadapter, DPADAPTER_RESULTS, args.expect) if args.dpadapter else None,
        contrastive_claims=contrastive_report.claims_table(
            load_csv_files(args.contrastive, CONTRASTIVE, args.expect),
            load_csv_file(args.contrastive_thesis, THESIS_CLAIMS)) if args.contrastive else None,
        semileak_claims=semileak_report.claims_table(
            load_csv_files(args.semileak, SEMILEAK, args.expect), load_csv_file(args.semileak_thesis, THESIS_SEMILEAK),
            args.early_stopping, args.views, args.similarity) if args.semileak else None)
    atomic_write_csv(table, args.csv)
    with atomic_path(args.md) as tmp:
        tmp.write_text(markdown(table))


if __name__ == "__main__":
    main()
