"""The attacks that score target heads against reference (shadow) heads trained on halves of the
candidate pool: LiRA's four variants (privssl.attacks.lira) and the difficulty-calibrated loss
(privssl.attacks.difficulty), each with the score at which it says "member" without fitting
anything, and RMIA's two (privssl.attacks.rmia), whose a and decision thresholds the attacker fits
on its own heads (`fit_rmia`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from privssl.attacks.difficulty import CALIBRATED_THRESHOLD, calibrated_loss_scores
from privssl.attacks.lira import lira_scores, logit_confidence
from privssl.attacks.mia_spec import CALIBRATED_LOSS_ATTACK, LIRA_ATTACKS, REFERENCE_ATTACKS, RMIA_ATTACKS
from privssl.attacks.rmia import VARIANTS, choose_offline_a, choose_threshold, label_probability, rmia_scores
# LiRA's score at a likelihood ratio of 1 (online), or φ above the OUT median (offline: log P[Z ≤ φ] = log ½)
LIRA_THRESHOLD = {"online": 0.0, "offline": float(np.log(0.5))}


@dataclass(frozen=True)
class References:
    """What the attacker holds: its heads' logits on the candidates (S, N, C), which candidates each
    trained on (S, N), their Pr(z|θ') on the population (S, Z; None without RMIA), and RMIA's a and
    decision threshold per variant fitted on them (`fit_rmia`)."""

    logits: torch.Tensor
    inside: torch.Tensor
    population: torch.Tensor | None = None
    rmia_a: float = float("nan")
    rmia_thresholds: dict[str, float] | None = None

    def first(self, k: int) -> "References":
        """The first k heads, with the same a and thresholds."""
        population = None if self.population is None else self.population[:k]
        return References(self.logits[:k], self.inside[:k], population, self.rmia_a, self.rmia_thresholds)


def fit_rmia(references: References, labels: torch.Tensor, gamma: float) -> References:
    """The references with RMIA's offline a (`rmia.choose_offline_a`) and each variant's decision
    threshold (`rmia.choose_threshold`) fitted on them alone."""
    probability = label_probability(references.logits, labels)
    a = choose_offline_a(probability, references.inside, references.population, gamma=gamma)
    thresholds = {variant: choose_threshold(probability, references.inside, references.population, variant, a, gamma)
                  for variant in VARIANTS}
    return References(references.logits, references.inside, references.population, a, thresholds)


def reference_scores(attack: str, target_logits: torch.Tensor, target_population: torch.Tensor | None,
                     references: References, labels: torch.Tensor, gamma: float = 1.0) -> tuple[torch.Tensor, float]:
    """(scores (T, N), higher = member; the no-fit threshold) of `attack` on T target heads' logits
    (T, N, C), their Pr(z|θ) on the population (T, Z; RMIA only)."""
    if attack in LIRA_ATTACKS:
        variant, variance = LIRA_ATTACKS[attack]
        scores = lira_scores(logit_confidence(target_logits, labels), logit_confidence(references.logits, labels),
                             references.inside, variant, variance)
        return scores, LIRA_THRESHOLD[variant]
    if attack == CALIBRATED_LOSS_ATTACK:
        scores = calibrated_loss_scores(target_logits, references.logits, references.inside, labels)
        return scores, CALIBRATED_THRESHOLD
    if attack in RMIA_ATTACKS:
        if (references.population is None or target_population is None or np.isnan(references.rmia_a)
                or references.rmia_thresholds is None):
            raise ValueError(f"{attack} needs the population's probabilities and a fitted a and threshold (fit_rmia)")
        variant = RMIA_ATTACKS[attack]
        scores = rmia_scores(label_probability(target_logits, labels), label_probability(references.logits, labels),
                             references.inside, target_population, references.population, variant,
                             references.rmia_a, gamma)
        return scores, references.rmia_thresholds[variant]
    raise ValueError(f"unknown reference attack {attack!r}; allowed: {', '.join(REFERENCE_ATTACKS)}")
