#!/usr/bin/env python
"""Rule `claims`: the claims ledger across the seeds (CSV and Markdown), one row per (claim, dataset,
setting): the ALM paper's claims from every image dataset's releases (by the paper's attack and by
the strongest attack of lira.csv), the releases' guarantees
from their audits, thesis Ch. 4's and Ch. 3's
from their branches' metrics, DPCL's and DPAdapter's from the training-time releases, and the
DPCL paper's noise multipliers against its stated ε. Each input group is optional: a config
without a branch has no rows of its claims."""

import argparse

from privssl.artefacts.audits import AUDIT
from privssl.artefacts.claims import PAPER_CLAIMS
from privssl.artefacts.image import LIRA, UTILITY, load_mia
from privssl.artefacts.tables import load_csv_file, load_csv_files
from privssl import claim_sources
from privssl.cli import expect_argument, mia_arguments
from privssl.io import atomic_path, atomic_write_csv, script_logger
from privssl.reports import run_tables
from privssl.reports.ledger_markdown import markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--utility", nargs="*", default=[], help="utility.csv of each image dataset")
    mia_arguments(parser, "each image dataset", required=False)
    parser.add_argument("--audit", nargs="*", default=[], help="audit.csv of each image dataset")
    parser.add_argument("--lira", nargs="*", default=[], help="lira.csv of each image dataset (the ALM claims' "
                        "strongest attack)")
    claim_sources.add_branch_arguments(parser)
    parser.add_argument("--csv", required=True)
    parser.add_argument("--md", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("claims")  # an input error in one line
    if len(args.utility) != len(args.mia):
        parser.error(f"--utility and --mia need one file per image dataset each, got {len(args.utility)} and "
                     f"{len(args.mia)}")
    claim_sources.check_branch_arguments(parser, args)
    utility = load_csv_files(args.utility, UTILITY, args.expect) if args.utility else None
    mia = load_mia(args.mia, args.mia_scores, args.expect) if args.mia else None
    audit = load_csv_files(args.audit, AUDIT, args.expect) if args.audit else None
    lira = load_csv_files(args.lira, LIRA, args.expect) if args.lira else None
    contrastive, semileak, dpadapter = claim_sources.branch_tables(args)
    table = run_tables.ledger(load_csv_file(args.catalogue, PAPER_CLAIMS), utility, mia, args.dpcl_paper, dpadapter,
                              contrastive, semileak, audit, lira)
    atomic_write_csv(table, args.csv)
    with atomic_path(args.md) as tmp:
        tmp.write_text(markdown(table))


if __name__ == "__main__":
    main()
