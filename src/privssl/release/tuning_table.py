"""The files rule `tune` writes for each tuned section: the grid with the score of every point
(`<section>.csv`) and the chosen configuration the release rules read (`<section>.json`)."""

from __future__ import annotations

from typing import Callable

import pandas as pd

from privssl.io import atomic_write_csv, atomic_write_json
from privssl.release.tuning import regrets


def grid_table(rows: list[dict], points: list[dict], fields: list[str], chosen: Callable[[dict], bool]) -> pd.DataFrame:
    """Tidy rows: the varied fields of each row's point, its score, and whether it is chosen
    (`chosen(row)`) and the best at its own (method, ε)."""
    frame = pd.DataFrame(rows)
    for i, field in enumerate(fields):
        frame.insert(1 + i, field, [points[p][field] for p in frame.point])
    frame["chosen"] = [chosen(row) for row in rows]
    best = {}
    for (method, eps), group in frame.groupby(["method", "eps"]):
        scored = group.dropna(subset=["accuracy"])
        if len(scored):
            best[(method, eps)] = int(scored.sort_values(["accuracy", "point"], ascending=[False, True]).point.iloc[0])
    frame["best_at_eps"] = [best.get((r["method"], r["eps"])) == r["point"] for r in rows]
    frame["regret"] = regrets(rows)  # shortfall from the best point at the row's (method, ε)
    return frame


def write_choice(out_dir: str, section: str, frame: pd.DataFrame, choice: dict) -> None:
    atomic_write_csv(frame, f"{out_dir}/{section}.csv")
    atomic_write_json(choice, f"{out_dir}/{section}.json")
