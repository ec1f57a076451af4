"""Canary data sets of the one-run audit (Steinke, Nasr & Jagielski, NeurIPS 2023).

The audited training set has the victim's size |d|: |d| − m fixed records of the candidate pool
and m slots. Slot i holds its canary when S_i = +1 and a filler record (an ordinary pool record)
when S_i = −1, with S_i independent and uniform. Flipping one S_i substitutes one record, so the
m inclusions are neighbouring data sets under substitution — the adjacency of the
output-perturbation methods — and the training-set size never changes, so the noise calibrated
for |d| is the noise the audited release gets.

Canaries are pool records with their true label (`in_distribution`: what random DP over the
population speaks about) or with a label drawn uniformly among the wrong classes
(`mislabelled`: the strongest setting of Steinke et al., outside the population).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

CANARY_KINDS = ("mislabelled", "in_distribution")


@dataclass(frozen=True)
class CanaryDesign:
    """Rows of an extended pool (the pool, then the m canary copies) and the secret S."""

    features: torch.Tensor  # (pool + m, F)
    labels: torch.Tensor  # (pool + m,): canary copies carry the canary label
    training_set: torch.Tensor  # (|d|,) row indices: fixed records, then slot i's record
    canary_rows: torch.Tensor  # (m,) rows of the canaries in the extended pool
    included: torch.Tensor  # (m,) bool: S_i = +1


def canary_design(features: torch.Tensor, labels: torch.Tensor, n_classes: int, set_size: int, canaries: int,
                  kind: str, seed: int) -> CanaryDesign:
    """Draw fixed records, canaries, fillers and S from the pool (features, labels)."""
    if kind not in CANARY_KINDS:
        raise ValueError(f"canary kind {kind!r} unknown; allowed: {CANARY_KINDS}")
    pool = len(labels)
    if not 1 <= canaries <= set_size or set_size + canaries > pool:
        raise ValueError(f"{canaries} canaries in a training set of {set_size} need 1 <= canaries <= {set_size} and "
                         f"a pool of at least {set_size + canaries} records (it has {pool})")
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(pool, generator=generator)
    fixed = order[:set_size - canaries]
    canary_source = order[set_size - canaries:set_size]
    fillers = order[set_size:set_size + canaries]
    canary_labels = labels[canary_source].clone()
    if kind == "mislabelled":
        shift = torch.randint(1, n_classes, (canaries,), generator=generator)
        canary_labels = (canary_labels + shift) % n_classes
    included = torch.rand(canaries, generator=generator) < 0.5
    canary_rows = pool + torch.arange(canaries)
    slots = torch.where(included, canary_rows, fillers)
    return CanaryDesign(torch.cat([features, features[canary_source]]), torch.cat([labels, canary_labels]),
                        torch.cat([fixed, slots]), canary_rows, included)
