"""The attacks that score target heads against reference (shadow) heads trained on halves of the
candidate pool: LiRA's four variants (privssl.attacks.lira) and RMIA's two (privssl.attacks.rmia),
each with the score at which it says "member" without fitting anything."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from privssl.attacks.lira import lira_scores, logit_confidence
from privssl.attacks.mia_spec import LIRA_ATTACKS, REFERENCE_ATTACKS, RMIA_ATTACKS
from privssl.attacks.rmia import RMIA_THRESHOLD, choose_offline_a, label_probability, rmia_scores
# LiRA's score at a likelihood ratio of 1 (online), or φ above the OUT median (offline: log P[Z ≤ φ] = log ½)
LIRA_THRESHOLD = {"online": 0.0, "offline": float(np.log(0.5))}


@dataclass(frozen=True)
class References:
    """What the attacker holds: its heads' logits on the candidates (S, N, C), which candidates each
    trained on (S, N), their Pr(z|θ') on the population (S, Z; None without RMIA), and RMIA's a
    chosen on them (`with_rmia_a`)."""

    logits: torch.Tensor
    inside: torch.Tensor
    population: torch.Tensor | None = None
    rmia_a: float = float("nan")

    def first(self, k: int) -> "References":
        """The first k heads, with the same a."""
        population = None if self.population is None else self.population[:k]
        return References(self.logits[:k], self.inside[:k], population, self.rmia_a)


def with_rmia_a(references: References, labels: torch.Tensor, gamma: float) -> References:
    """The references with RMIA's offline a chosen on them alone (`rmia.choose_offline_a`)."""
    a = choose_offline_a(label_probability(references.logits, labels), references.inside, references.population,
                         gamma=gamma)
    return References(references.logits, references.inside, references.population, a)


def reference_scores(attack: str, target_logits: torch.Tensor, target_population: torch.Tensor | None,
                     references: References, labels: torch.Tensor, gamma: float = 1.0) -> tuple[torch.Tensor, float]:
    """(scores (T, N), higher = member; the no-fit threshold) of `attack` on T target heads' logits
    (T, N, C), their Pr(z|θ) on the population (T, Z; RMIA only)."""
    if attack in LIRA_ATTACKS:
        variant, variance = LIRA_ATTACKS[attack]
        scores = lira_scores(logit_confidence(target_logits, labels), logit_confidence(references.logits, labels),
                             references.inside, variant, variance)
        return scores, LIRA_THRESHOLD[variant]
    if attack in RMIA_ATTACKS:
        if references.population is None or target_population is None or np.isnan(references.rmia_a):
            raise ValueError(f"{attack} needs the population's probabilities and a chosen a (with_rmia_a)")
        scores = rmia_scores(label_probability(target_logits, labels), label_probability(references.logits, labels),
                             references.inside, target_population, references.population, RMIA_ATTACKS[attack],
                             references.rmia_a, gamma)
        return scores, RMIA_THRESHOLD
    raise ValueError(f"unknown reference attack {attack!r}; allowed: {', '.join(REFERENCE_ATTACKS)}")
