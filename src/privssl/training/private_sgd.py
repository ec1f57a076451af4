"""DP-SGD with fixed-size batches sampled without replacement, for any classifier module: the DP
head on a DPCL encoder and DPAdapter's downstream fine-tuning of a whole network.

Why not the Opacus head of `dpsgd.py`: these training-time releases are accounted in one
`privssl.accounting.dpcl` RDP accountant under *substitution* of one record (the adjacency of the
output-perturbation releases and of every membership audit here), where Opacus' Poisson
sampling is accounted under addition/removal. Sampling without replacement is the scheme that
accountant covers (Wang, Balle & Kasiviswanathan 2019).

One step: a fresh uniformly random subset of `batch_size` of the n records (independent draws,
not a pass over a shuffled epoch: the amplification theorem is for independent subsets), each
example's gradient clipped to C, N(0, (σ·2C)²) added to the sum — 2C bounds the sum's change
when one record is replaced — and an SGD-with-momentum step on the noisy sum / |B|.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from privssl.accounting.dpcl_spec import training_steps
from privssl.training.per_example import clip_and_sum, gaussian_noise_like, per_example_loss_grads

REPLACE_ONE_FACTOR = 2.0  # Δ of a sum of per-example gradients clipped to C when one record is replaced


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class PrivateSGDSpec:
    """Hyper-parameters of one DP-SGD training; `prefix` names the config section in errors."""

    epochs: int = 10
    batch_size: int = 50
    clip_norm: float = 1.0
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 0.0
    prefix: str = "private_sgd"

    def __post_init__(self) -> None:
        def bad(name: str, allowed: str) -> ValueError:
            return ValueError(f"{self.prefix}.{name} = {getattr(self, name)!r} is not allowed; allowed: {allowed}")

        for name in ("epochs", "batch_size"):
            if not (_is_int(getattr(self, name)) and getattr(self, name) >= 1):
                raise bad(name, "an integer >= 1")
        for name in ("clip_norm", "lr"):
            if not (_is_real(getattr(self, name)) and getattr(self, name) > 0):
                raise bad(name, "a finite number > 0")
        if not (_is_real(self.momentum) and 0 <= self.momentum < 1):
            raise bad("momentum", "a number in [0, 1)")
        if not (_is_real(self.weight_decay) and self.weight_decay >= 0):
            raise bad("weight_decay", "a finite number >= 0")

    @classmethod
    def from_config(cls, cfg: dict, prefix: str) -> "PrivateSGDSpec":
        fields = [f for f in cls.__dataclass_fields__ if f != "prefix"]
        unknown = sorted(set(cfg) - set(fields))
        if unknown:
            raise ValueError(f"unknown {prefix} fields {unknown}; allowed: {fields}")
        return cls(**cfg, prefix=prefix)

    def steps(self, n: int) -> int:
        """`epochs` × ⌊n / |B|⌋ steps: an epoch is as many draws as a pass over the data would have."""
        return training_steps(n, {"epochs": self.epochs, "batch_size": self.batch_size}, self.prefix)


def sample_batch(n: int, batch_size: int, generator: torch.Generator) -> torch.Tensor:
    """A uniformly random subset of `batch_size` of range(n), drawn afresh (CPU generator)."""
    return torch.randperm(n, generator=generator)[:batch_size]


def apply_noisy_gradient(model: nn.Module, gradient: dict[str, torch.Tensor], scale: float,
                         optimiser: torch.optim.Optimizer) -> None:
    """Set every trainable parameter's .grad to scale × the privatised gradient and step."""
    for name, param in model.named_parameters():
        if param.requires_grad:
            param.grad = (gradient[name] * scale).to(param.dtype)
    optimiser.step()


def train_private_classifier(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor, spec: PrivateSGDSpec,
                             noise_multiplier: float, generator: torch.Generator,
                             transform: Callable[[torch.Tensor], torch.Tensor] = lambda x: x) -> list[dict]:
    """DP-SGD of `model` on (inputs, labels) for spec.steps(n) steps at noise multiplier σ.

    `transform` maps a batch of stored inputs to model inputs (e.g. uint8 images to floats).
    The model runs in eval mode (no batch statistics, no dropout), so per-example gradients are
    defined. Returns one history row per epoch: mean clean batch loss, share of clipped examples.
    """
    if not (math.isfinite(noise_multiplier) and noise_multiplier >= 0):
        raise ValueError(f"noise multiplier = {noise_multiplier!r} is not allowed; allowed: a finite number >= 0")
    n = len(labels)
    steps_per_epoch = spec.steps(n) // spec.epochs
    model.eval()
    optimiser = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=spec.lr,
                                momentum=spec.momentum, weight_decay=spec.weight_decay)
    device = next(model.parameters()).device
    std = noise_multiplier * REPLACE_ONE_FACTOR * spec.clip_norm
    history = []
    for epoch in range(spec.epochs):
        loss_sum = clipped = 0.0
        for _ in range(steps_per_epoch):
            idx = sample_batch(n, spec.batch_size, generator)
            x, y = transform(inputs[idx].to(device)), labels[idx].to(device)
            grads = per_example_loss_grads(model, F.cross_entropy, x, y)
            summed, norms = clip_and_sum(grads, spec.clip_norm)
            apply_noisy_gradient(model, gaussian_noise_like(summed, std, generator), 1.0 / spec.batch_size, optimiser)
            with torch.no_grad():
                loss_sum += F.cross_entropy(model(x), y).item()
            clipped += (norms > spec.clip_norm).float().mean().item()
        history.append({"epoch": epoch + 1, "loss": loss_sum / steps_per_epoch,
                        "clipped_fraction": clipped / steps_per_epoch})
    return history


@torch.no_grad()
def predict_proba(model: nn.Module, inputs: torch.Tensor, transform: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
                  batch_size: int = 512) -> torch.Tensor:
    """Softmax outputs (n, classes) in float64 on the CPU, the form every attack reads."""
    model.eval()
    device = next(model.parameters()).device
    out = [torch.softmax(model(transform(inputs[i:i + batch_size].to(device))).double(), dim=1).cpu()
           for i in range(0, len(inputs), batch_size)]
    return torch.cat(out)
