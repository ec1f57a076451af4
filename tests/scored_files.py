"""A test's summary rows with packed `decisions` cells, written as the attack rules write them:
the summary CSV without the scored rows' cells and the per-record scores whose calls give them
back (artefacts.record_scores.attach_decisions; artefacts.image.load_mia,
artefacts.contrastive.load_contrastive)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from privssl.artefacts.contrastive import CONTRASTIVE_KEY
from privssl.artefacts.image import MIA_KEY
from privssl.io import atomic_write_csv, atomic_write_parquet, unpack_decisions


def write_scored(frame: pd.DataFrame, key: tuple[str, ...], csv: Path, scores: Path, splits: tuple[str, str],
                 scored: np.ndarray | None = None) -> tuple[str, str]:
    """`csv` and `scores` of `frame`'s rows (`scored`: the rows with scores; default all, and then
    the summary has no decisions column): each scored row's records are its n_members members
    (split splits[0]) then its n_nonmembers non-members (splits[1]), its call on each the one its
    decision (right or wrong) implies, its score 1 where it calls a member and 0 where not; a
    scored row's decisions cell left empty."""
    every = scored is None
    scored = np.ones(len(frame), bool) if every else scored
    lines = []
    for row in frame[scored].to_dict("records"):
        member = np.arange(int(row["n_members"] + row["n_nonmembers"])) < row["n_members"]
        called = unpack_decisions(row["decisions"], len(member)) == member
        lines.append(pd.DataFrame({**{c: [row[c]] * len(member) for c in key},
                                   "split": np.where(member, *splits), "record": np.arange(len(member)),
                                   "member": member, "called_member": called, "score": called.astype(float)}))
    summary = frame.drop(columns="decisions") if every else frame.assign(decisions=frame.decisions.where(~scored, None))
    atomic_write_csv(summary, csv)
    atomic_write_parquet(pd.concat(lines, ignore_index=True), scores)
    return str(csv), str(scores)


def write_mia(frame: pd.DataFrame, directory: Path, name: str = "mia") -> tuple[str, str]:
    """<name>.csv and <name>_scores.parquet of MIA rows."""
    return write_scored(frame, MIA_KEY, directory / f"{name}.csv", directory / f"{name}_scores.parquet",
                        ("finetune", "nonmember"))


def write_contrastive(frame: pd.DataFrame, directory: Path, name: str) -> tuple[str, str]:
    """<name>.csv and <name>_scores.parquet of contrastive metrics rows (the membership rows scored)."""
    return write_scored(frame, CONTRASTIVE_KEY, directory / f"{name}.csv", directory / f"{name}_scores.parquet",
                        ("target_train", "target_test"), (frame.inference != "attribute").to_numpy())
