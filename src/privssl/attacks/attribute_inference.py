"""Attribute inference from embeddings (seed 003 §4.3; He & Zhang, "Quantifying and mitigating
privacy risks of contrastive learning", after Melis et al. 2019 and Song & Shmatikov 2020).

The adversary sees only a target sample's embedding h, not the sample, and holds an auxiliary
set of embeddings with their sensitive attribute s. It trains an attack model h -> s on that set
(the thesis: a 3-layer MLP with 128 hidden units, cross-entropy, SGD with lr 0.01, 100 epochs)
and applies it to the target embeddings. Accuracy is reported with a Clopper–Pearson interval
beside the majority-class baseline (thesis Table 4.1): an attack is only informative where it
beats always guessing the auxiliary set's most frequent attribute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from privssl.attacks.statistics import accuracy_interval

_MIN_STD = 1e-6  # a constant feature would otherwise divide by zero


@dataclass(frozen=True)
class AttributeAttackSpec:
    hidden: int = 128
    epochs: int = 100
    batch_size: int = 32
    lr: float = 0.01
    momentum: float = 0.9  # SGD

    @classmethod
    def from_config(cls, cfg: dict) -> AttributeAttackSpec:
        return cls(**{k: cfg[k] for k in cls.__dataclass_fields__ if k in cfg})


class _Standardised(nn.Module):
    """The attack MLP behind a standardisation with fixed (auxiliary-set) statistics."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor, mlp: nn.Module) -> None:
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.mlp = mlp

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        return self.mlp((embeddings - self.mean) / self.std)


def _check_embeddings(embeddings: torch.Tensor, attributes: torch.Tensor) -> None:
    if embeddings.ndim != 2 or embeddings.shape[0] == 0:
        raise ValueError(f"embeddings must be a non-empty 2-D tensor (N, D), got shape {tuple(embeddings.shape)}")
    if attributes.shape != embeddings.shape[:1]:
        raise ValueError(f"attributes must have shape ({embeddings.shape[0]},) (one per embedding), "
                         f"got {tuple(attributes.shape)}")


def _check_classes(attributes: torch.Tensor, n_classes: int) -> None:
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    if attributes.is_floating_point() or attributes.min() < 0 or attributes.max() >= n_classes:
        raise ValueError(f"attributes must be integers in [0, {n_classes}), got {attributes.dtype} values in "
                         f"[{attributes.min().item()}, {attributes.max().item()}]")


def _check_attribute_vector(name: str, attributes: torch.Tensor) -> None:
    if attributes.ndim != 1 or attributes.numel() == 0 or attributes.is_floating_point() or attributes.min() < 0:
        raise ValueError(f"{name} must be a non-empty 1-D tensor of non-negative integers, got {attributes.dtype} "
                         f"of shape {tuple(attributes.shape)}")


def attribute_mlp(in_dim: int, n_classes: int, hidden: int) -> nn.Module:
    """The thesis' 3-layer attack MLP: two ReLU hidden layers of width `hidden`, one logit per class."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, n_classes))


def train_attribute_attack(embeddings: torch.Tensor, attributes: torch.Tensor, n_classes: int,
                           spec: AttributeAttackSpec, seed: int) -> nn.Module:
    """Fit the attack model on auxiliary (embedding, attribute) pairs with mini-batch SGD
    (initialisation and a fresh permutation per epoch from `seed`).

    The inputs are standardised with the auxiliary set's mean and std, kept inside the returned
    module so that target embeddings are scaled alike: encoders' embedding scales differ by orders
    of magnitude, and unscaled inputs would make one learning rate diverge or stall.
    """
    _check_embeddings(embeddings, attributes)
    _check_classes(attributes, n_classes)
    inputs, targets = embeddings.float(), attributes.long()
    # Statistics in float64: a constant float32 feature then has a std of (almost) exactly 0.
    mean = embeddings.double().mean(0)
    std = embeddings.double().std(0, correction=0).clamp(min=_MIN_STD)
    torch.manual_seed(seed)
    model = _Standardised(mean.float(), std.float(), attribute_mlp(inputs.shape[1], n_classes, spec.hidden))
    optimiser = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(spec.epochs):
        permutation = torch.randperm(inputs.shape[0], generator=generator)
        for start in range(0, inputs.shape[0], spec.batch_size):
            idx = permutation[start:start + spec.batch_size]
            loss = F.cross_entropy(model(inputs[idx]), targets[idx])
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
    return model.eval()


@torch.no_grad()
def attribute_accuracy(model: nn.Module, embeddings: torch.Tensor,
                       attributes: torch.Tensor) -> tuple[dict[str, float], np.ndarray]:
    """Attack accuracy on target (embedding, attribute) pairs with its Clopper–Pearson 95 % interval,
    and the attack's guess of each record's attribute (the per-record file the reports' paired
    comparisons read: right where the guess is the attribute)."""
    _check_embeddings(embeddings, attributes)
    _check_attribute_vector("attributes", attributes)
    guesses = model(embeddings.float()).argmax(1)
    accuracy, lo, hi = accuracy_interval(int((guesses == attributes).sum()), attributes.numel())
    return {"accuracy": accuracy, "accuracy_lo": lo, "accuracy_hi": hi, "n": attributes.numel()}, guesses.cpu().numpy()


def majority_baseline(aux_attributes: torch.Tensor, attributes: torch.Tensor) -> tuple[dict[str, float], int]:
    """Accuracy on `attributes` of always guessing the most frequent auxiliary attribute (ties:
    the smallest), with its Clopper–Pearson 95 % interval (thesis Table 4.1); and that guess."""
    _check_attribute_vector("aux_attributes", aux_attributes)
    _check_attribute_vector("attributes", attributes)
    majority = int(np.argmax(np.bincount(aux_attributes.numpy())))  # argmax keeps the first of tied counts
    baseline, lo, hi = accuracy_interval(int((attributes == majority).sum()), attributes.numel())
    return {"baseline": baseline, "baseline_lo": lo, "baseline_hi": hi}, majority
