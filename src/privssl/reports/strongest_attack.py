"""The strongest membership attack a run has on a release: the ALM claims are judged by it beside
the paper's shadow-MLP attack, because a regime measured by the weakest attack reads "the head does
not leak" where a stronger one sees the leak (Fashion-MNIST: the paper's attack 0.500, LiRA's AUC
0.565 on heads of the same recipe).

The candidates are the reference-model attacks of lira.csv (LiRA, RMIA; their adaptive rows, which
release the shadows like the victim), each on the same released head as the paper's attack. The
strongest is the one whose accuracy interval on the unprotected head lies highest (its lower end):
chosen on the same records it is then reported on, so it is the best of a handful of attacks, which
the row says; the paper's attack keeps its own rows.
"""

from __future__ import annotations

import pandas as pd
from scipy import stats

from privssl.attacks.repeated import Estimate

REFERENCE_MODEL_ATTACKS = ("lira_online", "lira_offline", "lira_online_global", "lira_offline_global", "rmia_online",
                           "rmia_offline")


def lira_accuracy(row: pd.Series) -> Estimate:
    """An attack's accuracy from its lira.csv row: the interval as written (clustered by candidate
    record, its unit), the variance read back from it for the records a replication would need."""
    se = (row.accuracy_hi - row.accuracy_lo) / (2 * stats.norm.ppf(0.975))
    return Estimate(float(row.accuracy), float(row.accuracy_lo), float(row.accuracy_hi), int(row.records),
                    int(row.draws), float(se ** 2), 0.0, float("inf"))


def strongest_attack(lira: pd.DataFrame, dataset: str) -> str | None:
    """The reference-model attack with the highest accuracy lower bound on `dataset`'s unprotected
    head (None where lira.csv has none)."""
    rows = lira[(lira.dataset == dataset) & (lira.method == "none") & lira.attack.isin(REFERENCE_MODEL_ATTACKS)
                & lira.adaptive.astype(bool)]
    if rows.empty:
        return None
    return str(rows.loc[rows.accuracy_lo.idxmax(), "attack"])


def attack_rows(lira: pd.DataFrame, dataset: str, attack: str, method: str) -> pd.DataFrame:
    """`attack`'s adaptive rows of `method` (one per ε; one row for the unprotected head)."""
    return lira[(lira.dataset == dataset) & (lira.method == method) & (lira.attack == attack)
                & lira.adaptive.astype(bool)]
