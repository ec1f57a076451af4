"""The file readers, the completeness checks of tables and the declaration of a table (`Table`).

`load_tensor_file` and `load_json_file` read a record and check it against its schema and against
what the reading rule expects it to record (`check_recorded`); `read_table` reads a CSV file whole,
and `load_csv_file(s)` check its columns, its estimates against their intervals, its own grid
(`check_grid`) and the config's grid of rows (`check_expected`, from the table's declaration;
`expected_of` picks a file's). Also the column specs and the relation helper several tracks'
tables share.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import math
import pickle
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from privssl.artefacts.specs import COUNT, PROBABILITY, Text, _is_tensor, _reason, check_fields, fail, require
from privssl.release.methods import METHODS


# --------------------------------------------------------------------------------- readers

def load_tensor_file(path, schema: dict, bound: dict | None = None, recorded: dict | None = None) -> dict:
    """A torch.save'd dict, checked against `schema` (`bound`: sizes known from other files) and
    against what the reading rule expects it to record (`recorded`, see check_recorded)."""
    import torch

    try:
        record = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError) as err:
        fail(path, None, _reason(err), "a complete file written by torch.save")
    check_fields(path, record, schema, {} if bound is None else dict(bound))
    return check_recorded(path, record, recorded)


def load_json_file(path, schema: dict, recorded: dict | None = None) -> dict:
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        fail(path, None, _reason(err), "a complete JSON file")
    check_fields(path, record, schema)
    return check_recorded(path, record, recorded)


def _same(have, wanted) -> bool:
    if isinstance(wanted, list):  # an ε grid: the file may hold it as a tensor, in float32 or float64
        values = have.tolist() if _is_tensor(have) else have
        return isinstance(values, list) and len(values) == len(wanted) and all(
            _same(a, b) for a, b in zip(values, wanted))
    numbers = [isinstance(v, (int, float)) and not isinstance(v, bool) for v in (have, wanted)]
    if all(numbers):  # 1 == 1.0; a float32 tensor holds 0.1 to 1e-8
        return math.isclose(have, wanted, rel_tol=1e-6)
    return type(have) is type(wanted) and have == wanted


def check_recorded(path, record: dict, recorded: dict | None) -> dict:
    """Provenance: the fields a file records about itself (role, dataset, method, ε grid, counts,
    seed) equal what the reading rule expects from the config, so that a well-formed file from
    another step or run (`cp shadow_models.pt target_models.pt`) is refused by its reader."""
    for field, wanted in (recorded or {}).items():
        if field not in record:
            fail(path, field, "missing", f"{wanted!r}, as the reading rule's config asks")
        if not _same(record[field], wanted):
            have = record[field].tolist() if _is_tensor(record[field]) else record[field]
            fail(path, field, f"{have!r}"[:200], f"{wanted!r}, as the reading rule's config asks: is the file "
                                                  f"from another step, run or config?")
    return record


def read_table(path) -> pd.DataFrame:
    """A CSV file (.csv or .csv.gz) as written by io.atomic_write_csv, whole: a header, at least
    one row, a newline at the end (a file cut short ends mid-line). Empty fields are NaN and only
    they: text such as 'None' or 'NA' stays text. A .parquet file (per-record scores, written by
    io.atomic_write_parquet) is read by pyarrow, whose footer check refuses a file cut short."""
    if str(path).endswith(".parquet"):
        return _read_parquet(path)
    try:
        raw = gzip.decompress(Path(path).read_bytes()) if str(path).endswith(".gz") else Path(path).read_bytes()
        if not raw.endswith(b"\n"):
            fail(path, None, "the last line ends without a newline: the file is cut short",
                 "a complete CSV file, ending with a newline")
        # packed per-record cells are text whatever they hold: an all-digit hex cell ("00",
        # "0512") would otherwise become a number
        header = pd.read_csv(io.BytesIO(raw), nrows=0).columns
        text = {c: str for c in header if c.endswith("decisions")}
        frame = pd.read_csv(io.BytesIO(raw), keep_default_na=False, na_values=[""], dtype=text)
    except (OSError, EOFError, gzip.BadGzipFile, pd.errors.ParserError, pd.errors.EmptyDataError,
            UnicodeDecodeError) as err:
        fail(path, None, _reason(err), "a complete CSV file")
    if frame.empty:
        fail(path, None, "a header without rows", "at least one row")
    return frame


def _read_parquet(path) -> pd.DataFrame:
    try:
        frame = pd.read_parquet(path, engine="pyarrow")
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        fail(path, None, _reason(err), "a complete Parquet file")
    if frame.empty:
        fail(path, None, "a schema without rows", "at least one row")
    return frame


# --------------------------------------------------------------------------------- a table, declared once

@dataclass(frozen=True, eq=False)  # a declaration is equal to itself only (its schema, a dict, has no hash)
class Table:
    """A tidy table, declared once beside the track that writes it: where it lies under
    results/<dataset>/ (`file`), its columns and the checks of their values and relations
    (`schema`, as load_csv_file reads it) and the rows the config asks of it (`rows`, the grid the
    reading rules pass as --expect, in blocks as privssl.grids describes them). A table written as
    one part per value of a wildcard (per target: attack/{target}.csv; per repeat) declares the
    parts' pattern in `part`; `rows(config, dataset, value)` gives one part's rows (`value`: the
    wildcard's value, or a dict of the values of several). A table with a merged `file` has
    `rows(config, dataset)`, the merged file's rows; `file` is None where the parts are read as
    they are (per-record scores, a Semi-Leak repeat's metrics, the transfers), whose rows need the
    part's value."""

    file: str | None
    schema: dict
    rows: Callable[..., list[dict]]
    part: str | None = None

    def __post_init__(self):
        if self.part is not None and not _fields(self.part):
            raise ValueError(f"a table's part pattern needs a wildcard, got {self.part!r}")
        if self.file is not None and _fields(self.file):
            raise ValueError(f"a table's merged file has no wildcard (its parts do), got {self.file!r}")
        if (self.file or self.part) is None:
            raise ValueError("a table has a file, a part pattern or both")

    @property
    def name(self) -> str:
        """The merged file's stem (mia.csv: mia), the table's name on merge_csv's command line."""
        if self.file is None:
            raise ValueError(f"the table of parts {self.part!r} has no merged file, and so no name to merge it by")
        return Path(self.file).name.split(".")[0]

    def path(self, results: str, dataset: str, value=None) -> str:
        """The dataset's file, or with `value` its part for that value of the wildcard (a rule's
        wildcards pass through: path(RESULTS, "{dataset}", "{target}") is an output pattern)."""
        if value is None:
            if self.file is None:
                raise ValueError(f"the table of parts {self.part!r} has no merged file: name the part's value")
            return f"{results}/{dataset}/{self.file}"
        if self.part is None:
            raise ValueError(f"the table {self.file!r} has no parts: {value!r} names none")
        fields = _fields(self.part)
        if not isinstance(value, dict):
            if len(fields) != 1:
                raise ValueError(f"the part {self.part!r} has the wildcards {fields}: name each in a dict, "
                                 f"got {value!r}")
            value = {fields[0]: value}
        if set(value) != set(fields):
            raise ValueError(f"the part {self.part!r} has the wildcards {fields}, got {sorted(value)}")
        return f"{results}/{dataset}/{self.part.format(**value)}"

    def expected(self, config: dict, results: str, datasets, values=None) -> dict[str, list[dict]]:
        """The config's rows of each dataset's file (`values` None) or of each of its parts, by
        path: what a reading rule passes as --expect."""
        if values is None:
            return {self.path(results, d): self.rows(config, d) for d in datasets}
        return {self.path(results, d, v): self.rows(config, d, v) for d in datasets for v in values}

    def load(self, path, expect: list[dict] | None = None) -> pd.DataFrame:
        """The file (or a part) checked against the schema and, with `expect`, its config rows."""
        return load_csv_file(path, self.schema, expect)


def _fields(pattern: str) -> list[str]:
    return [field for _, field, _, _ in string.Formatter().parse(pattern) if field]


# a table schema's entries that are not columns: its grid within the file's own values, whether it
# holds many rows per key (an ROC curve's points, per-record scores), and a check of the relations
# between its columns
TABLE_OPTIONS = ("grid", "many_rows_per_key", "relations")


def estimates_within_intervals(path, frame: pd.DataFrame) -> None:
    """Every estimate x with an interval (columns x_lo, x_hi) lies inside it, lo ≤ x ≤ hi up to float
    rounding: an estimate outside its own interval was not computed with it (or was edited), and a
    figure's error bar of negative length fails inside matplotlib naming no file."""
    for column in frame.columns:
        lo, hi = f"{column}_lo", f"{column}_hi"
        if lo not in frame.columns or hi not in frame.columns:
            continue
        values = [pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=float) for c in (column, lo, hi)]
        value, low, high = values
        slack = 1e-9 * np.maximum(1.0, np.abs(value))
        with np.errstate(invalid="ignore"):
            outside = (value < low - slack) | (value > high + slack)  # NaN compares False: no interval, no check
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            fail(path, column, f"{value[i]:g} on line {i + 2}", f"inside its interval [{column}_lo, {column}_hi] = "
                 f"[{low[i]:g}, {high[i]:g}] of the same row")


def load_csv_file(path, schema: dict, expect: list[dict] | None = None) -> pd.DataFrame:
    """A table (CSV, or Parquet: read_table) with every column of `schema` (a name ending in '*'
    stands for every column with that prefix), each value checked, and, per `schema['grid']`, a
    complete grid of rows; with `expect` (the rows the config asks for), exactly the
    rows of that grid."""
    frame = read_table(path)
    columns = {name: spec for name, spec in schema.items() if name not in TABLE_OPTIONS}
    require(path, frame, [c for c in columns if not c.endswith("*")], "column")
    for name, spec in columns.items():
        for column in [c for c in frame.columns if c.startswith(name[:-1])] if name.endswith("*") else [name]:
            spec.check(path, column, frame[column], {}, frame)
    estimates_within_intervals(path, frame)
    if "grid" in schema:
        check_grid(path, frame, *schema["grid"])
    if "relations" in schema:
        schema["relations"](path, frame)
    if expect is not None:
        # per-record scores have many rows per key: each key's rows are one attack's scores
        many = schema.get("many_rows_per_key", False)
        check_expected(path, frame[list(expect[0])].drop_duplicates() if many else frame, expect, lines=not many)
    return frame


def load_csv_files(paths, schema: dict, expect: dict[str, list[dict]] | None = None) -> pd.DataFrame:
    """Several tables of one schema (e.g. one per dataset), each checked, as one frame; `expect`:
    the config's grid of each file, by path (a file without one is refused)."""
    grids = [expected_of(expect, p) for p in paths]  # every path has its grid before any file is read
    return pd.concat([load_csv_file(p, schema, grid) for p, grid in zip(paths, grids)], ignore_index=True)


def expected_of(expect: dict | None, path):
    """What `expect` (a reader's --expect) says of `path`: a table's grid of rows, or the fields a
    file must record; None when the reader was given none (a script run by hand). A file the
    reader's rule gave nothing for, where it gave something for others, is refused."""
    if expect is None:
        return None
    if str(path) not in expect:
        fail(path, None, "nothing expected of this file was given by the reading rule",
             f"one of the files it gave expectations for: {', '.join(expect)}")
    return expect[str(path)]


def key_value(value):
    """A key cell as the grid compares it: numbers as floats (1 == 1.0); NaN, None and empty text
    as None (a CSV's empty cell reads as NaN, a Parquet file keeps empty text)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and not value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    return str(value)


def show_key(columns, key) -> str:
    return "{" + ", ".join(f"{c}: {'NaN' if v is None else f'{v:g}' if isinstance(v, float) else v}"
                           for c, v in zip(columns, key)) + "}"


def check_expected(path, frame: pd.DataFrame, blocks: list[dict], lines: bool = True) -> None:
    """The table's rows are exactly the config's grid: the union over `blocks` of the product of
    each block's {column: values} (a column of None: any value, e.g. the ε an accountant reports
    for a fixed noise multiplier), each key once. A row lost at a line end, a row of another run
    or config, and a repeated row are refused, naming the first such key."""
    columns = list(blocks[0])
    require(path, frame, columns, "column")
    rows = [tuple(key_value(v) for v in row) for row in frame[columns].itertuples(index=False, name=None)]
    where = (lambda i: f" on line {i + 2}") if lines else (lambda i: "")
    first: dict[tuple, int] = {}
    for i, key in enumerate(rows):
        if key in first:
            fail(path, ", ".join(columns), f"the row {show_key(columns, key)}{where(i)} repeats line {first[key] + 2}",
                 "each key of the config's grid once")
        first[key] = i
    allowed = [{c: None if block[c] is None else {key_value(v) for v in block[c]} for c in columns}
               for block in blocks]
    for i, key in enumerate(rows):
        if not any(all(a[c] is None or v in a[c] for c, v in zip(columns, key)) for a in allowed):
            fail(path, ", ".join(columns), f"the row {show_key(columns, key)}{where(i)} is not in the config's grid",
                 f"rows of the grid {_show_grid(blocks)}: is the file from another run or config?")
    for block in blocks:
        free = [j for j, c in enumerate(columns) if block[c] is None]
        present = {tuple(None if j in free else v for j, v in enumerate(key)) for key in rows}
        for key in itertools.product(*([None] if block[c] is None else [key_value(v) for v in block[c]]
                                       for c in columns)):
            if key not in present:
                size = sum(math.prod(len(v) for v in b.values() if v is not None) for b in blocks)
                fail(path, ", ".join(columns), f"the row {show_key(columns, key)} is missing ({len(rows)} rows "
                                               f"of the {size} the config asks for: a truncated file?)",
                     f"every row of the grid {_show_grid(blocks)}")


def _show_grid(blocks: list[dict]) -> str:
    return " + ".join("{" + ", ".join(f"{c}: {'any' if v is None else list(v)}" for c, v in block.items()) + "}"
                      for block in blocks)[:600]


def check_grid(path, frame: pd.DataFrame, groups: tuple[str, ...], axes: tuple[str, ...]) -> None:
    """Within each group, the rows must be the full product of the values of `axes` seen in that
    group, each once: a row lost from a table (cut at a line end) leaves a hole in the grid."""
    for key, rows in frame.groupby(list(groups), dropna=False, sort=False):
        where = ", ".join(f"{g} = {k}" for g, k in zip(groups, key))
        repeated = rows[rows.duplicated(list(axes), keep=False)]
        if not repeated.empty:
            fail(path, ", ".join(axes), f"the rows with {where} repeat {repeated[list(axes)].iloc[0].to_dict()}",
                 "each combination once")
        present = set(rows[list(axes)].astype(str).itertuples(index=False, name=None))
        grid = itertools.product(*(rows[a].drop_duplicates().astype(str) for a in axes))
        missing = [combination for combination in grid if combination not in present]
        if missing:
            fail(path, ", ".join(axes), f"the rows with {where} lack {dict(zip(axes, missing[0]))} "
                                        f"({len(missing)} of the grid of their values missing: a truncated file?)",
                 f"every combination of the {', '.join(axes)} values present")


# the relation checks' refusal (a table schema's 'relations'): the first line where `bad` holds
def _first_line(path, field: str, bad: np.ndarray, value: pd.Series, expected: str) -> None:
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        fail(path, field, f"{value.iloc[i]:g} on line {i + 2}", expected.format(i=i))


# the columns several tracks' tables share: a release method (or none), and a membership attack's metrics
_METHOD = Text(("none", *METHODS))
_METRICS = {name: PROBABILITY for name in ("accuracy", "accuracy_lo", "accuracy_hi", "auc", "auc_lo", "auc_hi",
                                           "tpr_at_*")} | {"n_members": COUNT, "n_nonmembers": COUNT, "fp_at_*": COUNT}
