"""Per-record scores: the one tidy shape in which every membership attack writes the score behind
each of its decisions, as Parquet beside its summary table (privssl.io.atomic_write_parquet).

A line per (summary row, record): the row's key (its table's grid columns, text as categorical
columns, stored once per file), the record's columns (the split it was drawn from, its image's
index in the data set's pool as in splits.json, whether it is a member; LiRA's also the target
head that decided it) and the attack's `score` (higher = member). With pandas alone a user
recomputes a row's metric, plots a score distribution or joins the scores to the records
(docs/pipeline.md, "Reading the per-record scores")."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.artefacts.specs import Num


def score_key(summary: dict) -> tuple[str, ...]:
    """The key columns of a summary table's rows: its grid's, fixed and varied."""
    return summary["grid"][0] + summary["grid"][1]


def score_schema(summary: dict, record_columns: dict) -> dict:
    """The schema of a summary table's scores: the row key's columns as the summary declares them,
    the record's columns, and the score (±inf allowed: a log-likelihood ratio can be)."""
    return {**{c: summary[c] for c in score_key(summary)}, **record_columns, "score": Num(finite=False),
            "many_rows_per_key": True}


def _repeated(values: list, times: int):
    """Each value `times` times in a row; text as a categorical column."""
    if isinstance(values[0], str):
        categories = list(dict.fromkeys(values))
        return pd.Categorical.from_codes(np.repeat([categories.index(v) for v in values], times), categories)
    return np.repeat(values, times)


def tiled(column, times: int):
    """The whole column `times` times over; a categorical column stays categorical."""
    if isinstance(column, pd.Categorical):
        return pd.Categorical.from_codes(np.tile(column.codes, times), column.categories)
    return np.tile(column, times)


def score_lines(rows: list[dict], key: tuple[str, ...], scores: list[np.ndarray], records: dict) -> pd.DataFrame:
    """The lines of `rows` (summary rows, each holding the `key` columns), each row's `scores`
    (one per record, in the order of `records`) beside the records' columns (`records`: name ->
    one value per record, the same records for every row)."""
    lengths = {len(column) for column in records.values()}
    if len(lengths) != 1 or len(scores) != len(rows) or any(len(s) != next(iter(lengths)) for s in scores):
        raise ValueError(f"{len(scores)} score vectors of sizes {sorted({len(s) for s in scores})} for {len(rows)} "
                         f"rows and record columns of lengths {sorted(lengths)}: one score per record and row")
    n = lengths.pop()
    return pd.DataFrame({**{c: _repeated([row[c] for row in rows], n) for c in key},
                         **{c: tiled(column, len(rows)) for c, column in records.items()},
                         "score": np.concatenate(scores)})


def split_records(splits: dict, chosen: dict) -> dict:
    """The record columns of records drawn from named splits: `chosen` maps a split to
    (positions in that split, whether each is a member), in the order the scores take them;
    `splits` is splits.json's split -> pool indices."""
    names = list(chosen)
    return {"split": pd.Categorical.from_codes(np.repeat(np.arange(len(names)),
                                                         [len(np.asarray(p)) for p, _ in chosen.values()]), names),
            "record": np.concatenate([np.asarray(splits[s], dtype=np.int64)[np.asarray(p, dtype=np.int64)]
                                      for s, (p, _) in chosen.items()]),
            "member": np.concatenate([np.broadcast_to(np.asarray(m, dtype=bool), (len(np.asarray(p)),))
                                      for p, m in chosen.values()])}
