"""A test's summary rows with packed `decisions` cells, written as the attack rules write them:
the summary CSV without the scored rows' cells and the per-record scores whose calls give them
back (artefacts.record_scores.attach_decisions; artefacts.image.load_mia,
artefacts.contrastive.load_contrastive), and the contrastive attribute rows' per-record guesses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from privssl.artefacts.contrastive import CONTRASTIVE_KEY, load_contrastive
from privssl.artefacts.image import MIA_KEY
from privssl.io import atomic_write_csv, atomic_write_parquet, unpack_decisions


def write_scored(frame: pd.DataFrame, key: tuple[str, ...], csv: Path, scores: Path, splits: tuple[str, str],
                 scored: np.ndarray | None = None, summary: pd.DataFrame | None = None) -> tuple[str, str]:
    """`csv` and `scores` of `frame`'s rows (`scored`: the rows with scores; default all, and then
    the summary has no decisions column): each scored row's records are its n_members members
    (split splits[0]) then its n_nonmembers non-members (splits[1]), its call on each the one its
    decision (right or wrong) implies, its score 1 where it calls a member and 0 where not; a
    scored row's decisions cell left empty (`summary`: the summary to write instead)."""
    every = scored is None
    scored = np.ones(len(frame), bool) if every else scored
    lines = []
    for row in frame[scored].to_dict("records"):
        member = np.arange(int(row["n_members"] + row["n_nonmembers"])) < row["n_members"]
        called = unpack_decisions(row["decisions"], len(member)) == member
        lines.append(pd.DataFrame({**{c: [row[c]] * len(member) for c in key},
                                   "split": np.where(member, *splits), "record": np.arange(len(member)),
                                   "member": member, "called_member": called, "score": called.astype(float)}))
    if summary is None:
        summary = (frame.drop(columns="decisions") if every
                   else frame.assign(decisions=frame.decisions.where(~scored, None)))
    atomic_write_csv(summary, csv)
    atomic_write_parquet(pd.concat(lines, ignore_index=True), scores)
    return str(csv), str(scores)


def write_mia(frame: pd.DataFrame, directory: Path, name: str = "mia") -> tuple[str, str]:
    """<name>.csv and <name>_scores.parquet of MIA rows."""
    return write_scored(frame, MIA_KEY, directory / f"{name}.csv", directory / f"{name}_scores.parquet",
                        ("finetune", "nonmember"))


def write_contrastive(frame: pd.DataFrame, directory: Path, name: str) -> tuple[str, str, str | None]:
    """<name>.csv, <name>_scores.parquet and <name>_guesses.parquet of contrastive metrics rows:
    the membership rows scored, the attribute rows' `decisions` and `baseline_decisions` as
    guesses (the baseline's decisions, one array for every row of a dataset, fix each record's
    attribute: 0 where the baseline's one guess, 0, is right, 1 where not; the attack guesses the
    attribute where its decision is right and 2 where not; no guesses file without attribute rows)."""
    attribute = (frame.inference == "attribute").to_numpy()
    csv, scores = write_scored(frame, CONTRASTIVE_KEY, directory / f"{name}.csv", directory / f"{name}_scores.parquet",
                               ("target_train", "target_test"), ~attribute,
                               frame.drop(columns=["decisions", "baseline_decisions"]))
    lines = []
    for row in frame[attribute].to_dict("records"):
        truth = (~unpack_decisions(row["baseline_decisions"], int(row["n"]))).astype(np.int64)
        right = unpack_decisions(row["decisions"], int(row["n"]))
        lines.append(pd.DataFrame({**{c: [row[c]] * len(truth) for c in CONTRASTIVE_KEY}, "split": "target_train",
                                   "record": np.arange(len(truth)), "member": True, "attribute": truth,
                                   "guess": np.where(right, truth, 2), "baseline_guess": 0}))
    if not lines:
        return csv, scores, None
    guesses = directory / f"{name}_guesses.parquet"
    atomic_write_parquet(pd.concat(lines, ignore_index=True), guesses)
    return csv, scores, str(guesses)


def load_written(written: list[tuple[str, str, str | None]]) -> pd.DataFrame:
    """The contrastive rows of write_contrastive's files, as the readers load them."""
    csvs, scores, guesses = zip(*written)
    return load_contrastive(csvs, scores, [g for g in guesses if g is not None])
