"""The robust membership inference attack (RMIA) of Zarifzadeh, Liu and Shokri, "Low-Cost High-Power
Membership Inference Attacks" (ICML 2024), on heads released from a candidate pool, from the same
reference (shadow) heads as LiRA (privssl.attacks.lira).

RMIA tests x against population records z, one pair at a time. With Pr(x|θ) the target head's
probability of x's label and Pr(x) its mean over reference heads,

    LR(x, z) = [Pr(x|θ) / Pr(x)] / [Pr(z|θ) / Pr(z)],    Score(x) = Pr_z[LR(x, z) ≥ γ],

the fraction of population records that x dominates by a factor γ (the paper's γ = 1 by default).
Dividing by Pr(z|θ) calibrates each target head by records it did not train on, which is what
lets RMIA compare decisions across heads and beat LiRA with few reference models.

- Online (x in about half of the references): Pr(x) = ½ (mean over the IN heads + mean over the OUT
  heads), the balanced average of the paper's references "half of which include x"; a candidate
  on one side only, possible with few references, uses the offline estimate below.
- Offline (only OUT heads): Pr(x) ≈ ½ ((1 + a) Pr_OUT(x) + (1 − a)), the paper's linear
  approximation of the missing IN mean (a candidate in every reference head: `_out_mean`), with
  a ∈ [0, 1] chosen by the attacker on its own heads (`choose_offline_a`: one reference head
  attacked as if it were the target by the others, the a of the highest AUC over a grid, as the
  paper and Privacy Meter do).
- The decision threshold of each variant (its accuracy and the audits' decisions; the AUC needs
  none) is fitted the same way on the attacker's heads (`choose_threshold`): a fixed 0.5 is no
  calibrated point of Score(x), since Pr(x) mixes IN and OUT references.

The population records z are in no head (neither the target's nor a reference's training set):
Pr(z) is the OUT mean, with the offline approximation in the offline variant as for x. Every
score here is for a (heads, records) grid, batched: the fraction of z is a sorted search.
"""

from __future__ import annotations

import numpy as np
import torch

from privssl.attacks import statistics
from privssl.attacks.mia import best_threshold

VARIANTS = ("online", "offline")
PSEUDO_TARGETS = 4  # the attacker's heads each attacked by the others to fit the decision threshold
A_GRID = tuple(np.round(np.linspace(0.0, 1.0, 11), 1))  # the paper's and Privacy Meter's grid of a
_TINY = 1e-30  # a probability of exactly 0 (a saturated head in float64) keeps the ratios finite


def label_probability(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Pr(x|θ) (..., N): the softmax probability of each record's label, in float64."""
    probs = torch.softmax(logits.double(), -1)
    return probs.gather(-1, labels.expand(probs.shape[:-1]).unsqueeze(-1)).squeeze(-1)


def _side_mean(signal: torch.Tensor, inside: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean over the heads with `inside`, their count) per record, 0 where there is none;
    signal, inside: (S, N)."""
    weight = inside.to(signal.dtype)
    count = weight.sum(0)
    return (signal * weight).sum(0) / count.clamp(min=1), count


def offline_prior(mean_out: torch.Tensor, a: float) -> torch.Tensor:
    """The paper's offline Pr(x) ≈ ½ ((1 + a) Pr_OUT(x) + (1 − a))."""
    return 0.5 * ((1 + a) * mean_out + (1 - a))


def _out_mean(reference: torch.Tensor, reference_in: torch.Tensor, a: float) -> torch.Tensor:
    """Pr_OUT(x) per candidate: the mean over the heads without it. A candidate in every head (few
    references) reads the paper's linear model Pr_IN ≈ a Pr_OUT + (1 − a) backwards from its IN
    mean, as Privacy Meter does with one reference; at a = 0, which has no inverse, it gets the OUT
    mean over all candidates (LiRA's fallback, `lira._fit`)."""
    mean_out, n_out = _side_mean(reference, ~reference_in)
    if not bool((n_out > 0).any()):
        raise ValueError("no reference head is without any candidate: RMIA needs OUT heads")
    if a > 0:
        mean_in, _ = _side_mean(reference, reference_in)
        fallback = ((mean_in - (1 - a)) / a).clamp(min=_TINY)
    else:
        fallback = (mean_out * n_out).sum() / n_out.sum()
    return torch.where(n_out > 0, mean_out, fallback)


def record_prior(reference: torch.Tensor, reference_in: torch.Tensor, variant: str, a: float) -> torch.Tensor:
    """Pr(x) per candidate (N,) from the reference heads' Pr(x|θ') (S, N) and membership (S, N)."""
    if variant not in VARIANTS:
        raise ValueError(f"RMIA variant {variant!r} unknown; allowed: {VARIANTS}")
    offline = offline_prior(_out_mean(reference, reference_in, a), a)
    if variant == "offline":
        return offline
    (mean_in, n_in), (mean_out, n_out) = _side_mean(reference, reference_in), _side_mean(reference, ~reference_in)
    return torch.where((n_in > 0) & (n_out > 0), 0.5 * (mean_in + mean_out), offline)


def rmia_scores(target: torch.Tensor, reference: torch.Tensor, reference_in: torch.Tensor,
                population_target: torch.Tensor, population_reference: torch.Tensor, variant: str = "offline",
                a: float = 0.3, gamma: float = 1.0) -> torch.Tensor:
    """RMIA's Score(x) (T, N), higher = member, of T target heads on N candidates.

    target: (T, N) Pr(x|θ) of the targets; reference: (S, N) of the reference heads, none of which
    is a target; reference_in: (S, N) bool, candidate n in reference s's training set;
    population_target: (T, Z) and population_reference: (S, Z), Pr(z|θ) of population records
    that are in no head."""
    if not 0 <= a <= 1:
        raise ValueError(f"RMIA's offline a = {a} is not allowed; allowed: 0 <= a <= 1")
    if not gamma > 0:
        raise ValueError(f"RMIA's γ = {gamma} is not allowed; allowed: γ > 0")
    if (reference.shape != reference_in.shape or target.shape[1:] != reference.shape[1:]
            or population_target.shape[0] != target.shape[0]
            or population_reference.shape != (reference.shape[0], population_target.shape[1])):
        raise ValueError(f"shapes disagree: targets {tuple(target.shape)}, references {tuple(reference.shape)}, "
                         f"membership {tuple(reference_in.shape)}, population on targets "
                         f"{tuple(population_target.shape)} and on references {tuple(population_reference.shape)}")
    prior_x = record_prior(reference, reference_in, variant, a)
    mean_z = population_reference.mean(0)
    prior_z = offline_prior(mean_z, a) if variant == "offline" else mean_z
    ratio_x = target.double().clamp(min=_TINY) / prior_x.clamp(min=_TINY)  # (T, N)
    ratio_z = population_target.double().clamp(min=_TINY) / prior_z.clamp(min=_TINY)  # (T, Z)
    # LR(x, z) ≥ γ  ⇔  γ · ratio_z ≤ ratio_x: the count of such z is a search in the sorted γ · ratio_z
    sorted_z = (gamma * ratio_z).sort(-1).values.contiguous()
    dominated = torch.searchsorted(sorted_z, ratio_x.contiguous(), right=True)
    return dominated.double() / ratio_z.shape[1]


def choose_offline_a(reference: torch.Tensor, reference_in: torch.Tensor, population_reference: torch.Tensor,
                     grid=A_GRID, gamma: float = 1.0) -> float:
    """The attacker's a: reference head 0 attacked by offline RMIA as if it were the target, with
    the other reference heads as references, over the candidates; the a of the highest AUC (the
    smallest such a on a tie). Uses the attacker's heads only, never a target. Needs 2 heads."""
    if reference.shape[0] < 2:
        raise ValueError(f"choosing a needs at least 2 reference heads (one attacked, one reference), "
                         f"got {reference.shape[0]}")
    pseudo_in = reference_in[0].numpy()
    if pseudo_in.all() or not pseudo_in.any():
        raise ValueError("the pseudo-target trains on every candidate or on none: no AUC to choose a by")
    best, best_auc = None, -1.0
    for a in grid:
        scores = rmia_scores(reference[:1], reference[1:], reference_in[1:], population_reference[:1],
                             population_reference[1:], "offline", float(a), gamma)
        auc = statistics.auc(scores[0].numpy(), pseudo_in)
        if auc > best_auc:
            best, best_auc = float(a), auc
    return best


def choose_threshold(reference: torch.Tensor, reference_in: torch.Tensor, population_reference: torch.Tensor,
                     variant: str, a: float, gamma: float = 1.0, pseudo_targets: int = PSEUDO_TARGETS) -> float:
    """The attacker's decision threshold for `variant`: each of its first `pseudo_targets` heads
    attacked as if it were the target by all its other heads (leave one out), and the Score(x) at
    which "member iff score ≥ t" is most often right on their candidates (`mia.best_threshold`).
    Uses the attacker's heads only, never a target. Needs 2 heads."""
    heads = reference.shape[0]
    if heads < 2:
        raise ValueError(f"fitting RMIA's threshold needs at least 2 reference heads, got {heads}")
    scores, members = [], []
    for i in range(min(pseudo_targets, heads)):
        others = torch.arange(heads) != i
        scores.append(rmia_scores(reference[i:i + 1], reference[others], reference_in[others],
                                  population_reference[i:i + 1], population_reference[others], variant, a, gamma)[0])
        members.append(reference_in[i])
    return best_threshold(torch.cat(scores).numpy(), torch.cat(members).numpy())
