#!/usr/bin/env python
"""Rule `digest`: the run's headline figures in one Markdown page (results/digest.md), each beside
the file and column it comes from (privssl.reports.digest), and every table of the run's reports
built again from the files it is computed from, each validated as its report rule validates it
(privssl.reports.run_tables), never copied from another rule's Markdown. The per-dataset lists
are parallel: the i-th file of each belongs to the i-th dataset (graph)."""

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from privssl.accounting.dpcl import paper_settings_rows
from privssl.artefacts.audits import AUDIT
from privssl.artefacts.claims import PAPER_CLAIMS
from privssl.artefacts.graphs import LINK_PROTECTION, LINK_ROWS
from privssl.artefacts.image import HEAD_METRICS, LIRA, UTILITY, load_image_splits, load_mia, load_sensitivity
from privssl.artefacts.semileak import load_semileak_metrics
from privssl.artefacts.tables import expected_of, load_csv_file, load_csv_files, load_json_file
from privssl.artefacts.training_time import DPCL_ACCOUNTING
from privssl import claim_sources
from privssl.cli import expect_argument
from privssl.graphs import link_report
from privssl.io import atomic_path, script_logger
from privssl.reports import contrastive_report, digest, ledger_markdown, release_table, run_tables, semileak_report
from privssl.reports import semileak_trend
from privssl.reports import table1
from privssl.reports import training_time_report as training_time


def parallel(parser, args, names, lists) -> None:
    for flag in lists:
        if len(getattr(args, flag)) != len(names):
            parser.error(f"--{flag.replace('_', '-')} needs one file per name of {names}, "
                         f"got {len(getattr(args, flag))}")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", nargs="*", default=[])
    for flag in ("splits", "metrics", "utility", "mia", "lira", "audit", "sensitivity"):
        parser.add_argument(f"--{flag}", nargs="*", default=[], help=f"{flag} file of each dataset")
    parser.add_argument("--mia-scores", nargs="*", default=[],
                        help="attack/scores_<target>.parquet of every target of those datasets")
    parser.add_argument("--graphs", nargs="*", default=[])
    parser.add_argument("--link-protection", nargs="*", default=[], help="link_protection.csv of each graph")
    parser.add_argument("--link-parts", nargs="*", default=[], help="link/attacks.csv and transfer_*.csv files")
    parser.add_argument("--targets", nargs="*", type=float, default=[1.0, 10.0], help="Table 2's target budgets ε")
    claim_sources.add_branch_arguments(parser)
    parser.add_argument("--accounting", nargs="*", default=[], help="dpcl/accounting.csv of each dataset")
    parser.add_argument("--delta", type=float, default=1e-5, help="δ of the DPCL paper's rows")
    parser.add_argument("--out", required=True)
    expect_argument(parser)
    args = parser.parse_args()
    parallel(parser, args, args.datasets, ("splits", "metrics", "utility", "mia", "lira", "audit", "sensitivity"))
    parallel(parser, args, args.graphs, ("link_protection",))
    claim_sources.check_branch_arguments(parser, args)
    return args


@dataclass
class Inputs:
    """Every table of the page, read and validated: per image dataset (name, test records, head
    metrics, utility, MIA, LiRA, audit) and its sensitivity, each graph's link protection, the
    tables over all datasets (None where the run has none) and the claims ledger built from them."""

    image: list[tuple]
    sensitivity: list[tuple]
    graphs: list[tuple]
    utility: pd.DataFrame | None
    mia: pd.DataFrame | None
    accounting: pd.DataFrame | None
    link_rows: pd.DataFrame | None
    contrastive: pd.DataFrame | None
    semileak: pd.DataFrame | None
    dpadapter: pd.DataFrame | None
    ledger: pd.DataFrame


def read_inputs(args: argparse.Namespace) -> Inputs:
    """Every input of the page, each loaded with its schema (and the config's grids, `--expect`)."""
    table = lambda path, schema: load_csv_file(path, schema, expected_of(args.expect, path))  # noqa: E731
    tables = lambda paths, schema: load_csv_files(paths, schema, args.expect) if paths else None  # noqa: E731
    mia = load_mia(args.mia, args.mia_scores, args.expect) if args.mia else None
    files = zip(args.datasets, args.splits, args.metrics, args.utility, args.lira, args.audit)
    image = [(name, len(load_image_splits(s)["splits"]["test"]), load_json_file(m, HEAD_METRICS),
              table(u, UTILITY), mia[mia.dataset == name].reset_index(drop=True), table(li, LIRA), table(a, AUDIT))
             for name, s, m, u, li, a in files]
    sensitivity = [(name, load_sensitivity(path, expected_of(args.expect, path)))
                   for name, path in zip(args.datasets, args.sensitivity)]
    graphs = [(name, table(path, LINK_PROTECTION)) for name, path in zip(args.graphs, args.link_protection)]
    utility = tables(args.utility, UTILITY)
    accounting, link_rows = tables(args.accounting, DPCL_ACCOUNTING), tables(args.link_parts, LINK_ROWS)
    contrastive, semileak, dpadapter = claim_sources.branch_tables(args)
    audits = pd.concat([a for *_, a in image], ignore_index=True) if image else None
    liras = pd.concat([li for *_, li, _ in image], ignore_index=True) if image else None
    ledger = run_tables.ledger(load_csv_file(args.catalogue, PAPER_CLAIMS), utility, mia, args.dpcl_paper, dpadapter,
                               contrastive, semileak, audits, liras)
    return Inputs(image, sensitivity, graphs, utility, mia, accounting, link_rows, contrastive, semileak, dpadapter,
                  ledger)


def image_sections(args: argparse.Namespace, inputs: Inputs, shown: Callable[..., str]) -> list[str]:
    """The image datasets' sections: the non-private head and its attacks, the release methods,
    Tables 1 and 2 and the audits; none without an image dataset."""
    image = inputs.image
    if not image:
        return []
    # the verdicts first, the evidence after
    parts = ["## Non-private head and attacks"]
    parts += [digest.clean_head(n, m, i, li) for n, _, m, _, i, li, _ in image]
    parts += ["## Release methods"] + [digest.release_accuracy(n, u, t) for n, t, _, u, _, _, _ in image]
    parts += [shown("Sensitivity (Table 1)", "table1", table1.table1_markdown(table1.table1(inputs.sensitivity))),
              shown("Table 2", "table2", release_table.markdown(release_table.table2(inputs.utility, inputs.mia,
                                                                                     args.targets)))]
    return parts + ["## Audits"] + [digest.audits(n, a) for n, _, _, _, _, _, a in image]


def branch_sections(args: argparse.Namespace, inputs: Inputs, shown: Callable[..., str]) -> list[str]:
    """The sections of the branches the run has: Semi-Leak, contrastive privacy, DPCL's accounting
    and DPAdapter."""
    parts = []
    if inputs.semileak is not None:
        trend = semileak_trend.steps_trend(load_semileak_metrics(args.semileak, args.semileak_scores, args.expect))
        parts.append(shown("Semi-supervised learning (Semi-Leak)", "semileak",
                           semileak_report.markdown(inputs.semileak) + semileak_trend.trend_markdown(trend)))
    if inputs.contrastive is not None:
        parts.append(shown("Contrastive privacy", "contrastive", contrastive_report.markdown(inputs.contrastive)))
    if inputs.accounting is not None:
        parts.append(shown("DPCL accounting", "dpcl_accounting", training_time.accounting_markdown(
            inputs.accounting, pd.DataFrame(paper_settings_rows(delta=args.delta)))))
    if inputs.dpadapter is not None:
        parts.append(shown("DPAdapter", "dpadapter", training_time.dpadapter_markdown(
            training_time.dpadapter_table(inputs.dpadapter), training_time.dpadapter_verdicts(inputs.dpadapter))))
    return parts


def graph_sections(inputs: Inputs, shown: Callable[..., str]) -> list[str]:
    """The graph track: link stealing and each graph's link protection; none without either."""
    if not inputs.graphs and inputs.link_rows is None:
        return []
    parts = ["## Graph track"]
    if inputs.link_rows is not None:
        parts.append(shown("Link stealing", "link_stealing",
                           link_report.markdown(link_report.headline(link_report.summarise(inputs.link_rows))), 3))
    return parts + [digest.link_protection(g, t) for g, t in inputs.graphs]


def main() -> None:
    args = arguments()
    script_logger("results_digest")  # an input error in one line
    # everything read and validated before the page is written
    inputs = read_inputs(args)
    where = Path(args.out).parent / "tables"
    shown = lambda title, name, text, level=2: digest.section(title, where / f"{name}.md", text, level)  # noqa: E731
    parts = [digest.HEADER, shown("Claims ledger", "claims", ledger_markdown.markdown(inputs.ledger))]
    parts += image_sections(args, inputs, shown) + branch_sections(args, inputs, shown) + graph_sections(inputs, shown)
    with atomic_path(args.out) as tmp:
        tmp.write_text("\n\n".join(parts) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
