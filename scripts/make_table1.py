#!/usr/bin/env python
"""Rule `table1`: the paper's Table 1 (|D|, |d|, m, Δ1, Δ2 per dataset) as CSV and Markdown,
with how Δ was sampled (population pool or inside d), its order statistic k and what it supports."""

import argparse

from privssl.artefacts.image import load_sensitivity
from privssl.artefacts.tables import expected_of
from privssl.cli import expect_argument
from privssl.io import atomic_path, atomic_write_csv, script_logger
from privssl.reports.table1 import table1, table1_markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", nargs="+", required=True)
    parser.add_argument("--sensitivity", nargs="+", required=True, help="sensitivity.json per dataset, same order")
    parser.add_argument("--csv", required=True)
    parser.add_argument("--md", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("make_table1")  # an input error in one line
    if len(args.datasets) != len(args.sensitivity):
        parser.error(f"{len(args.datasets)} datasets but {len(args.sensitivity)} sensitivity files")
    table = table1([(dataset, load_sensitivity(path, expected_of(args.expect, path)))
                    for dataset, path in zip(args.datasets, args.sensitivity)])
    atomic_write_csv(table, args.csv)
    with atomic_path(args.md) as tmp:
        tmp.write_text(table1_markdown(table))


if __name__ == "__main__":
    main()
