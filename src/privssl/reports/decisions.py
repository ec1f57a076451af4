"""The per-record decisions of a table's rows, as the (draws, records) layouts that
privssl.attacks.repeated turns into intervals.

A row of utility.csv, mia.csv, the contrastive metrics or DPAdapter's results is one draw (a noise
draw, a training repeat) of one release or model; its `decisions` cell holds one bit per record
(right or wrong, in an order fixed for the table: the test set, or the balanced members and
non-members), packed by privssl.io.pack_decisions (a mia.csv row's and a contrastive membership
row's, by their loaders from the attack's per-record calls: artefacts.image.load_mia,
artefacts.contrastive.load_contrastive). Stacking the rows of one release gives its
layout; two releases of one table decide the same records, column by column, so their layouts
pair.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.attacks.repeated import Estimate, paired_difference, proportion
from privssl.io import unpack_decisions

DECISIONS = "decisions"


def records_of(rows: pd.DataFrame, count: str | tuple[str, ...]) -> int:
    """The number of records of the rows' decisions: one count column, or the sum of several
    (members + non-members); every row must agree."""
    columns = (count,) if isinstance(count, str) else count
    sizes = rows[list(columns)].sum(axis=1).astype(int).unique()
    if len(sizes) != 1:
        raise ValueError(f"the draws of one layout decide different numbers of records ({sorted(sizes)}; "
                         f"columns {', '.join(columns)}): they cannot be paired or clustered by record")
    return int(sizes[0])


def layout(rows: pd.DataFrame, count: str | tuple[str, ...], column: str = DECISIONS) -> np.ndarray:
    """(draws, records) bool: one row per table row (in the order of `repeat` where present)."""
    if rows.empty:
        raise ValueError("no rows to stack into a layout of decisions")
    ordered = rows.sort_values("repeat") if "repeat" in rows.columns else rows
    records = records_of(ordered, count)
    return np.stack([unpack_decisions(cell, records) for cell in ordered[column]])


def estimate(rows: pd.DataFrame, count: str | tuple[str, ...], column: str = DECISIONS) -> Estimate:
    """The rows' mean decision with its record-clustered interval."""
    return proportion(layout(rows, count, column))


def paired(a: pd.DataFrame, b: pd.DataFrame, count: str | tuple[str, ...], column: str = DECISIONS,
           column_b: str | None = None) -> Estimate:
    """mean(a) − mean(b) of two releases that decided the same records."""
    return paired_difference(layout(a, count, column), layout(b, count, column_b or column))


def distinct_trainings(rows: pd.DataFrame, columns: tuple[str, ...] = (DECISIONS,)) -> int:
    """The independent trainings behind the rows of one arm: its repeats that differ in what they
    decided (every record of every `columns` cell). Two repeats deciding every record alike are
    one training counted twice (the same seed, a copied model, a cached result): a verdict about a
    training procedure must not take them for two, and independent trainings on hundreds of records
    never agree on every one."""
    if "repeat" not in rows.columns:
        return 1
    return len({tuple(tuple(sorted(group[c].astype(str))) for c in columns)
                for _, group in rows.groupby("repeat")})
