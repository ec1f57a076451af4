"""Per-record files: the one tidy shape in which every attack writes what it decided of each record
(a membership attack's and a link attack's score and call, the attribute attack's guess), as
Parquet beside its summary table (privssl.io.atomic_write_parquet).

A line per (summary row, record): the row's key (its table's grid columns, text as categorical
columns, stored once per file), the record's columns (the split it was drawn from, its image's
index in the data set's pool as in splits.json, whether it is a member; LiRA's also the target
head that decided it) and the attack's `score` (higher = member); where the summary row's metrics
rest on a decision per record (the MIA rows' accuracy: member iff score >= the threshold the
attacker fitted on its shadow data), that decision too (`called_member`), which the reports read
back as the row's per-record decisions (`row_decisions`). With pandas alone a user recomputes a
row's metric, plots a score distribution or joins the scores to the records (docs/pipeline.md,
"Reading the per-record scores")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from privssl.artefacts.specs import Num, fail
from privssl.artefacts.tables import key_value, show_key
from privssl.io import pack_decisions


def score_key(summary: dict) -> tuple[str, ...]:
    """The key columns of a summary table's rows: its grid's, fixed and varied."""
    return summary["grid"][0] + summary["grid"][1]


def line_schema(summary: dict, record_columns: dict) -> dict:
    """The schema of a summary table's per-record lines: the row key's columns as the summary
    declares them, then the record's columns."""
    return {**{c: summary[c] for c in score_key(summary)}, **record_columns, "many_rows_per_key": True}


def score_schema(summary: dict, record_columns: dict) -> dict:
    """line_schema with the record's score last (±inf allowed: a log-likelihood ratio can be)."""
    return line_schema(summary, {**record_columns, "score": Num(finite=False)})


def _repeated(values: list, times: int):
    """Each value `times` times in a row; text as a categorical column, None and empty text in it
    as missing, as a CSV's empty cell reads (a link MLP attack's distance, the shadow of a graph's
    own attacks)."""
    if any(isinstance(v, str) for v in values):
        categories = list(dict.fromkeys(v for v in values if v not in (None, "")))
        codes = [-1 if v in (None, "") else categories.index(v) for v in values]
        return pd.Categorical.from_codes(np.repeat(codes, times), categories)
    return np.repeat(values, times)


def tiled(column, times: int):
    """The whole column `times` times over; a categorical column stays categorical."""
    if isinstance(column, pd.Categorical):
        return pd.Categorical.from_codes(np.tile(column.codes, times), column.categories)
    return np.tile(column, times)


def score_lines(rows: list[dict], key: tuple[str, ...], scores: list[np.ndarray], records: dict,
                column: str = "score") -> pd.DataFrame:
    """The lines of `rows` (summary rows, each holding the `key` columns), each row's `scores`
    (one per record, in the order of `records`; as the column `column`) beside the records'
    columns (`records`: name -> one value per record, the same records for every row)."""
    lengths = {len(column) for column in records.values()}
    if len(lengths) != 1 or len(scores) != len(rows) or any(len(s) != next(iter(lengths)) for s in scores):
        raise ValueError(f"{len(scores)} score vectors of sizes {sorted({len(s) for s in scores})} for {len(rows)} "
                         f"rows and record columns of lengths {sorted(lengths)}: one score per record and row")
    n = lengths.pop()
    return pd.DataFrame({**{c: _repeated([row[c] for row in rows], n) for c in key},
                         **{c: tiled(column, len(rows)) for c, column in records.items()},
                         column: np.concatenate(scores)})


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


def with_calls(lines: pd.DataFrame, called: list[np.ndarray], column: str = "called_member") -> pd.DataFrame:
    """score_lines' `lines` with each row's calls (one bool per record, in the rows' order) as
    the column `column` (a membership attack's `called_member`, a link attack's `called_edge`),
    before the score."""
    lines.insert(lines.columns.get_loc("score"), column, np.concatenate(called))
    return lines


def row_codes(frame: pd.DataFrame, key: tuple[str, ...]) -> np.ndarray:
    """Each line's summary row, numbered in order of first appearance (pandas' ngroup over `key`,
    NaN keys equal). The writers put a row's lines together, so a row is a run of equal keys:
    found by comparing each line with the one before, a pass over the columns instead of a
    12-million-line group-by (the Fashion-MNIST preset's MIA scores); lines of a row that are not
    together fall back to the group-by."""
    change = np.zeros(len(frame), bool)
    change[:1] = True
    for column in key:
        values = frame[column]
        values = values.cat.codes.to_numpy() if isinstance(values.dtype, pd.CategoricalDtype) else values.to_numpy()
        differs = values[1:] != values[:-1]
        if values.dtype.kind == "f":  # NaN == NaN in a key (the clean head's eps, a supervised model's lambda)
            differs &= ~(np.isnan(values[1:]) & np.isnan(values[:-1]))
        change[1:] |= differs
    if not frame[list(key)].iloc[np.flatnonzero(change)].duplicated().any():  # one run per row
        return np.cumsum(change) - 1
    return frame.groupby(list(key), observed=True, sort=False, dropna=False).ngroup().to_numpy()


def called_by_a_threshold(path, frame: pd.DataFrame, key: tuple[str, ...], call: str = "called_member") -> None:
    """Each row's `call` column is one threshold on its scores (called iff score >= t: a member,
    an edge), as the attack decided: every record called scores above every record not called (±inf
    rank as privssl.attacks.statistics.finite_scores ranks them; the schema refuses NaN). A
    decision that no threshold gives is not the attack's: a shuffled or miscopied column."""
    scores = frame.score.to_numpy(dtype=float)
    called = frame[call].to_numpy()
    codes = row_codes(frame, key)
    n = codes.max() + 1
    lowest_called, highest_not = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(lowest_called, codes[called], scores[called])
    np.maximum.at(highest_not, codes[~called], scores[~called])
    calls = np.bincount(codes, weights=called, minlength=n)
    both = (calls > 0) & (calls < np.bincount(codes, minlength=n))  # some records called, some not
    bad = np.flatnonzero(both & ~(lowest_called > highest_not))
    if bad.size:
        g = int(bad[0])
        i = int(np.flatnonzero(codes == g)[0])
        fail(path, call, f"the row of line {i + 2}: a record called scores {lowest_called[g]:g}, one not "
             f"called {highest_not[g]:g}", "called iff score >= one threshold per row (every called record scoring "
             "above every other)")


@dataclass(frozen=True)
class Outcome:
    """What a per-record file decides of each record and which summary columns that gives: the
    attack's `call` against the record's `truth` (right where equal), packed into the summary's
    `column` of decisions, whose mean is its `accuracy` column; the summary's `count` columns add
    up to the number of records decided, and its `members` column (where the truth is membership)
    counts those whose truth is true."""

    call: str
    truth: str
    count: tuple[str, ...]
    column: str = "decisions"
    accuracy: str = "accuracy"
    members: str | None = None


MEMBERSHIP_CALLS = Outcome("called_member", "member", ("n_members", "n_nonmembers"),  # a membership attack's
                           members="n_members")
ATTRIBUTE_GUESSES = Outcome("guess", "attribute", ("n",))  # the attribute attack's
BASELINE_GUESSES = Outcome("baseline_guess", "attribute", ("n",), "baseline_decisions", "baseline")  # its baseline's


def row_decisions(path, frame: pd.DataFrame, key: tuple[str, ...],
                  outcome: Outcome = MEMBERSHIP_CALLS) -> tuple[pd.DataFrame, np.ndarray]:
    """Each summary row's decisions, right or wrong per record (`outcome`'s call == its truth: a
    membership attack's called_member against member, an attribute attack's guess against the
    attribute), packed as privssl.io.pack_decisions packs a table's `decisions` cell, in the
    file's record order, with the accuracy they give; and the records they decide ((2, n): the
    `record` and truth columns of every row, which must be the same for every row: the reports
    pair two rows record by record, column by column). One line per row key, with its number of
    records (`decided_records`)."""
    call, truth = outcome.call, outcome.truth
    codes = row_codes(frame, key)
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes)
    if (sizes != sizes[0]).any():
        fail(path, None, f"rows scoring {sorted(set(sizes.tolist()))} records", "the same records for every row")
    shape = (len(sizes), sizes[0])
    records, truths = (frame[c].to_numpy()[order].reshape(shape) for c in ("record", truth))
    _, first, repeats = np.unique(records[0], return_index=True, return_counts=True)
    if (repeats > 1).any():  # a record decided twice counts twice in the accuracy
        i = int(order[first[np.argmax(repeats > 1)]])
        fail(path, "record", f"{records[0][first[np.argmax(repeats > 1)]]} on line {i + 2} and again in its row",
             "each record once per row")
    for column, values in (("record", records), (truth, truths)):
        if (values != values[0]).any():  # a member flag moved keeps the accuracy, not the decisions
            g = int(np.flatnonzero((values != values[0]).any(axis=1))[0])
            fail(path, column, f"the row of line {int(order[g * sizes[0]]) + 2} scores other records, or in another "
                 f"order, or with other {truth} values than the first",
                 "the same records in the same order for every row")
    right = frame[call].to_numpy()[order].reshape(shape) == truths
    rows = frame[list(key)].iloc[order[::sizes[0]]].reset_index(drop=True)
    rows = rows.astype({c: object for c in key if isinstance(rows[c].dtype, pd.CategoricalDtype)})
    evaluated = np.stack([records[0], truths[0]])
    return rows.assign(decisions=[pack_decisions(r) for r in right], decided_accuracy=right.mean(axis=1),
                       decided_records=shape[1]), evaluated


def attach_decisions(rows: pd.DataFrame, paths, scores: list[tuple[object, pd.DataFrame]], key: tuple[str, ...],
                     scored: np.ndarray | None = None, outcome: Outcome = MEMBERSHIP_CALLS) -> pd.DataFrame:
    """`rows` (a summary table, read from `paths`) with the `outcome.column` cell of each of its
    scored rows (`scored`, a mask; default every row) from its per-record calls (`scores`: each
    file's path and lines; row_decisions): every scored row has exactly one row of lines and every
    row of lines its scored row, in one file; the row's `outcome.count` columns number its
    records (and `outcome.members` its members), and its `outcome.accuracy` column is what its
    calls give; the files of one dataset decide the same records in the same order (the reports
    pair their rows record by record). The rows keep their order."""
    call, column, accuracy = outcome.call, outcome.column, outcome.accuracy
    decided, evaluated = [], {}
    for path, lines in scores:
        found, records = row_decisions(path, lines, key, outcome)
        found["decided_in"] = str(path)
        if outcome.members:
            found["decided_members"] = int(records[1].astype(bool).sum())
        for dataset in found.dataset.unique():
            first = evaluated.setdefault(dataset, (path, records))
            if not np.array_equal(first[1], records):
                fail(path, "record", f"other records, or in another order, or other members, than {first[0]}",
                     f"the records of every score file of {dataset}, in one order")
        decided.append(found)
    columns = list(key)
    table = (pd.concat(decided, ignore_index=True) if decided
             else pd.DataFrame(columns=[*columns, "decisions", "decided_accuracy", "decided_records", "decided_in",
                                        "decided_members"]))
    seen = {}
    for i, values in enumerate(table[columns].itertuples(index=False)):  # one file given twice, or two holding a row
        j = seen.setdefault(tuple(key_value(v) for v in values), i)
        if j != i:
            row = show_key(columns, [key_value(v) for v in values])
            fail(", ".join(map(str, [p for p, _ in scores])), None, f"the row {row} in {table.decided_in.iloc[j]} "
                 f"and in {table.decided_in.iloc[i]}", "each row's per-record lines in one file")
    scored = np.ones(len(rows), bool) if scored is None else scored
    merged = rows[columns].merge(table, on=columns, how="left", indicator=True, validate="one_to_one")
    unscored = rows[scored & (merged._merge == "left_only").to_numpy()]
    unread = table.merge(rows.loc[scored, columns], on=columns, how="left", indicator=True)
    unread = unread[unread._merge == "left_only"]
    for found, where, what in ((unscored, paths, f"per-record lines ({call}) for it"),
                               (unread, [p for p, _ in scores], "its summary row")):
        if not found.empty:
            row = show_key(columns, [key_value(v) for v in found[columns].iloc[0]])
            fail(", ".join(map(str, where)), None, f"the row {row} without {what}",
                 "one row of per-record lines per scored summary row")
    # the calls are the row's: as many records as it counts (a file of another run or config
    # decides more or fewer), and their accuracy is the one it reports (a member column, a call
    # or a row's scores swapped for another's moves it by at least 1/n)
    counts = [("decided_records", outcome.count, "record", "records decided")]
    if outcome.members:  # members and non-members swapped keep the sum
        counts.append(("decided_members", (outcome.members,), outcome.truth, "members among the records decided"))
    for decided_count, count, field, what in counts:
        counted = rows[list(count)].to_numpy(float).sum(axis=1)
        off = scored & (merged[decided_count].to_numpy(float) != counted)
        if off.any():
            i = int(np.flatnonzero(off)[0])
            row = show_key(columns, [key_value(v) for v in rows[columns].iloc[i]])
            fail(merged.decided_in.iloc[i], field, f"{merged[decided_count].iloc[i]:g} {what} for the row {row}",
                 f"the {' + '.join(count)} = {counted[i]:g} it counts")
    off = scored & ~np.isclose(merged.decided_accuracy.to_numpy(float), rows[accuracy].to_numpy(float), rtol=0,
                               atol=1e-9)
    if off.any():
        i = int(np.flatnonzero(off)[0])
        row = show_key(columns, [key_value(v) for v in rows[columns].iloc[i]])
        fail(", ".join(map(str, [p for p, _ in scores])), call, f"the calls of the row {row} are right on "
             f"{merged.decided_accuracy.iloc[i]:g} of its records", f"its {accuracy} {rows[accuracy].iloc[i]:g}")
    out = rows.copy()
    if column not in out:
        out[column] = None
    out.loc[scored, column] = merged.decisions.to_numpy()[scored]
    return out
