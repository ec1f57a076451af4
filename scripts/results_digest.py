#!/usr/bin/env python
"""Rule `digest`: the run's headline figures in one Markdown page (results/digest.md), each beside
the file and column it comes from (privssl.reports.digest). The per-dataset lists are parallel:
the i-th file of each belongs to the i-th dataset (graph)."""

import argparse

from privssl.artefacts import (
    AUDIT,
    HEAD_METRICS,
    LINK_PROTECTION,
    LIRA,
    MIA,
    UTILITY,
    expected_of,
    load_csv_file,
    load_image_splits,
    load_json_file,
)
from privssl.cli import expect_argument
from privssl.io import atomic_path, script_logger
from privssl.reports import digest


def parallel(parser, args, names, lists) -> None:
    for flag in lists:
        if len(getattr(args, flag)) != len(names):
            parser.error(f"--{flag.replace('_', '-')} needs one file per name of {names}, "
                         f"got {len(getattr(args, flag))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", nargs="*", default=[])
    for flag in ("splits", "metrics", "utility", "mia", "lira", "audit"):
        parser.add_argument(f"--{flag}", nargs="*", default=[], help=f"{flag} file of each dataset")
    parser.add_argument("--graphs", nargs="*", default=[])
    parser.add_argument("--link-protection", nargs="*", default=[], help="link_protection.csv of each graph")
    parser.add_argument("--table", nargs=3, action="append", default=[], metavar=("SECTION", "TITLE", "PATH"),
                        help="a Markdown table of the run to include whole under SECTION")
    parser.add_argument("--out", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    script_logger("results_digest")  # an input error in one line
    parallel(parser, args, args.datasets, ("splits", "metrics", "utility", "mia", "lira", "audit"))
    parallel(parser, args, args.graphs, ("link_protection",))
    # everything read and validated before the page is written
    files = zip(args.datasets, args.splits, args.metrics, args.utility, args.mia, args.lira, args.audit)
    table = lambda path, schema: load_csv_file(path, schema, expected_of(args.expect, path))  # noqa: E731
    image = [(name, len(load_image_splits(s)["splits"]["test"]), load_json_file(m, HEAD_METRICS),
              table(u, UTILITY), table(i, MIA), table(li, LIRA), table(a, AUDIT))
             for name, s, m, u, i, li, a in files]
    graphs = [(name, table(path, LINK_PROTECTION)) for name, path in zip(args.graphs, args.link_protection)]
    tables = {}
    for section, title, path in args.table:
        level = 3 if section == "graphs" else 2  # the graph track's tables sit under its own heading
        with open(path, encoding="utf-8") as handle:
            tables.setdefault(section, []).append(digest.included(title, path, handle.read(), level))

    parts = [digest.HEADER] + tables.get("claims", [])  # the verdicts first, the evidence after
    if image:
        parts += ["## Non-private head and attacks"]
        parts += [digest.clean_head(n, m, i, li) for n, _, m, _, i, li, _ in image]
        parts += ["## Release methods"] + [digest.release_accuracy(n, u, t) for n, t, _, u, _, _, _ in image]
    parts += tables.get("image", [])
    if image:
        parts += ["## Audits"] + [digest.audits(n, a) for n, _, _, _, _, _, a in image]
    parts += tables.get("branches", [])
    if graphs or tables.get("graphs"):
        parts += ["## Graph track"] + tables.get("graphs", []) + [digest.link_protection(g, t) for g, t in graphs]
    with atomic_path(args.out) as tmp:
        tmp.write_text("\n\n".join(parts) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
