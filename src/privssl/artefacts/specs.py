"""The value specs of the artefact schemas and the generic checks they drive.

A schema is a dict of field -> spec (`Num`, `Text`, `Flag`, `Decisions`, `Tensor`, `Shapes`,
`Params`, `Each`, `Names`); `check_fields` checks a record against it in order, through the three
generic checks `check_numbers`, `require` and `check_tensor`. A bad value is refused by `fail`
with an `ArtefactError` naming the file, the field and what was expected. Also the specs every
track's schemas share (POSITIVE, PROBABILITY, COUNT, a label tensor).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import pandas as pd

from privssl.io import InputError, unpack_decisions


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
    """A `nan_where` value: one value, or a tuple of them."""
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
            other = np.flatnonzero(~value.isin([True, False]).to_numpy())
            if other.size:
                fail(path, field, f"{value.iloc[int(other[0])]!r} on line {int(other[0]) + 2}", self.describe(bound))
            # 0 and 1 equal False and True: a column of numbers, not of flags (a Parquet int column)
            fail(path, field, f"a column of dtype {value.dtype}", self.describe(bound))


@dataclass(frozen=True)
class Decisions:
    """A table column of per-record cells: decisions packed by privssl.io.pack_decisions (each
    cell holds exactly its row's number of records, the sum of the `count` columns, and no bit past
    the last). `optional`: a cell may be empty (the clean head's decisions, which the training-time
    releases' rows do not carry)."""

    count: tuple[str, ...]
    optional: bool = False

    def describe(self, bound: dict) -> str:
        return f"per-record decisions, {' + '.join(self.count)} bits as hex digits"

    def check(self, path, field, value, bound, frame=None) -> None:
        records = frame[list(self.count)].sum(axis=1).to_numpy()
        for i, (cell, n) in enumerate(zip(value, records)):
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


# --------------------------------------------------------------------------------- schemas

POSITIVE = Num(0, low_open=True)
PROBABILITY = Num(0, 1)
COUNT = Num(0, integer=True)


def _label(size: str) -> Tensor:
    return Tensor((size,), "int", Num(0, "n_classes", high_open=True, integer=True))
