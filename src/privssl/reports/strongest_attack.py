"""The strongest membership attack a run has on a release: the ALM claims are judged by it beside
the paper's shadow-MLP attack, because a regime measured by the weakest attack reads "the head does
not leak" where a stronger one sees the leak (Fashion-MNIST: the paper's attack 0.500, LiRA's AUC
0.565 on heads of the same recipe).

The candidates are the reference-model attacks of lira.csv (LiRA, RMIA, the difficulty-calibrated
loss; their adaptive rows, which release the shadows like the victim), each on the same released
head as the paper's attack. The
strongest is the one whose accuracy interval on the unprotected head lies highest (its lower end).
It is chosen on the same records it is then reported on: the best of k attacks at chance clears
its own 95 % interval far more often than one (simulated: 0.14 for six independent attacks against
0.025), so on the unprotected head its interval is widened to Bonferroni's 1 − 0.05/k
(`lira_accuracy(row, k)`), for its own row and for the regime it sets. The paper's attack keeps its
own rows.
"""

from __future__ import annotations

import pandas as pd
from scipy import stats

from privssl.attacks.mia_spec import REFERENCE_ATTACKS as REFERENCE_MODEL_ATTACKS
from privssl.attacks.repeated import Estimate


def lira_accuracy(row: pd.Series, chosen_among: int = 1) -> Estimate:
    """An attack's accuracy from its lira.csv row: the interval as written (clustered by candidate
    record, its unit), the variance read back from it for the records a replication would need. An
    attack chosen as the best of `chosen_among` on these records has its interval widened about its
    estimate to the two-sided level 1 − 0.05 / k (Bonferroni)."""
    z = stats.norm.ppf(0.975)
    se = (row.accuracy_hi - row.accuracy_lo) / (2 * z)
    widen = stats.norm.ppf(1 - 0.025 / chosen_among) / z
    lo = row.accuracy - (row.accuracy - row.accuracy_lo) * widen
    hi = row.accuracy + (row.accuracy_hi - row.accuracy) * widen
    return Estimate(float(row.accuracy), float(max(lo, 0.0)), float(min(hi, 1.0)), int(row.records), int(row.draws),
                    float(se ** 2), 0.0, float("inf"))


def candidates(lira: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """The reference-model attacks' rows on `dataset`'s unprotected head that have an interval."""
    rows = lira[(lira.dataset == dataset) & (lira.method == "none") & lira.attack.isin(REFERENCE_MODEL_ATTACKS)
                & (lira.adaptive == True)]  # noqa: E712 (a column of flags: NaN is not True)
    return rows.dropna(subset=["accuracy_lo"])


def strongest_attack(lira: pd.DataFrame | None, dataset: str) -> tuple[str, int] | None:
    """(the reference-model attack with the highest accuracy lower bound on `dataset`'s unprotected
    head, the number it was chosen among); None where the run has no lira.csv or it has none."""
    if lira is None:
        return None
    rows = candidates(lira, dataset)
    if rows.empty:
        return None
    return str(rows.loc[rows.accuracy_lo.idxmax(), "attack"]), len(rows)


def attack_rows(lira: pd.DataFrame, dataset: str, attack: str, method: str) -> pd.DataFrame:
    """`attack`'s adaptive rows of `method` (one per ε; one row for the unprotected head)."""
    return lira[(lira.dataset == dataset) & (lira.method == method) & (lira.attack == attack)
                & (lira.adaptive == True)]  # noqa: E712
