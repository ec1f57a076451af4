"""Validated loaders for the files the rules read.

Every JSON, tensor and CSV artefact is checked where a script loads it: the keys or columns it
needs, finite numbers in their range, sizes that agree between fields. A bad file is refused with

    ArtefactError: <path>: field '<name>': <what is wrong> (expected <what is allowed>)

so a corrupted or truncated intermediate file stops the job that reads it instead of becoming a
plausible number downstream (a Δ of 0 would be released as "1-DP" with noise scale 0).

The checks are three generic ones (`check_numbers`, `require`, `check_tensor`) driven by a small
schema per artefact: a dict of field -> spec (`Num`, `Text`, `Flag`, `Tensor`, `Shapes`, `Params`,
`Each`, `Names`), checked in order. A dimension or bound named by a string is bound to the first
size or value seen, and every later use must agree: `Tensor(("n", "F"))` then
`Tensor(("n",), "int", Num(0, "n_classes", high_open=True))` ties features to their labels.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import math
import pickle
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NoReturn

import numpy as np
import pandas as pd

from privssl.attacks.contrastive_spec import CLAIMS, INFERENCES, MEMBERSHIP, MEMBERSHIP_TASK
from privssl.attacks.mia_spec import METRIC_ATTACKS, REFERENCE_ATTACKS, RMIA_ATTACKS
from privssl.attacks.semi_leak_spec import ATTACKS
from privssl.audit.audit_names import CANARY_ATTACK, CRAFTED_ATTACK, THREAT_MODELS
from privssl.cli import FileObject, json_object
from privssl.data.splits import CONTRASTIVE_SPLITS, DATASETS, LABELLED_SPLITS, SEMILEAK_SPLITS, SPLITS
from privssl.graphs.splits import NODE_SPLITS
from privssl.io import InputError, unpack_decisions
from privssl.release.methods import ADD_REMOVE, GUARANTEE_KINDS, METHODS, REGISTRY, TRAINING_TIME_METHODS
from privssl.release.tuning_spec import grid_points, varied_fields
from privssl.reports.claims_spec import LEDGER_CLAIMS
from privssl.training.encoder_names import ENCODERS
from privssl.training.semi_supervised_spec import ARCHITECTURES, DEFENCES, MEMBER_KINDS, SIMILARITIES, TARGETS
from privssl.training.semi_supervised_spec import CLAIMS as SEMILEAK_CLAIMS

if TYPE_CHECKING:
    import torch

    from privssl.release.training_time import PrivateSets


def _is_tensor(value) -> bool:
    """A torch tensor, without importing torch: a process that never imported it holds none (the
    report scripts read CSV and JSON only, and skip torch's ~2 s import)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.is_tensor(value)


class ArtefactError(InputError):
    """An input file with a missing, malformed or out-of-range field; the message names both."""


def fail(path, field: str | None, problem: str, expected: str) -> NoReturn:
    where = f"{path}: field '{field}'" if field else str(path)
    raise ArtefactError(f"{where}: {problem} (expected {expected})")


def _reason(err: Exception) -> str:
    """A reader's exception on one line (a parser's message spans several)."""
    return f"not readable ({type(err).__name__}: {' '.join(str(err).split())[:300]})"


def _resolve(bound_value, bound: dict):
    return bound[bound_value] if isinstance(bound_value, str) else bound_value


def _show(bound_value, bound: dict) -> str:
    return f"{bound_value} = {bound[bound_value]:g}" if isinstance(bound_value, str) else f"{bound_value:g}"


# --------------------------------------------------------------------------------- specs

@dataclass(frozen=True)
class Num:
    """Numbers in [low, high] (open ends: low_open, high_open), finite unless `finite` is False
    (then only NaN is refused). A str bound names a value bound earlier in the file.
    `optional`: the field may be absent or None. `nan_where` (column, value or values): in a table, NaN is
    allowed in the rows where that column holds that value (the ε of the clean head, `none`)."""

    low: float | str | None = None
    high: float | str | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    finite: bool = True
    optional: bool = False
    nan_where: tuple[str, str | tuple[str, ...]] | None = None
    nan: bool = False  # an empty cell is allowed anywhere

    def describe(self, bound: dict) -> str:
        noun = ("finite " if self.finite else "non-NaN ") + ("integers" if self.integer else "numbers")
        if self.low is None and self.high is None:
            return noun
        left = "(-inf" if self.low is None else ("(" if self.low_open else "[") + _show(self.low, bound)
        right = "inf)" if self.high is None else _show(self.high, bound) + (")" if self.high_open else "]")
        return f"{noun} in {left}, {right}"

    def check(self, path, field, value, bound, frame=None) -> None:
        nan_ok = None
        if self.nan:
            nan_ok = np.ones(np.shape(value), dtype=bool)
        elif self.nan_where is not None and frame is not None:
            column, allowed = self.nan_where
            nan_ok = frame[column].isin(_values(allowed)).to_numpy(dtype=bool, na_value=False)
        check_numbers(path, field, value, self, bound, nan_ok)


def _values(allowed: str | tuple[str, ...]) -> tuple[str, ...]:
    """A `nan_where` or `absent_where` value: one value, or a tuple of them."""
    return allowed if isinstance(allowed, tuple) else (allowed,)


@dataclass(frozen=True)
class Text:
    """A string (a table column of strings): non-empty unless `empty`, one of `allowed` if given."""

    allowed: tuple[str, ...] | None = None
    empty: bool = False

    def describe(self, bound: dict) -> str:
        return f"one of {', '.join(self.allowed)}" if self.allowed else "text"

    def check(self, path, field, value, bound, frame=None) -> None:
        if isinstance(value, pd.Series):  # vectorised: a ROC table has a million rows
            bad = value.notna() if value.isna().all() or not pd.api.types.is_string_dtype(value) else (
                value.notna() & ~value.isin(self.allowed) if self.allowed else pd.Series(False, index=value.index))
            if not self.empty:
                bad |= value.isna()
            if bad.any():
                i = int(np.flatnonzero(bad.to_numpy())[0])
                fail(path, field, f"{value.iloc[i]!r} on line {i + 2}", self.describe(bound))
            return
        if not isinstance(value, str) or not value or (self.allowed and value not in self.allowed):
            fail(path, field, repr(value), self.describe(bound))


@dataclass(frozen=True)
class Flag:
    """A table column of True / False."""

    def describe(self, bound: dict) -> str:
        return "True or False"

    def check(self, path, field, value, bound, frame=None) -> None:
        if not pd.api.types.is_bool_dtype(value.dtype):  # one other cell makes the column text
            i = int(np.flatnonzero(~value.isin([True, False]).to_numpy())[0])
            fail(path, field, f"{value.iloc[i]!r} on line {i + 2}", self.describe(bound))


@dataclass(frozen=True)
class Decisions:
    """A table column of per-record cells: decisions packed by privssl.io.pack_decisions (each
    cell holds exactly its row's number of records, the sum of the `count` columns, and no bit past
    the last). `absent_where` (column, value or values): the cell is empty in the rows where that
    column holds that value (a membership row has no baseline decisions); `optional`: a cell may be
    empty anywhere (the clean head's decisions, which the training-time releases' rows do not carry)."""

    count: tuple[str, ...]
    absent_where: tuple[str, str | tuple[str, ...]] | None = None
    optional: bool = False

    def describe(self, bound: dict) -> str:
        return f"per-record decisions, {' + '.join(self.count)} bits as hex digits"

    def check(self, path, field, value, bound, frame=None) -> None:
        absent = (frame[self.absent_where[0]].isin(_values(self.absent_where[1])).to_numpy() if self.absent_where
                  else None)
        records = frame[list(self.count)].sum(axis=1).to_numpy()
        for i, (cell, n) in enumerate(zip(value, records)):
            if absent is not None and absent[i]:
                if isinstance(cell, str):
                    fail(path, field, f"{cell[:20]!r}… on line {i + 2}", f"an empty cell where "
                         f"{self.absent_where[0]} is {self.absent_where[1]}")
                continue
            if self.optional and not isinstance(cell, str):
                continue
            try:
                unpack_decisions(cell, int(n))
            except (ValueError, TypeError) as err:
                fail(path, field, f"line {i + 2}: {err}", self.describe(bound))


@dataclass(frozen=True)
class Tensor:
    """A tensor (in a JSON file: a list) of sizes `dims` (None: any shape); an int size is fixed,
    a named one is bound by its first use. kind: float, int, bool or number (int or float)."""

    dims: tuple | None
    kind: str = "float"
    values: Num | None = Num()

    def describe(self, bound: dict) -> str:
        shape = "any shape" if self.dims is None else f"shape ({', '.join(map(str, self.dims))})"
        return f"a {self.kind} tensor of {shape}" + (f" holding {self.values.describe(bound)}" if self.values else "")

    def check(self, path, field, value, bound, frame=None) -> None:
        check_tensor(path, field, value, self, bound)


@dataclass(frozen=True)
class Shapes:
    """A head's parameter shapes {name: sizes}; binds 'P', the length of its flat parameter vector."""

    def describe(self, bound: dict) -> str:
        return "a non-empty dict of parameter name -> sizes (positive integers)"

    def check(self, path, field, value, bound, frame=None) -> None:
        ok = isinstance(value, dict) and value and all(
            isinstance(s, (tuple, list)) and all(isinstance(n, int) and n > 0 for n in s) for s in value.values())
        if not ok:
            fail(path, field, repr(value)[:200], self.describe(bound))
        bound["P"] = sum(math.prod(s) for s in value.values())


@dataclass(frozen=True)
class Params:
    """A head's parameters: a tensor of sizes (1, *shape) for every name of the 'shapes' field."""

    def describe(self, bound: dict) -> str:
        return "one finite float tensor of sizes (1, *shape) per name of 'shapes'"

    def check(self, path, field, value, bound, frame=None) -> None:
        shapes = bound["shapes"]
        if not isinstance(value, dict) or set(value) != set(shapes):
            fail(path, field, f"names {sorted(value) if isinstance(value, dict) else value!r}",
                 f"the names of 'shapes', {sorted(shapes)}")
        for name, shape in shapes.items():
            check_tensor(path, f"{field}.{name}", value[name], Tensor((1, *shape)), bound)


@dataclass(frozen=True)
class Each:
    """A dict whose every value satisfies `spec` (e.g. a model's state dict)."""

    spec: Num | Tensor

    def describe(self, bound: dict) -> str:
        return f"a non-empty dict of {self.spec.describe(bound)}"

    def check(self, path, field, value, bound, frame=None) -> None:
        if not isinstance(value, dict) or not value:
            fail(path, field, repr(value)[:200], self.describe(bound))
        for key, item in value.items():
            self.spec.check(path, f"{field}.{key}", item, bound)


@dataclass(frozen=True)
class Names:
    """A non-empty list of distinct names from `allowed`."""

    allowed: tuple[str, ...]

    def describe(self, bound: dict) -> str:
        return f"a list of distinct names from {', '.join(self.allowed)}"

    def check(self, path, field, value, bound, frame=None) -> None:
        if not (isinstance(value, list) and value and len(set(value)) == len(value)
                and all(v in self.allowed for v in value)):
            fail(path, field, repr(value), self.describe(bound))


# --------------------------------------------------------------------------------- generic checks

def _as_numbers(path, field, values, expected: str) -> tuple[np.ndarray, str]:
    """The values as a flat float array, and how to name position i (index or CSV line)."""
    if _is_tensor(values):
        if values.dtype == sys.modules["torch"].bool or values.is_complex():
            fail(path, field, f"a {values.dtype} tensor", expected)
        return values.detach().cpu().double().reshape(-1).numpy(), "index"
    if isinstance(values, pd.Series):  # position i is on line i + 2: line 1 is the header
        if pd.api.types.is_bool_dtype(values.dtype):
            fail(path, field, "a column of True / False", expected)
        if not pd.api.types.is_numeric_dtype(values.dtype):  # one text cell makes the whole column text
            text = (pd.to_numeric(values, errors="coerce").isna() & values.notna()).to_numpy()
            i = int(np.flatnonzero(text)[0]) if text.any() else 0
            fail(path, field, f"{values.iloc[i]!r} on line {i + 2} is not a number", expected)
        return values.to_numpy(dtype=float, na_value=np.nan), "line"
    items = values if isinstance(values, (list, tuple)) else [values]
    for i, item in enumerate(items):
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, float, np.integer, np.floating)):
            fail(path, field, f"{item!r}{f' at index {i}' if items is values else ''} is not a number", expected)
    return np.asarray(items, dtype=float), "index"


def check_numbers(path, field, values, spec: Num, bound: dict | None = None, nan_ok: np.ndarray | None = None) -> None:
    """The generic check of numbers (a scalar, list, tensor or table column): every value a number,
    not NaN (but where `nan_ok`), finite unless spec.finite is False, integral for spec.integer,
    within spec's bounds. The first bad value is named with its position."""
    bound = bound or {}
    expected = spec.describe(bound)
    array, position = _as_numbers(path, field, values, expected)
    low, high = _resolve(spec.low, bound), _resolve(spec.high, bound)
    nan = np.isnan(array)
    with np.errstate(invalid="ignore"):
        bad = nan & ~(nan_ok if nan_ok is not None else False)
        if spec.finite:
            bad |= np.isinf(array)
        if spec.integer:
            bad |= ~nan & np.isfinite(array) & (array != np.round(array))
        if low is not None:
            bad |= (array <= low) if spec.low_open else (array < low)
        if high is not None:
            bad |= (array >= high) if spec.high_open else (array > high)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        scalar = not (isinstance(values, (list, tuple, pd.Series)) or _is_tensor(values)) or (
            _is_tensor(values) and values.ndim == 0)
        where = "" if scalar else f" on line {i + 2}" if position == "line" else f" at index {i}"
        what = "missing (NaN)" if nan[i] and isinstance(values, pd.Series) else f"{array[i]:g}"
        fail(path, field, f"{what}{where}", expected)


def require(path, container, names, what: str = "field", prefix: str = "") -> None:
    """The generic presence check: every name a key of the dict (or a column of the table)."""
    present = container.columns if isinstance(container, pd.DataFrame) else container
    missing = [n for n in names if n not in present]
    if missing:
        fail(path, prefix + missing[0], "missing", f"{what}s {', '.join(map(str, names))}; the file has "
                                                   f"{', '.join(map(str, present))}")


def check_tensor(path, field, value, spec: Tensor, bound: dict) -> None:
    """The generic tensor check: kind, sizes (named sizes bound across fields), values."""
    expected = spec.describe(bound)
    if isinstance(value, list):  # a JSON list of numbers
        element = int if spec.kind == "int" else (int, float)
        if not all(isinstance(v, element) and not isinstance(v, bool) for v in value):
            fail(path, field, f"a list holding {next(v for v in value if not isinstance(v, element))!r}", expected)
        shape = (len(value),)
    elif _is_tensor(value):
        boolean = value.dtype == sys.modules["torch"].bool
        kinds = {"float": value.is_floating_point(), "bool": boolean,
                 "int": not value.is_floating_point() and not value.is_complex() and not boolean}
        kinds["number"] = kinds["float"] or kinds["int"]
        if not kinds[spec.kind]:
            fail(path, field, f"a {value.dtype} tensor", expected)
        shape = tuple(value.shape)
    else:
        fail(path, field, f"a {type(value).__name__}", expected)
    if spec.dims is not None:
        if len(shape) != len(spec.dims):
            fail(path, field, f"sizes {shape}", expected)
        for size, dim in zip(shape, spec.dims):
            wanted = bound.setdefault(dim, size) if isinstance(dim, str) else dim
            if size != wanted:
                fail(path, field, f"sizes {shape}", f"{expected}, where {dim} = {wanted}")
    if spec.values is not None:
        check_numbers(path, field, value, spec.values, bound)


def check_fields(path, record, schema: dict, bound: dict | None = None, prefix: str = "") -> dict:
    """Every field of `schema` in the dict `record`, checked in order; returns `record`. `prefix`
    names a nested dict's fields in messages (e.g. 'splits.')."""
    if not isinstance(record, dict):
        fail(path, prefix.rstrip(".") or None, f"holds a {type(record).__name__}", "a dict of fields")
    bound = {} if bound is None else bound
    optional = {field for field, spec in schema.items() if getattr(spec, "optional", False)}
    require(path, record, [field for field in schema if field not in optional], prefix=prefix)
    for field, spec in schema.items():
        if field in optional and record.get(field) is None:
            continue
        spec.check(path, prefix + field, record[field], bound)
        bound.setdefault(field, record[field])  # a scalar or dict later fields may refer to
    return record


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
    they: text such as 'None' or 'NA' stays text."""
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


# a table schema's entries that are not columns: its grid within the file's own values, whether it
# holds curves (many rows per key), and a check of the relations between its columns
TABLE_OPTIONS = ("grid", "curves", "relations")


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
    """A table with every column of `schema` (a name ending in '*' stands for every column with that
    prefix), each value checked, and, per `schema['grid']`, a complete grid of rows; with `expect`
    (privssl.grids: the rows the config asks for), exactly the rows of that grid."""
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
        # a table of curves (ROC) has many rows per key: each key's rows are one curve
        keys = frame[list(expect[0])].drop_duplicates() if schema.get("curves") else frame
        check_expected(path, keys, expect, lines=not schema.get("curves"))
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
    """A key cell as the grid compares it: numbers as floats (1 == 1.0), NaN and None as None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
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


# --------------------------------------------------------------------------------- relations

def _first_line(path, field: str, bad: np.ndarray, value: pd.Series, expected: str) -> None:
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        fail(path, field, f"{value.iloc[i]:g} on line {i + 2}", expected.format(i=i))


def one_run_counts(path, frame: pd.DataFrame) -> None:
    """A one-run audit row guesses on at most its canaries and is right at most on every guess:
    correct <= n (guesses) <= canaries; otherwise its lower bound is computed from impossible counts."""
    if "canaries" not in frame.columns:  # a hypothesis-test audit only
        return
    one_run = frame.audit.str.startswith("one_run").to_numpy()
    for name in ("canaries", "correct"):
        check_numbers(path, name, frame[name], Num(0, integer=True), nan_ok=~one_run)
    _first_line(path, "n", one_run & (frame.n > frame.canaries).to_numpy(), frame.n,
                "at most the row's canaries (the auditor guesses on canary slots only)")
    _first_line(path, "correct", one_run & (frame.correct > frame.n).to_numpy(), frame.correct,
                "at most the row's n, the guesses made")


def bounds_within_ceilings(path, frame: pd.DataFrame) -> None:
    """An audit row's ceiling is its own bound with every decision right (privssl.audit.bounds), and
    the bound only falls as errors are added: a bound above its ceiling was not computed from the
    row's counts. A parametric canary audit's ceiling is the claim (privssl.audit.gradient_canary),
    which its rule never lets a bound pass. The tolerance is float rounding only."""
    over = (frame.eps_lower_bound > frame.eps_ceiling * (1 + 1e-9) + 1e-12).to_numpy()
    _first_line(path, "eps_lower_bound", over, frame.eps_lower_bound,
                "at most the row's eps_ceiling, the bound of the same audit with every decision right")


# the audits whose claim is the release's own adjacency (the canary: add/remove for DP-SGD; the crafted
# pair: substitution); every other audit tests the substitution of one record (release.methods.substitution_claim)
OWN_ADJACENCY_ATTACKS = (CANARY_ATTACK, CRAFTED_ATTACK)
PARAMETRIC_AUDITS = ("white_box_gdp", "final_model_gdp", "crafted_pair_gdp")  # their ceiling is the claim
PROVEN_BY_CONSTRUCTION = ("certified_gaussian", "certified_pure", "dpsgd")  # no sampled sensitivity: never weaker


def audit_claims_are_the_releases(path, frame: pd.DataFrame) -> None:
    """Each row's claim is its release's (privssl.release.methods), so that an edited claim or kind
    cannot move the ledger: `claimed_eps` is ε for the canary and crafted-pair audits and the
    substitution claim for the others (ε, or 2ε or ∞ for DP-SGD's addition/removal); a release whose
    guarantee rests on no sampled sensitivity has its registry kind at every finite ε; a parametric
    audit's ceiling is its claim."""
    claimed, eps = frame.claimed_eps.to_numpy(dtype=float), frame.eps.to_numpy(dtype=float)
    released = (frame.method != "none").to_numpy()
    own = frame.attack.isin(OWN_ADJACENCY_ATTACKS).to_numpy()
    add_remove = frame.method.map(lambda m: m in REGISTRY and REGISTRY[m].adjacency == ADD_REMOVE).to_numpy(bool)
    doubled = np.isclose(claimed, 2 * eps, rtol=1e-12) | np.isinf(claimed)
    wrong = released & ~np.where(own | ~add_remove, np.isclose(claimed, eps, rtol=1e-12), doubled)
    wrong |= ~released & ~np.isinf(claimed)
    _first_line(path, "claimed_eps", wrong, frame.claimed_eps,
                "the release's own claim: ε for the canary and crafted-pair audits, the substitution claim (ε; 2ε or "
                "∞ for DP-SGD) for the others, ∞ for the unprotected head")
    kind = frame.method.map(lambda m: REGISTRY[m].dp_kind if m in PROVEN_BY_CONSTRUCTION else None)
    wrong = (kind.notna() & np.isfinite(eps) & (frame.guarantee_kind != kind)).to_numpy()
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        fail(path, "guarantee_kind", f"{frame.guarantee_kind.iloc[i]!r} for {frame.method.iloc[i]} on line {i + 2}",
             f"{kind.iloc[i]!r}, the registry's guarantee of {frame.method.iloc[i]} (privssl.release.methods)")
    parametric = frame.audit.isin(PARAMETRIC_AUDITS).to_numpy()
    _first_line(path, "eps_ceiling", parametric & ~np.isclose(frame.eps_ceiling.to_numpy(dtype=float), claimed,
                                                              rtol=1e-12), frame.eps_ceiling,
                "the row's claimed_eps: a parametric audit's ceiling is its claim")


def audit_relations(path, frame: pd.DataFrame) -> None:
    """A table's schema names one relation check; audit.csv has three."""
    one_run_counts(path, frame)
    bounds_within_ceilings(path, frame)
    audit_claims_are_the_releases(path, frame)


def noise_free_limits(path, frame: pd.DataFrame) -> None:
    """A utility row at ε = ∞ is its method's noise-free limit (privssl.release.tuning: the same
    training, no noise) and claims nothing; a row at a finite ε is a release, whose noise is never 0."""
    limit = np.isinf(frame.eps.to_numpy())
    _first_line(path, "noise_scale", limit & (frame.noise_scale != 0).to_numpy(), frame.noise_scale,
                "0 at eps = inf (the noise-free limit)")
    _first_line(path, "noise_scale", ~limit & (frame.noise_scale <= 0).to_numpy(), frame.noise_scale,
                "> 0 at a finite eps (a release adds noise)")
    bad_kind = limit & (frame.guarantee_kind != "none").to_numpy()
    if bad_kind.any():
        i = int(np.flatnonzero(bad_kind)[0])
        fail(path, "guarantee_kind", f"{frame.guarantee_kind.iloc[i]!r} on line {i + 2}",
             "none at eps = inf (the noise-free limit is not a release)")


def accountant_within_target(path, frame: pd.DataFrame) -> None:
    """The calibration returns the smallest noise whose accountant ε is at most the target, so a
    row whose accountant ε exceeds its target ε (beyond float rounding) was not produced by it and
    would publish a budget the release does not meet. At a fixed noise multiplier there is no target.
    The calibrating accountant is the RDP one for sampling without replacement; the PLD ε of the
    Poisson analogue beside it is no claim and has no such bound."""
    over = (frame.eps_rdp_without_replacement > frame.eps_target * (1 + 1e-9)).to_numpy()  # NaN target: never over
    _first_line(path, "eps_rdp_without_replacement", over, frame.eps_rdp_without_replacement,
                "at most the row's eps_target: the calibrated noise reaches the target")


# --------------------------------------------------------------------------------- schemas

POSITIVE = Num(0, low_open=True)
PROBABILITY = Num(0, 1)
COUNT = Num(0, integer=True)
OPTIONAL_CLIP = Num(0, low_open=True, optional=True)  # the certified head's input clipping; None: none


def _label(size: str) -> Tensor:
    return Tensor((size,), "int", Num(0, "n_classes", high_open=True, integer=True))


def features(*splits: str) -> dict:
    """A features file (encode, graph_encode rules) with the splits a script reads: rows of one
    width, one label below n_classes per row."""
    return {"n_classes": Num(2, integer=True),
            **{k: v for s in splits for k, v in ((s, Tensor((f"|{s}|", "width"))), (f"{s}_labels", _label(f"|{s}|")))}}


FEATURES = features(*LABELLED_SPLITS)  # every split; the graph track's NODE_SPLITS are the same names
# finetune/metrics.json: the released head's accuracy on d and on the test split
HEAD_METRICS = {"train_accuracy": PROBABILITY, "test_accuracy": PROBABILITY, "finetune_size": Num(1, integer=True)}
HEAD = {"n_classes": Num(2, integer=True), "shapes": Shapes(), "params": Params(), "clip_norm": OPTIONAL_CLIP}
RELEASE = {"method": Text(METHODS), "shapes": Shapes(), "eps": Tensor(("E",), values=POSITIVE),
           # σ, b or θ at a finite ε of a positive sensitivity: never 0 (0 would release the head as it is)
           "noise_scale": Tensor(("E",), values=POSITIVE), "flat": Tensor(("E", "draws", "P")),
           "clip_norm": OPTIONAL_CLIP}
# a training-time release (privssl.release.training_time): posteriors (ε, repeat, records, classes) of the
# released network on each queried split, and of the attacker's shadow network on its pairs
TRAINING_RELEASE = {"method": Text(TRAINING_TIME_METHODS), "eps": Tensor(("E",), values=POSITIVE),
                    "repeats": Num(1, integer=True), "n_classes": Num(2, integer=True),
                    **{name: Tensor(("E", "repeats", size, "n_classes"), values=PROBABILITY) for name, size in
                       (("finetune", "|d|"), ("nonmember", "|nonmember|"), ("test", "|test|"), ("shadow_pairs", "K"))}}
LIRA_HEADS = {"shadows": Num(2, integer=True), "targets": Num(1, integer=True), "pool_size": Num(2, integer=True),
              "pool": Names(LABELLED_SPLITS), "head_kind": Text(("finetune", "certified")), "shapes": Shapes(),
              "flat": Tensor(("heads", "P")),
              "sets": Tensor(("heads", "|d|"), "int", Num(0, "pool_size", high_open=True, integer=True)),
              "clip_norm": OPTIONAL_CLIP, "seed": COUNT}
ATTACKER = {"in_dim": Num(2, integer=True), "spec": Each(POSITIVE), "mlp": Each(Tensor(None)),
            "shadow_shapes": Shapes(), "shadow_flat": Tensor(("P",)),
            "inside": Tensor(("in",), "int", Num(0, "|shadow|", high_open=True, integer=True)),
            "pairs": Tensor(("K",), "int", Num(0, "|shadow|", high_open=True, integer=True)),
            "pair_is_member": Tensor(("K",), values=Num(0, 1, integer=True)), "seed": COUNT,
            "thresholds": Each(Num(finite=False))}  # a threshold may be ±inf (always / never "member")
ENCODER = {"encoder": Text(ENCODERS), "width": Num(1, integer=True),
           "in_channels": Num(1, integer=True), "image_size": Num(1, integer=True),
           "state": Each(Tensor(None, "number"))}  # a state dict may hold integer buffers (batch-norm counts)
GRAPH = {"name": Text(), "n_classes": Num(2, integer=True), "x": Tensor(("N", "features")),
         "edge_index": Tensor((2, "edges"), "int", Num(0, "N", high_open=True, integer=True)), "y": _label("N")}
EMBEDDINGS = {"n_classes": Num(2, integer=True), "embeddings": Tensor(("N", "width")), "labels": _label("N")}
LINK_TARGET = {"labelled": Tensor(("runs", "N"), "bool", None),
               "posteriors": Tensor(("runs", "N", "classes"), values=PROBABILITY),
               "reference": Tensor(("runs", "N", "classes"), values=PROBABILITY),
               "pairs": Tensor(("runs", "K", 2), "int", Num(0, "N", high_open=True, integer=True)),
               "is_edge": Tensor(("runs", "K"), "bool", None), "train": Tensor(("runs", "K"), "bool", None)}

_SENSITIVITY = {"finetune_size": Num(1, integer=True), "statement": Text(), "delta2": POSITIVE}
SAMPLED_SENSITIVITY = {  # sensitivity rule: Δ̂ = the k-th smallest of m sampled distances
    **_SENSITIVITY, "sampling": Text(("population", "paper")), "guarantee_kind": Text(GUARANTEE_KINDS),
    "m": Num(1, integer=True), "k": Num(1, "m", integer=True), "delta1": POSITIVE,
    "distances_l1": Tensor(("m",), values=Num(0)), "distances_l2": Tensor(("m",), values=Num(0)),
    "pretrain_size": Num(1, integer=True, optional=True)}
POPULATION = {"rho": Num(0, 1, low_open=True, high_open=True),
              "gamma": Num("rho", 1, low_open=True, high_open=True)}
CERTIFIED_SENSITIVITY = {**_SENSITIVITY, "sampling": Text(("certified",)), "lipschitz": POSITIVE,
                         "clip_norm": POSITIVE, "l2": POSITIVE, "tolerance": Num(0),
                         "beta": POSITIVE, "iterations": COUNT}  # the solver's data-independent step count

_KEY = {"dataset": Text(), "attack": Text(), "adaptive": Flag()}
# the lira rule's attacks other than RMIA: their rows leave RMIA's a empty, and only theirs may
_NOT_RMIA = tuple(a for a in (*REFERENCE_ATTACKS, *METRIC_ATTACKS) if a not in RMIA_ATTACKS)
_METHOD = Text(("none", *METHODS))
_METRICS = {name: PROBABILITY for name in ("accuracy", "accuracy_lo", "accuracy_hi", "auc", "auc_lo", "auc_hi",
                                           "tpr_at_*")} | {"n_members": COUNT, "n_nonmembers": COUNT, "fp_at_*": COUNT}
# eps = inf: the method's noise-free limit (noise_scale 0, no claim; relation noise_free_limits)
UTILITY = {"dataset": Text(), "mechanism": Text(METHODS), "eps": Num(0, low_open=True, finite=False),
           "delta": Num(0, 1, high_open=True), "repeat": COUNT, "noise_scale": Num(0),
           "sensitivity_norm": Text(("l1", "l2")), "sensitivity": POSITIVE,
           "guarantee_kind": Text(GUARANTEE_KINDS), "guarantee": Text(), "clean_accuracy": Num(0, 1, low_open=True),
           "accuracy": PROBABILITY, "utility_loss": Num(None, 1), "n_test": Num(2, integer=True),
           "decisions": Decisions(("n_test",)), "clean_decisions": Decisions(("n_test",), optional=True),
           # the tuning grid's best noise-free head on the same records (rule finetune's best_head.pt)
           "best_clean_decisions": Decisions(("n_test",), optional=True),
           "grid": (("dataset", "mechanism"), ("eps", "repeat")),
           "relations": noise_free_limits}
MIA = {**_KEY, "mechanism": _METHOD, "eps": Num(0, low_open=True, nan_where=("mechanism", "none")), "repeat": COUNT,
       **_METRICS, "decisions": Decisions(("n_members", "n_nonmembers")),
       "grid": (("dataset", "mechanism", "attack", "adaptive"), ("eps", "repeat"))}
LIRA = {**_KEY, "method": _METHOD, "eps": Num(0, low_open=True, nan_where=("method", "none")),
        "guarantee_kind": Text(GUARANTEE_KINDS), "targets": Num(1, integer=True), **_METRICS,
        "records": Num(2, integer=True), "draws": Num(1, integer=True),
        "rmia_a": Num(0, 1, nan_where=("attack", _NOT_RMIA)),  # RMIA's offline a, chosen on the shadows
        "grid": (("dataset", "method", "attack", "adaptive"), ("eps",))}
# lira_references rule: the clean heads attacked with 1, 2, 4, … shadows as references
LIRA_REFERENCES = {"dataset": Text(), "attack": Text(REFERENCE_ATTACKS), "references": Num(1, integer=True),
                   "targets": Num(1, integer=True), **_METRICS, "records": Num(2, integer=True),
                   "draws": Num(1, integer=True),
                   "rmia_a": Num(0, 1, nan_where=("attack", _NOT_RMIA)),
                   "grid": (("dataset", "attack"), ("references",))}
ROC = {**_KEY, "method": _METHOD, "eps": Num(0, low_open=True, nan_where=("method", "none")), "fpr": PROBABILITY,
       "tpr": PROBABILITY, "curves": True}  # many rows per key: one ROC curve
AUDIT = {**_KEY, "method": _METHOD, "eps": Num(0, low_open=True, nan_where=("method", "none")),
         "delta": Num(0, 1, high_open=True), "claimed_eps": Num(0, low_open=True, finite=False),  # none: ∞
         "guarantee_kind": Text(GUARANTEE_KINDS), "audit": Text(), "threat_model": Text(THREAT_MODELS), "eps_lower_bound": Num(0),
         "eps_ceiling": Num(0),  # the bound were every decision right: what the audit could prove at its n
         "n": COUNT, "grid": (("dataset", "method", "audit", "attack", "adaptive"), ("eps",)),
         "relations": audit_relations}
# training-time branch: dpadapter_train's results, dpcl_train's accounting (read by its report)
DPADAPTER_RESULTS = {"dataset": Text(), "pretraining": Text(("standard", "sam", "dpadapter")), "rho": Num(0),
                     "eps": POSITIVE, "repeat": COUNT,
                     # the pre-training a row's fine-tuning starts from: the procedure the claims compare
                     "pretraining_seed": COUNT,
                     "accuracy": PROBABILITY, "n_test": Num(2, integer=True), "decisions": Decisions(("n_test",)),
                     "robust_accuracy": PROBABILITY, "pretrain_accuracy": PROBABILITY,
                     "pretrain_robust_accuracy": PROBABILITY, "robust_noise": POSITIVE,
                     "robust_draws": Num(1, integer=True), "noise_multiplier": POSITIVE, "eps_spent": Num(0),
                     "grid": (("dataset", "pretraining", "rho"), ("eps", "repeat"))}
DPCL_ACCOUNTING = {"dataset": Text(), "method": Text(TRAINING_TIME_METHODS), "variant": Text(("naive", "dpcl")),
                   "role": Text(("target", "shadow")), "n": Num(1, integer=True), "delta": Num(0, 1, low_open=True,
                                                                                             high_open=True),
                   "noise_multiplier": POSITIVE, "mechanisms": Text(), "encoder_steps": COUNT, "head_steps": COUNT,
                   "encoder_batch": Num(1, integer=True), "head_batch": Num(1, integer=True),
                   "eps_target": Num(0, low_open=True, nan=True),  # empty at a fixed noise multiplier
                   "eps_rdp_without_replacement": Num(0), "eps_pld_poisson": Num(0),
                   "guarantee_kind": Text(GUARANTEE_KINDS), "sensitivities": Text(),
                   "relations": accountant_within_target}
# contrastive_attack rule (thesis Ch. 4): membership rows have no baseline, attribute rows no AUC or TPR
_MEMBERSHIP_ONLY = Num(0, 1, nan_where=("inference", "attribute"))
CONTRASTIVE = {"dataset": Text(), "target": Text(("supervised", "contrastive", "talos")),
               "lambda": Num(0, nan_where=("target", "supervised")), "repeat": COUNT,
               "inference": Text(INFERENCES), "attack": Text(),
               **{name: PROBABILITY for name in ("task_accuracy", "task_accuracy_lo", "task_accuracy_hi", "accuracy",
                                                 "accuracy_lo", "accuracy_hi")},
               **{f"queried_{split}_accuracy{end}": _MEMBERSHIP_ONLY
                  for split in ("train", "test") for end in ("", "_lo", "_hi")},
               "n_test": COUNT, "n": COUNT,
               **{name: _MEMBERSHIP_ONLY for name in ("auc", "auc_lo", "auc_hi", "tpr_at_*")},
               **{name: Num(0, integer=True, nan_where=("inference", "attribute"))
                  for name in ("n_members", "n_nonmembers", "fp_at_*")},
               **{name: Num(0, 1, nan_where=("inference", (MEMBERSHIP, MEMBERSHIP_TASK)))
                  for name in ("baseline", "baseline_lo", "baseline_hi")},
               "decisions": Decisions(("n",)), "task_decisions": Decisions(("n_test",)),
               "baseline_decisions": Decisions(("n",), absent_where=("inference", (MEMBERSHIP, MEMBERSHIP_TASK))),
               "grid": (("dataset", "target", "inference", "attack"), ("lambda", "repeat"))}
# semileak_attack rule (thesis Ch. 3): eps only for the DP-SGD target; views and similarity only for A_DA
SEMILEAK = {"dataset": Text(), "repeat": Num(0, integer=True), "target": Text(TARGETS),
            "eps": Num(0, low_open=True, nan=True),
            "step": Num(1, integer=True),
            "steps": Num(1, integer=True), "defence": Text(DEFENCES), "attack": Text(ATTACKS),
            "similarity": Text(("", *SIMILARITIES), empty=True), "views": Num(1, integer=True, nan=True),
            "is_default": Flag(), "member_kind": Text(MEMBER_KINDS), **_METRICS,
            "test_decisions": Decisions(("n_test",)),
            **{f"{split}_accuracy{end}": PROBABILITY for split in ("test", "train") for end in ("", "_lo", "_hi")},
            "n_test": Num(1, integer=True), "n_train": Num(1, integer=True), "overfitting": Num(-1, 1),
            "js_entropy": Num(0, 1), "js_entropy_lo": Num(0, 1), "js_entropy_hi": Num(0, 1),
            "noise_multiplier": Num(0, nan=True), "eps_spent": Num(0, nan=True),
            "delta": Num(0, 1, nan=True), "accountant": Text(("", "pld", "rdp", "prv"), empty=True),
            "grid": (("dataset", "repeat", "target", "eps", "step", "defence", "attack", "similarity", "views"),
                     ("member_kind",))}
# semileak_attack's per-record scores (scores.parquet): a line per (metrics row, record), the row by
# its key; `record` the image's index in the data set's pool
SCORE_KEY = SEMILEAK["grid"][0] + SEMILEAK["grid"][1]
SCORE_COLUMNS = (*SCORE_KEY, "record", "member", "score")


def _score_key(values) -> tuple:
    """A row key that compares equal between metrics.csv and scores.parquet: empty text and NaN
    (a CSV's empty cell) are both None."""
    return tuple(None if v is None or (isinstance(v, str) and v == "") or (isinstance(v, float) and np.isnan(v))
                 else v for v in values)


def attach_score_ranks(path, metrics: pd.DataFrame, queried: dict | None = None) -> pd.DataFrame:
    """`metrics` (one semileak_attack job's metrics.csv, loaded) with a `ranks` column: per row, the
    average ranks of its records' scores in scores.parquet `path`, members first, each group by
    record, which the report's paired AUC comparisons read. Checked against the rows: each row's
    records are its n_members members and n_nonmembers non-members, none twice, the same in every
    row of its dataset and member kind, every score finite, the AUC of the scores the row's own, and
    no scores of a row metrics.csv lacks. `queried` ((dataset, member kind) -> records) carries the
    record sets over the files of several repeats, whose trainings are pooled record by record."""
    from scipy.stats import rankdata

    try:
        scores = pd.read_parquet(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        fail(path, None, _reason(err), "a Parquet file as semileak_attack writes it")
    require(path, scores, list(SCORE_COLUMNS), "column")
    if scores.member.dtype != bool:
        fail(path, "member", f"dtype {scores.member.dtype}", "bool")
    if not np.isfinite(scores.score.to_numpy(dtype=float)).all():
        fail(path, "score", "a score that is not finite", "finite scores")
    groups = {_score_key(key): rows for key, rows in scores.groupby(list(SCORE_KEY), dropna=False, sort=False)}
    queried = {} if queried is None else queried  # (dataset, member kind) -> the records of its first row
    ranks = []
    for i, row in enumerate(metrics.itertuples(index=False)):
        key = _score_key(getattr(row, c) for c in SCORE_KEY)
        rows = groups.pop(key, None)
        where = f"the row of {dict(zip(SCORE_KEY, key))}"
        if rows is None:
            fail(path, None, f"no scores for {where} (metrics.csv line {i + 2})", "scores for every metrics row")
        members, others = rows[rows.member].sort_values("record"), rows[~rows.member].sort_values("record")
        if (len(members), len(others)) != (row.n_members, row.n_nonmembers) or rows.record.duplicated().any():
            fail(path, "record", f"{len(members)} members and {len(others)} non-members (some twice: "
                 f"{bool(rows.record.duplicated().any())}) for {where}",
                 f"its {row.n_members} members and {row.n_nonmembers} non-members, each once")
        # every target, checkpoint, attack and repeat is queried on the same records (the report
        # pairs two rows, and pools the repeats, record by record): one record set per member kind
        records = (tuple(members.record), tuple(others.record))
        if queried.setdefault((row.dataset, row.member_kind), records) != records:
            fail(path, "record", f"other records than the first {row.dataset} {row.member_kind} row's for {where}",
                 f"the same members and non-members in every row (and repeat) of member kind {row.member_kind}")
        row_ranks = rankdata(np.concatenate([members.score.to_numpy(), others.score.to_numpy()]))
        auc = (row_ranks[:row.n_members].sum() - row.n_members * (row.n_members + 1) / 2) / (row.n_members *
                                                                                           row.n_nonmembers)
        if abs(auc - row.auc) > 1e-9:
            fail(path, "score", f"scores of AUC {auc:.6f} for {where}", f"the row's AUC {row.auc:.6f}")
        ranks.append(row_ranks)
    if groups:
        fail(path, None, f"scores of {len(groups)} rows metrics.csv lacks, e.g. {next(iter(groups))}",
             "the rows of metrics.csv only")
    return metrics.assign(ranks=ranks)


def load_semileak_metrics(paths, scores, expect: dict[str, list[dict]] | None = None) -> pd.DataFrame:
    """Every dataset's semileak_attack metrics.csv (`paths`), each with its scores.parquet
    (`scores`, in the same order) attached as the rows' `ranks`: what the Semi-Leak report, the
    claims ledger and the digest read."""
    if len(scores) != len(paths):
        raise InputError(f"{len(scores)} scores.parquet files for {len(paths)} metrics.csv files (allowed: one each, "
                         f"in the same order)")
    grids = [expected_of(expect, p) for p in paths]  # every path has its grid before any file is read
    queried: dict = {}  # shared: the repeats of a dataset are pooled record by record (attacks.repeated)
    frames = [attach_score_ranks(s, load_csv_file(p, SEMILEAK, grid), queried)
              for p, s, grid in zip(paths, scores, grids)]
    return pd.concat(frames, ignore_index=True)


# semileak_train's history: per checkpoint the means over its steps (DP-SGD: its last step only)
SEMILEAK_HISTORY = {"role": Text(("target", "shadow")), "target": Text(TARGETS), "eps": Num(0, low_open=True, nan=True),
                    "step": Num(1, integer=True), "lr": Num(0), "loss_labelled": Num(0), "loss_unlabelled": Num(0, nan=True),
                    "mask_rate": Num(0, 1, nan=True), "clipped_fraction": Num(0, 1, nan=True),
                    "grid": (("role", "target", "eps"), ("step",))}
_LINK = {"dataset": Text(), "attack": Text(), "feature_set": Text(), "distance": Text(empty=True),  # supervised: none
         "auc": PROBABILITY, "precision": PROBABILITY, "recall": PROBABILITY, "f1": PROBABILITY}
LINK_ROWS = {**_LINK, "shadow": Text(empty=True), "run": COUNT,  # shadow: empty for the attacks without one
             "grid": (("dataset", "shadow", "attack", "feature_set", "distance"), ("run",))}
LINK_PROTECTION = {**_LINK, "mechanism": _METHOD, "eps": Num(0, low_open=True, nan_where=("mechanism", "none")),
                   "repeat": COUNT, "grid": (("dataset", "mechanism", "attack", "feature_set", "distance"),
                                             ("eps", "repeat"))}


# --------------------------------------------------------------------------------- loaders with cross-field checks

def _check_disjoint(path, splits: dict) -> None:
    seen: dict[int, str] = {}
    for name, index in splits.items():
        for i in index:
            if i in seen:
                fail(path, f"splits.{name}", f"index {i} is also in splits.{seen[i]}", "pairwise disjoint splits")
            seen[i] = name


def _check_pool(path, record: dict) -> None:
    """A splits file's record of the pool its indices point into (privssl.data.images.pool_record):
    the dataset's size, and a SHA-256 that the readers compare with the pool they load."""
    pool, size = record.get("pool"), DATASETS[record["dataset"]].labelled + DATASETS[record["dataset"]].unlabelled
    if not (isinstance(pool, dict) and set(pool) == {"size", "sha256"} and pool["size"] == size
            and isinstance(pool["sha256"], str) and re.fullmatch("[0-9a-f]{64}", pool["sha256"])):
        fail(path, "pool", repr(pool)[:200], f"{{size: {size}, sha256: 64 hex digits}}, the pool the splits were "
                                             "drawn from")


def load_image_splits(path) -> dict:
    """The data rule's splits.json: every split a list of indices into its dataset's pool, no index twice."""
    record = load_json_file(path, {"dataset": Text(tuple(DATASETS)), "splits": Each(Tensor(None, "int", None))})
    info = DATASETS[record["dataset"]]
    index = Tensor(None, "int", Num(0, "pool", high_open=True, integer=True))
    check_fields(path, record["splits"], {s: index for s in SPLITS}, {"pool": info.labelled + info.unlabelled},
                 "splits.")
    _check_disjoint(path, record["splits"])
    _check_pool(path, record)
    return record


def load_graph_splits(path) -> dict:
    """The graph_data rule's splits.json: node index lists below num_nodes, pairwise disjoint."""
    record = load_json_file(path, {"dataset": Text(), "num_nodes": Num(1, integer=True),
                                   "splits": Each(Tensor(None, "int", None))})
    index = Tensor(None, "int", Num(0, "num_nodes", high_open=True, integer=True))
    check_fields(path, record["splits"], {s: index for s in NODE_SPLITS}, {"num_nodes": record["num_nodes"]},
                 "splits.")
    _check_disjoint(path, record["splits"])
    return record


def load_sensitivity(path, recorded: dict | None = None) -> dict:
    """A sensitivity record: the sensitivity rule's (Δ̂1, Δ̂2 the k-th smallest of the m sampled
    distances; population sampling also ρ < γ) or the certified head's (proven Δ2). Every Δ the
    release calibrates on is finite and > 0; `recorded`: the settings the reading rule expects."""
    record = load_json_file(path, {"sampling": Text(("population", "paper", "certified"))}, recorded)
    if record["sampling"] == "certified":
        return check_fields(path, record, CERTIFIED_SENSITIVITY)
    schema = SAMPLED_SENSITIVITY | (POPULATION if record["sampling"] == "population" else {})
    check_fields(path, record, schema)
    for norm in ("l1", "l2"):
        kth = sorted(record[f"distances_{norm}"])[record["k"] - 1]
        if record[f"delta{norm[1]}"] != kth:
            fail(path, f"delta{norm[1]}", f"{record[f'delta{norm[1]}']:g}",
                 f"the k = {record['k']}-th smallest of distances_{norm}, {kth:g}")
    return record


def load_release(path, method: str, recorded: dict | None = None) -> dict:
    """A protect rule's release file of `method`: one positive noise scale per ε of a positive
    grid, the released heads (ε, draw, parameter) of the length its shapes give. A DP-SGD
    release also records each ε's training settings (`specs`, the tune rule's choice), returned
    as DPSGDSpecs: the attacks train their shadow heads with them."""
    from privssl.release.dpsgd_spec import DPSGDSpec

    release = load_tensor_file(path, RELEASE, recorded={"method": method} | (recorded or {}))
    if method == "dpsgd":
        specs = release.get("specs")
        if not isinstance(specs, list) or len(specs) != len(release["eps"]):
            fail(path, "specs", f"{type(specs).__name__} of {len(specs) if isinstance(specs, list) else 0} entries",
                 f"a list of {len(release['eps'])} DP-SGD settings, one per ε")
        try:
            release["specs"] = [DPSGDSpec.from_config(spec) for spec in specs]
        except (TypeError, ValueError) as err:
            fail(path, "specs", str(err), "DP-SGD settings (privssl.release.dpsgd_spec.DPSGDSpec)")
    return release


def load_lira_heads(path, set_size: int, recorded: dict | None = None) -> dict:
    """The lira_heads rule's file: finite heads, and per head the training set the rule drew, a
    uniform random subset of |d| = `set_size` pool records by the recorded seed. The sets are
    redrawn and compared: the attack's membership labels come from them, and a set that is not
    the head's (identical rows, a half-balanced design, another seed) inflates or deflates every AUC."""
    from privssl.attacks.lira import draw_training_sets  # the attack's own draw, imported only here

    heads = load_tensor_file(path, LIRA_HEADS, {"|d|": set_size}, recorded)
    if heads["flat"].shape[0] != heads["shadows"] + heads["targets"]:
        fail(path, "flat", f"{heads['flat'].shape[0]} heads",
             f"shadows + targets = {heads['shadows'] + heads['targets']}")
    drawn = draw_training_sets(heads["pool_size"], set_size, heads["flat"].shape[0], heads["seed"])
    differ = (heads["sets"] != drawn).any(1)
    if differ.any():
        h = int(differ.nonzero()[0, 0])
        fail(path, f"sets[{h}]", f"{heads['sets'][h, :8].tolist()}... ({int(differ.sum())} of {len(differ)} heads' "
                                 f"sets differ)", f"the draw of seed {heads['seed']}: {drawn[h, :8].tolist()}...")
    return heads


def load_attacker(path, shadow_size: int) -> dict:
    """The shadow rule's file; its indices point into the shadow split of `shadow_size` records."""
    return load_tensor_file(path, ATTACKER, {"|shadow|": shadow_size})


def load_link_target(path, num_nodes: int) -> dict:
    """The link_target rule's file for a graph of `num_nodes` nodes."""
    return load_tensor_file(path, LINK_TARGET, {"N": num_nodes})



def load_contrastive_splits(path) -> dict:
    """The contrastive_data rule's splits.json: pairwise disjoint index lists into the dataset's pool,
    and for each split a task label below n_task, a membership-task label below n_membership_task
    and an attribute below n_attribute per index."""
    record = load_json_file(path, {"dataset": Text(tuple(DATASETS)), "task_map": Text(),
                                   "n_task": Num(2, integer=True), "membership_task_map": Text(),
                                   "n_membership_task": Num(2, integer=True), "n_attribute": Num(2, integer=True),
                                   "splits": Each(Tensor(None, "int", None)), "task": Each(Tensor(None, "int", None)),
                                   "membership_task": Each(Tensor(None, "int", None)),
                                   "attribute": Each(Tensor(None, "int", None))})
    for prefix in ("", "membership_"):
        names, n = record.get(f"{prefix}task_names"), record[f"n_{prefix}task"]
        if not (isinstance(names, list) and len(names) == n and all(isinstance(name, str) for name in names)):
            fail(path, f"{prefix}task_names", repr(names)[:200], f"a list of n_{prefix}task = {n} names")
    info = DATASETS[record["dataset"]]
    bound = {"pool": info.labelled + info.unlabelled, "n_task": record["n_task"],
             "n_membership_task": record["n_membership_task"], "n_attribute": record["n_attribute"]}
    for field, limit in (("splits", "pool"), ("task", "n_task"), ("membership_task", "n_membership_task"),
                         ("attribute", "n_attribute")):
        schema = {s: Tensor((f"|{s}|",), "int", Num(0, limit, high_open=True, integer=True)) for s in CONTRASTIVE_SPLITS}
        check_fields(path, record[field], schema, bound, f"{field}.")
    _check_disjoint(path, record["splits"])
    _check_pool(path, record)
    return record


CONTRASTIVE_MODELS = {"role": Text(("target", "shadow")), "dataset": Text(tuple(DATASETS)),
                      "encoder": Text(ENCODERS), "width": Num(1, integer=True),
                      "in_channels": Num(1, integer=True), "image_size": Num(1, integer=True),
                      "n_task": Num(2, integer=True), "membership_task": Text(),
                      "n_membership_task": Num(2, integer=True)}
# λ is None for a supervised model; the layer maps the encoder's output (F) to the task's classes, the
# membership model's layer to the membership task's (its encoder None: the model's own)
CONTRASTIVE_MODEL = {"kind": Text(("supervised", "contrastive", "talos")), "lambda": Num(0, optional=True),
                     "repeat": COUNT, "encoder": Each(Tensor(None, "number"))}
CONTRASTIVE_LAYER = {"weight": Tensor((1, "F", "n_task")), "bias": Tensor((1, "n_task"))}
CONTRASTIVE_MEMBERSHIP_LAYER = {"weight": Tensor((1, "F", "n_membership_task")),
                                "bias": Tensor((1, "n_membership_task"))}


def load_contrastive_models(path, role: str, dataset: str) -> dict:
    """A contrastive_train file of `role` (target or shadow) on `dataset`: the role's models, each
    an encoder state and a finite linear layer to the task's classes, and its membership model (a
    layer to the membership task's classes, with an encoder of its own only for a supervised
    model); λ None exactly for the supervised models."""
    bundle = load_tensor_file(path, CONTRASTIVE_MODELS, recorded={"role": role, "dataset": dataset})
    models = bundle.get("models")
    if not (isinstance(models, list) and models):
        fail(path, "models", repr(models)[:200], "a non-empty list of models")
    for i, model in enumerate(models):
        check_fields(path, model, CONTRASTIVE_MODEL, prefix=f"models[{i}].")
        if (model["kind"] == "supervised") != (model.get("lambda") is None):
            fail(path, f"models[{i}].lambda", f"{model.get('lambda')} for a {model['kind']} model",
                 "None for supervised models, a number >= 0 otherwise")
        check_fields(path, model.get("layer"), CONTRASTIVE_LAYER, {"n_task": bundle["n_task"]}, f"models[{i}].layer.")
        membership = model.get("membership")
        if not (isinstance(membership, dict) and set(membership) == {"encoder", "layer"}):
            fail(path, f"models[{i}].membership", repr(membership)[:200],
                 "a dict of its encoder (None: the model's own) and its layer")
        if membership["encoder"] is not None:
            if model["kind"] != "supervised":
                fail(path, f"models[{i}].membership.encoder", "an encoder of its own",
                     "None for a contrastive or Talos model, whose encoder serves both tasks")
            check_fields(path, membership, {"encoder": Each(Tensor(None, "number"))}, prefix=f"models[{i}].membership.")
        check_fields(path, membership["layer"], CONTRASTIVE_MEMBERSHIP_LAYER,
                     {"n_membership_task": bundle["n_membership_task"]}, f"models[{i}].membership.layer.")
    return bundle


def load_semileak_splits(path) -> dict:
    """The semileak_data rule's splits.json: four pairwise disjoint parts of one size, index lists into
    the dataset's pool, and the labelled images of each train part, a subset of that part."""
    record = load_json_file(path, {"dataset": Text(tuple(DATASETS)), "n_classes": Num(2, integer=True),
                                   "splits": Each(Tensor(None, "int", None)),
                                   "labelled": Each(Tensor(None, "int", None))})
    info = DATASETS[record["dataset"]]
    bound = {"pool": info.labelled + info.unlabelled}
    index = Num(0, "pool", high_open=True, integer=True)
    check_fields(path, record["splits"], {s: Tensor(("part",), "int", index) for s in SEMILEAK_SPLITS}, bound,
                 "splits.")
    train = ("target_train", "shadow_train")
    check_fields(path, record["labelled"], {s: Tensor((f"|{s}|",), "int", index) for s in train}, bound, "labelled.")
    _check_disjoint(path, record["splits"])
    for name in train:
        outside = sorted(set(record["labelled"][name]) - set(record["splits"][name]))
        if outside or len(set(record["labelled"][name])) != len(record["labelled"][name]):
            fail(path, f"labelled.{name}", f"indices {outside[:5]} outside the part, or repeated",
                 f"distinct indices of splits.{name}")
    _check_pool(path, record)
    return record


SEMILEAK_MODELS = {"role": Text(("target", "shadow")), "target": Text(TARGETS), "dataset": Text(tuple(DATASETS)),
                   "architecture": Text(ARCHITECTURES), "width": Num(1, integer=True),
                   "in_channels": Num(1, integer=True), "n_classes": Num(2, integer=True),
                   "steps": Num(1, integer=True)}


def load_semileak_models(path, role: str, target: str | None, dataset: str) -> dict:
    """A semileak_train file of `role` on `dataset` (of `target`, when given): one model per ε (one
    model, ε None, without DP-SGD), each the EMA states at its checkpoint steps, the last of them
    at `steps`; the DP-SGD models with their σ, δ and spent ε."""
    recorded = {"role": role, "dataset": dataset} | ({} if target is None else {"target": target})
    bundle = load_tensor_file(path, SEMILEAK_MODELS, recorded=recorded)
    models = bundle.get("models")
    if not (isinstance(models, list) and models):
        fail(path, "models", repr(models)[:200], "a non-empty list of models")
    private = {"eps": POSITIVE, "noise_multiplier": POSITIVE, "eps_spent": Num(0), "delta": Num(0, 1, low_open=True),
               "accountant": Text(("pld", "rdp", "prv"))}
    for i, model in enumerate(models):
        if (bundle["target"] == "fixmatch_dpsgd") != (model.get("eps") is not None):
            fail(path, f"models[{i}].eps", repr(model.get("eps")), "a number > 0 for fixmatch_dpsgd, None otherwise")
        if model["eps"] is not None:
            check_fields(path, model, private, prefix=f"models[{i}].")
        states = model.get("states")
        if not (isinstance(states, dict) and states and all(isinstance(k, int) and 1 <= k <= bundle["steps"]
                                                            for k in states) and bundle["steps"] in states):
            fail(path, f"models[{i}].states", repr(sorted(states) if isinstance(states, dict) else states)[:200],
                 f"EMA states at integer steps 1 .. {bundle['steps']}, the last step among them")
        for step, state in states.items():
            check_fields(path, state, {name: Tensor(None, "number") for name in state},
                         prefix=f"models[{i}].states[{step}].")
    return bundle


def load_encoder(path, device: torch.device) -> torch.nn.Module:
    """Rebuild the encoder saved by scripts/pretrain.py."""
    from privssl.training.encoders import build_encoder

    saved = load_tensor_file(path, ENCODER)
    encoder = build_encoder(saved["encoder"], saved["in_channels"], saved["image_size"], saved["width"])
    encoder.load_state_dict(saved["state"])
    return encoder.to(device)


def load_tuning_folds(path, config: dict, seed: int,
                      log: Callable[[str], None]) -> tuple[torch.Tensor, torch.Tensor, int, int, list]:
    """What rule `tune` scores on: the reference split's features (float64, the heads' dtype) and
    labels, the class count, |d| (the training size of each fold) and the folds
    (privssl.release.tuning.folds, `tuning.folds` of them, drawn from `seed`), said in `log`."""
    import torch

    from privssl.release.tuning import folds  # here only: its accountants' imports would slow every reader

    feats = load_tensor_file(path, features("finetune", "reference"))
    x, y, n = feats["reference"].to(torch.float64), feats["reference_labels"], len(feats["finetune_labels"])
    splits = folds(len(y), n, config.get("tuning", {}).get("folds", 2), seed)
    log(f"{len(splits)} folds, each trains on |d| = {n} of {len(y)} reference records")
    return x, y, int(feats["n_classes"]), n, splits


def load_private_sets(splits_path: str, data_root: str, attacker_path: str) -> PrivateSets:
    """What a training-time release trains on and is queried on: the images and labels of d, of
    the evaluated splits and of the attacker's shadow records (those `inside` its shadow model and
    its balanced pairs), from the splits file, the data set and the shadow rule's attacker file."""
    import torch

    from privssl.data.images import load_pool
    from privssl.release.training_time import EVALUATED, PrivateSets

    splits = load_image_splits(splits_path)
    pool = load_pool(splits["dataset"], data_root, recorded=splits["pool"])
    index = {name: torch.tensor(splits["splits"][name], dtype=torch.long)
             for name in (*EVALUATED, "shadow", "pretrain")}
    attacker = load_attacker(attacker_path, len(index["shadow"]))
    index["shadow_inside"] = index["shadow"][attacker["inside"].long()]
    index["shadow_pairs"] = index["shadow"][attacker["pairs"].long()]
    del index["shadow"]
    return PrivateSets({k: pool.images[v] for k, v in index.items()}, {k: pool.labels[v] for k, v in index.items()},
                       pool.n_classes, attacker)


def every_claim_once(claims: tuple[str, ...]) -> Callable[[object, pd.DataFrame], None]:
    """A catalogue's relation: one row for each claim its reader settles. A claim given twice is
    refused (a dict by claim would keep the last of two paper values silently), and so is a missing
    one, before the reader computes anything."""
    def check(path, frame: pd.DataFrame) -> None:
        first: dict[str, int] = {}
        for line, claim in enumerate(frame["claim"], start=2):
            if claim in first:
                fail(path, "claim", f"the claim {claim!r} on line {line} repeats line {first[claim]}",
                     "each claim once")
            first[claim] = line
        missing = [c for c in claims if c not in first]
        if missing:
            fail(path, "claim", f"no row for {', '.join(missing)}", f"a row for each of the {len(claims)} claims "
                                                                     f"the report settles: {', '.join(claims)}")
    return check


# resources/thesis_contrastive.csv: the thesis's statement and quoted values of each contrastive claim
THESIS_CLAIMS = {"claim": Text(CLAIMS), "statement": Text(), "quoted_values": Text(), "source": Text(),
                 "relations": every_claim_once(CLAIMS)}
# the same columns, thesis Ch. 3's claims (resources/thesis_semileak.csv)
THESIS_SEMILEAK = {**THESIS_CLAIMS, "claim": Text(SEMILEAK_CLAIMS), "relations": every_claim_once(SEMILEAK_CLAIMS)}
# resources/claims.csv: the claims ledger's catalogue, one row per claim of the seeds; paper_difference:
# the difference the paper states (its smallest, oriented as the ledger's row), empty where it states none
PAPER_CLAIMS = {"claim": Text(LEDGER_CLAIMS), "seed": Text(), "source": Text(), "statement": Text(),
                "paper_value": Text(), "paper_difference": Num(0, low_open=True, nan=True),
                "relations": every_claim_once(LEDGER_CLAIMS)}


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
