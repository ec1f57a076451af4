"""The tuned settings a script takes as a file (`--head @…/tuning/head.json`): checked against the
tuning table beside it and the config's grid before any work, and the grid's best noise-free head."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from privssl.artefacts.specs import fail, require
from privssl.artefacts.tables import read_table
from privssl.cli import FileObject, json_object
from privssl.release.tuning_spec import grid_points, varied_fields


# --------------------------------------------------------------------------------- tuning choices

# a script's options that take a section's tuned settings, @<results>/<dataset>/tuning/<section>.json
CHOICE_OPTIONS = {"head": "head", "head_spec": "head", "certified": "certified", "dpsgd": "dpsgd"}


def _same_value(cell, value) -> bool:
    """A table cell (NaN for an empty one) equals a config value (None for null)."""
    if value is None:
        return isinstance(cell, float) and math.isnan(cell)
    return cell == value  # NaN equals nothing


def _canonical(value) -> str:
    """A JSON value as text that tells 20 from "20" and 1 from 1.0, as the config wrote them."""
    return json.dumps(value, sort_keys=True)


def check_tuning_choice(path, section: str, choice: dict, config: dict) -> None:
    """The settings rule `tune` chose, as read from `path`: the point its own table (the .csv
    beside it) marks chosen, a point of the config's grid (`config`: the sections the tuning
    reads, as rules/common.smk's tuning_config gives them), and for DP-SGD one per ε the table
    chose at. A hand edit, a file of another dataset, or a stale file of another grid is refused."""
    points = grid_points(config, section)
    table_path = Path(path).with_suffix(".csv")
    table = read_table(table_path)
    require(table_path, table, ["point", "eps", "chosen", *varied_fields(config, section)], "column")
    for line, row in enumerate(table.to_dict("records"), start=2):
        p = row["point"]
        if not (isinstance(p, (int, np.integer)) and 0 <= p < len(points)) or any(
                not _same_value(row[f], points[p][f]) for f in varied_fields(config, section)):
            fail(table_path, "point", f"the row on line {line} is not a point of the config's grid",
                 f"the {len(points)} points of tuning.{section}: is the table from another config?")
    chosen = table[table.chosen.astype(str) == "True"]

    def check(spec, rows, where: str) -> None:
        picked = sorted(set(rows.point))
        if len(picked) != 1:
            fail(table_path, "chosen", f"points {picked} chosen{where}", "one chosen point")
        if _canonical(spec) != _canonical(points[picked[0]]):
            fail(path, section, f"{_canonical(spec)[:300]}{where} is not the point {picked[0]} its table "
                 f"{table_path} chose", f"{_canonical(points[picked[0]])[:300]}, of the config's grid "
                 f"tuning.{section}: is the file edited, or from another dataset or config?")

    if section != "dpsgd":
        check(choice, chosen, "")
        return
    per_eps, finite = choice.get("per_eps"), chosen[np.isfinite(chosen.eps.astype(float))]
    if not isinstance(per_eps, list) or not all(isinstance(e, dict) and {"eps", "spec"} <= set(e) for e in per_eps):
        fail(path, "per_eps", repr(per_eps)[:200], "a list of {eps, spec}")
    given = [float(e["eps"]) for e in per_eps]
    if sorted(given) != sorted(set(finite.eps.astype(float))):
        fail(path, "per_eps", f"ε {given}", f"one entry for each ε its table {table_path} chose a point at: "
                                             f"{sorted(set(finite.eps.astype(float)))}")
    for entry in per_eps:
        check(entry["spec"], finite[finite.eps.astype(float) == float(entry["eps"])], f" at ε = {entry['eps']:g}")
    check(choice.get("noise_free"), chosen[~np.isfinite(chosen.eps.astype(float))], " (noise-free)")


def best_noise_free_point(path, config: dict) -> tuple[int, dict]:
    """The tuning grid's best noise-free point of the head (the highest accuracy of method `head`
    at ε = ∞ in the table beside `path`; on a tie the chosen point, else the first) and its
    settings: the head the paper would release without noise, the baseline of a utility loss
    beside the head chosen for its noise. `config`: the sections the head's tuning read
    (rules/common.smk's tuning_config)."""
    points = grid_points(config, "head")
    table_path = Path(path).with_suffix(".csv")
    table = read_table(table_path)
    require(table_path, table, ["point", "method", "eps", "accuracy", "chosen"], "column")
    noise_free = table[(table.method == "head") & np.isinf(table.eps.astype(float))]
    if noise_free.empty or noise_free.accuracy.isna().any() or not noise_free.point.isin(range(len(points))).all():
        fail(table_path, "accuracy", f"{len(noise_free)} noise-free rows (method head, ε = inf), points "
             f"{sorted(noise_free.point)}", f"a scored row for points of the {len(points)} of tuning.head")
    top = set(noise_free[noise_free.accuracy == noise_free.accuracy.max()].point)
    chosen = set(table[table.chosen.astype(str) == "True"].point) & top
    point = int(min(chosen or top))
    return point, points[point]


def parse_checking_choices(parser):
    """parser.parse_args(), then every tuned setting given as a file (`--head @…/tuning/head.json`)
    checked by check_tuning_choice against the config's grid the rule passes (`--choice-config`),
    before any work. Without --choice-config (a script run by hand) the files are taken as given."""
    parser.add_argument("--choice-config", type=json_object,
                        help="JSON object: the config sections the tuning of each section read, by section")
    args = parser.parse_args()
    for dest, section in CHOICE_OPTIONS.items():
        value = getattr(args, dest, None)
        if isinstance(value, FileObject) and args.choice_config is not None:
            if section not in args.choice_config:
                parser.error(f"--choice-config: no config of tuning section {section!r} for {value.path} (allowed: "
                             f"an object with the sections {sorted(args.choice_config)} and {section})")
            check_tuning_choice(value.path, section, value, args.choice_config[section])
    return args
