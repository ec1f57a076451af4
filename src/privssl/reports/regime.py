"""The regime of a claim, and the size of its difference against the paper's.

**Regime.** A claim that one model leaks less than another, that a defence brings a leak to
chance or costs no membership privacy, exists only where the model it defends or compares does
leak: on a target at chance, "less", "to chance" and "no cost" hold of every model and say nothing
of the paper's. Each such row of the ledger names the leak its comparison rests on (`Leak`), with
the paper's value of the same leak beside ours:

- the ALM paper: the head released without noise, the paper's attack (adaptive shadow MLP);
- thesis Ch. 4, contrastive vs supervised membership: the supervised target, the row's attack;
- Talos's membership cost: the contrastive model (λ = 0), the row's attack;
- contrastive vs supervised attribute inference, and Talos's attribute defence: the contrastive
  model's attribute inference against the majority-class share of the same records;
- thesis Ch. 3: the undefended target's A_DA AUC (all members, last step).

The regime is reached when the leak's 95 % interval lies above its chance level. Where it is not,
a reproduced verdict becomes unresolved (the comparison held vacuously); a contradicted one stands,
since an interval beyond the claim's side is a leak of its own (the defended or compared model leaks
more than the other, so the comparison exists); an unresolved one says that the regime, not the
number of records, is what is missing first. Claims about accuracy (utility loss, DPCL, DPAdapter,
Talos's task cost) have no leak to rest on: their unresolved rows need more data, or no data can
settle them (a difference of exactly 0, a computation).

**Size.** Where a seed states the difference it found (resources/claims.csv `paper_difference`, the
smallest of its settings, in the row's orientation), the row also says whether ours is smaller than
the paper's (the paper's value above our interval), larger (below it), or whether our interval
still covers it. An unresolved row whose interval excludes the paper's size has found something:
the difference, if any, is smaller than the paper's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privssl.reports.claims_spec import VERDICTS

REPRODUCED, CONTRADICTED, UNRESOLVED = VERDICTS
REGIME_NOT_REACHED = "regime not reached"
FEW_TRAININGS = "fewer than 3 trainings per arm"
MORE_DATA = "more data needed"
NOT_BY_DATA = "not settled by data"
UNRESOLVED_BECAUSE = (REGIME_NOT_REACHED, FEW_TRAININGS, MORE_DATA, NOT_BY_DATA)
REACHED, NOT_REACHED = "reached", "not reached"
SMALLER, COVERS, LARGER = "smaller than the paper's", "covers the paper's", "larger than the paper's"

# The paper's value of each leak a family of claims rests on (the smallest of the settings it
# reports, so that "ours is below the paper's" is said against its weakest target), and where.
PAPER_LEAKS = {
    "alm": (0.61, "MIA accuracy 0.71 (CIFAR-100) and 0.61 (STL-10) on the head released without noise "
                  "(Yang, Gohari & Topcu, Sec. 1, Fig. 2)"),
    "supervised_membership": (0.810, "NN MIA accuracy 0.931 (MobileNetV2, CIFAR-100; over-fitting 0.678, "
                                     "Fig. 4.5a) and 0.810 (ResNet-50, STL-10) on the supervised target (thesis "
                                     "Sec. 4.2.4, Fig. 4.2; Sec. 4.1)"),
    "contrastive_membership": (0.620, "NN MIA accuracy 0.625 (MobileNetV2, CIFAR-100) and 0.620 (ResNet-50, "
                                      "STL-10) on the contrastive model (thesis Sec. 4.2.4, Fig. 4.2; Sec. 4.1)"),
    "contrastive_attribute": (0.701, "attribute accuracy 0.701 on the contrastive model against a majority-class "
                                     "share of 0.421 (ResNet-18, UTKFace race; thesis Sec. 4.3.4, Fig. 4.8, "
                                     "Table 4.1)"),
    "semileak": (0.780, "A_DA AUC 0.780 on FixMatch (WRN-28-2, CIFAR-10, 500 labels, 2^20 steps; thesis "
                        "Sec. 3.4.3, Fig. 3.3)"),
}


@dataclass(frozen=True)
class Leak:
    """The leak of the model a claim's comparison rests on, measured by this run: its value and
    95 % interval over `n` records, against `chance` (random guessing, or the majority-class share
    of the same records for attribute inference)."""

    family: str
    target: str
    value: float
    lo: float
    hi: float
    n: float
    chance: float

    def __post_init__(self):
        if self.family not in PAPER_LEAKS:
            raise ValueError(f"unknown regime family {self.family!r}; allowed: {', '.join(PAPER_LEAKS)}")

    @property
    def reached(self) -> bool:
        return bool(self.lo > self.chance)

    @property
    def paper(self) -> float:
        return PAPER_LEAKS[self.family][0]


def judged(verdict: str, leak: Leak | None) -> tuple[str, str]:
    """The verdict a claim gets in its regime, and what the note says of it: a reproduction on a
    model that does not leak beyond chance is not one."""
    if leak is None or leak.reached or verdict != REPRODUCED:
        return verdict, ""
    return UNRESOLVED, (f"the comparison alone reads {REPRODUCED}, but its premise fails: {leak.target} is "
                        f"{leak.value:.3f} [{leak.lo:.3f}, {leak.hi:.3f}], not above {leak.chance:.3f}")


def unresolved_because(verdict: str, n_needed: float, leak: Leak | None, few_trainings: bool = False) -> str:
    """Why an unresolved row is: its regime first, then its trainings, then whether any number of
    records could tell."""
    if verdict != UNRESOLVED:
        return ""
    if leak is not None and not leak.reached:
        return REGIME_NOT_REACHED
    if few_trainings:
        return FEW_TRAININGS
    return NOT_BY_DATA if np.isnan(n_needed) else MORE_DATA


def magnitude(lo: float, hi: float, paper_difference: float) -> str:
    """Our difference's interval against the paper's stated difference (same orientation)."""
    if np.isnan(paper_difference) or np.isnan(lo) or np.isnan(hi):
        return ""
    if hi < paper_difference:
        return SMALLER
    if lo > paper_difference:
        return LARGER
    return COVERS
