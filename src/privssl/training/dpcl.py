"""DPCL: differentially private contrastive training of an encoder (seed 004, §3), SimCLR or
Barlow Twins, naive DP-SGD or with the paper's private "connection point".

One *example* is an original image with its two augmented views. A step samples |B| examples
without replacement, computes the loss of the batch's 2|B| views, splits the batch gradient
into per-view pieces g_i = J_iᵀ ∂L/∂z_i (vector-Jacobian products, `per_example_vjp`; their sum
is the batch gradient), clips each piece to C as the paper does, and adds Gaussian noise to the
sum. What the noise must cover is the question of the paper:

- `naive`: NT-Xent (or Barlow Twins' batch statistics) couples every view, so replacing one
  example may change all 2|B| pieces: Δ_g = 2 · 2|B| · C = 4|B|C under substitution
  (triangle inequality over both batches' pieces). This bound is rigorous.
- `dpcl` (SimCLR): the similarity matrix S = ZZᵀ of the L2-normalised projections is released
  with Gaussian noise of sensitivity Δ_S = 4√(2|B| − 1) (Theorem 1: two views change, each
  changes a row and a column of entries bounded by 1), and the loss is computed on the noisy
  matrix. The paper then treats the pieces of the unchanged examples as unchanged and uses
  Δ_g = 4C. That is a heuristic: ∂L/∂z_i = Σ_k (∂L/∂S̃_ik + ∂L/∂S̃_ki) z_k still contains the
  changed example's projections (the noise hides S, not the z_k the chain rule multiplies by),
  so the accountant's ε at Δ_g = 4C is not a proven bound. Releases carry guarantee kind
  `heuristic_dp` (privssl.release.methods).
- `dpcl` (Barlow Twins): the per-feature mean (Δ = 2/N, Theorem 2) and sum of squared
  deviations SSE (Δ = 6, Theorem 3) of each view's batch are released with noise, truncated at
  0 (the variance is SSE/(N − 1)); normalisation uses these released values as constants. The
  cross-correlation matrix still sums over the batch, so the same caveat holds.

Every mechanism of a step uses the same noise multiplier σ (std / its sensitivity), as the
paper's experiments do; `mechanisms` lists them for the accountant. Losses are reported on the
clean statistics (the paper's "true loss"); the gradient uses the noisy ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from privssl.accounting.dpcl_spec import (
    SSE_SENSITIVITY,
    gradient_sensitivity,
    mean_sensitivity,
    mechanisms,
    similarity_sensitivity,
    training_steps,
)
from privssl.training.encoders import unit_float
from privssl.training.per_example import clip_and_sum, gaussian_noise_like, per_example_vjp
from privssl.training.private_sgd import apply_noisy_gradient, sample_batch
from privssl.training.simclr import Augmentation

STD_FLOOR = 1e-4  # keeps 1/√var finite when a feature's noisy SSE is truncated to 0


def simclr_loss(z: torch.Tensor, temperature: float, noise: torch.Tensor | None = None) -> torch.Tensor:
    """NT-Xent of Eq. (3)–(4) over 2N projections z = [views 1; views 2]: each view against its
    partner among all 2N − 1 others, on S = ẑẑᵀ (+ noise) of the normalised ẑ."""
    zn = F.normalize(z, dim=1)
    sim = zn @ zn.T
    if noise is not None:
        sim = sim + noise
    n = len(z) // 2
    logits = sim.masked_fill(torch.eye(len(z), dtype=torch.bool, device=z.device), float("-inf")) / temperature
    partner = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    return F.cross_entropy(logits, partner)


def batch_statistics(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-feature mean and SSE = Σ z² − N μ² (Eq. 7–9) of a view's batch."""
    mean = z.mean(0)
    return mean, (z * z).sum(0) - len(z) * mean * mean


def barlow_twins_loss(za: torch.Tensor, zb: torch.Tensor, lambd: float,
                      stats: tuple[tuple[torch.Tensor, torch.Tensor], ...] | None = None) -> torch.Tensor:
    """Eq. (5)–(6) on L2-normalised projections; `stats` ((mean_a, sse_a), (mean_b, sse_b)) are
    released values used as constants, else each view's own batch statistics."""
    za, zb = F.normalize(za, dim=1), F.normalize(zb, dim=1)
    n = len(za)
    stats = stats or (batch_statistics(za), batch_statistics(zb))
    normed = [(z - mean) / torch.sqrt(sse.clamp(min=0) / (n - 1) + STD_FLOOR ** 2) for z, (mean, sse) in zip((za, zb), stats)]
    c = normed[0].T @ normed[1] / n
    on = (1 - torch.diagonal(c)).pow(2).sum()
    off = c.pow(2).sum() - torch.diagonal(c).pow(2).sum()
    return on + lambd * off


def _gaussian(shape, std: float, generator: torch.Generator, like: torch.Tensor) -> torch.Tensor:
    return (torch.randn(shape, generator=generator, dtype=torch.float64) * std).to(like)


@dataclass(frozen=True)
class DPCLSpec:
    """One DPCL training (config `dpcl`): objective, variant and DP-SGD hyper-parameters."""

    objective: str = "simclr"
    variant: str = "dpcl"
    epochs: int = 4
    batch_size: int = 50
    clip_norm: float = 1.0
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 1e-6
    temperature: float = 0.5
    barlow_lambda: float = 0.005

    def __post_init__(self) -> None:
        mechanisms(self.objective, self.variant)
        if self.batch_size < 2:
            raise ValueError(f"dpcl.encoder.batch_size = {self.batch_size} is not allowed; allowed: >= 2 "
                             "(a contrastive batch needs a negative, a batch variance two rows)")

    def steps_per_epoch(self, n: int) -> int:
        return training_steps(n, {"epochs": 1, "batch_size": self.batch_size}, "dpcl.encoder")


def cotangents(spec: DPCLSpec, z: torch.Tensor, noise_multiplier: float,
               generator: torch.Generator) -> tuple[float, torch.Tensor]:
    """(true loss, ∂L/∂z) for the 2|B| projections z = [views 1; views 2], L on the released
    (noisy) connection point in the `dpcl` variant, on the batch itself in the naive one."""
    z = z.detach().requires_grad_(True)
    n = len(z) // 2
    private = spec.variant == "dpcl"
    if spec.objective == "simclr":
        noise = None
        if private:
            noise = _gaussian((len(z), len(z)), noise_multiplier * similarity_sensitivity(len(z)), generator, z)
        loss = simclr_loss(z, spec.temperature, noise)
        with torch.no_grad():
            true_loss = simclr_loss(z, spec.temperature).item() if private else loss.item()
    else:
        za, zb = z[:n], z[n:]
        stats = None
        if private:
            released = []
            for view in (za, zb):
                mean, sse = batch_statistics(F.normalize(view.detach(), dim=1))
                mean = mean + _gaussian(mean.shape, noise_multiplier * mean_sensitivity(n), generator, mean)
                sse = (sse + _gaussian(sse.shape, noise_multiplier * SSE_SENSITIVITY, generator, sse)).clamp(min=0)
                released.append((mean, sse))
            stats = tuple(released)
        loss = barlow_twins_loss(za, zb, spec.barlow_lambda, stats)
        with torch.no_grad():
            true_loss = barlow_twins_loss(za, zb, spec.barlow_lambda).item() if private else loss.item()
    (grad,) = torch.autograd.grad(loss, z)
    return true_loss, grad


def train_dpcl(trunk: nn.Module, model: nn.Module, images: torch.Tensor, spec: DPCLSpec, noise_multiplier: float,
               augmentation: Augmentation, generator: torch.Generator,
               on_epoch: Callable[[int], dict] = lambda epoch: {}) -> list[dict]:
    """DPCL training of `model` (the encoder's trained top → projector) on the frozen `trunk`'s
    output for `images` (encoders.split_for_training): epochs × ⌊n / |B|⌋ steps.

    Runs in eval mode: batch-norm layers (ResNet) use their public running statistics, so the
    per-view pieces are defined. `on_epoch(epoch)` adds columns to the epoch's history row
    (k-NN accuracy, ε spent)."""
    if not (math.isfinite(noise_multiplier) and noise_multiplier >= 0):
        raise ValueError(f"noise multiplier = {noise_multiplier!r} is not allowed; allowed: a finite number >= 0")
    n = len(images)
    steps_per_epoch = spec.steps_per_epoch(n)
    trunk.eval()
    model.eval()
    device = next(model.parameters()).device
    optimiser = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=spec.lr,
                                momentum=spec.momentum, weight_decay=spec.weight_decay)
    std = noise_multiplier * gradient_sensitivity(spec.variant, spec.batch_size, spec.clip_norm)
    history = []
    for epoch in range(spec.epochs):
        loss_sum = clipped = 0.0
        for _ in range(steps_per_epoch):
            x = unit_float(images[sample_batch(n, spec.batch_size, generator)].to(device))
            with torch.no_grad():
                views = trunk(torch.cat([augmentation(x, generator), augmentation(x, generator)]))
                z = model(views)
            loss, cotangent = cotangents(spec, z, noise_multiplier, generator)
            summed, norms = clip_and_sum(per_example_vjp(model, views, cotangent), spec.clip_norm)
            # the loss is the batch mean, so the sum of the pieces is the batch gradient: no 1/|B|
            apply_noisy_gradient(model, gaussian_noise_like(summed, std, generator), 1.0, optimiser)
            loss_sum += loss
            clipped += (norms > spec.clip_norm).float().mean().item()
        row = {"epoch": epoch + 1, "loss": loss_sum / steps_per_epoch, "clipped_fraction": clipped / steps_per_epoch}
        history.append(row | on_epoch(epoch + 1))
    return history


@torch.no_grad()
def knn_accuracy(train: torch.Tensor, train_labels: torch.Tensor, test: torch.Tensor, test_labels: torch.Tensor,
                 k: int = 5) -> float:
    """The paper's evaluation: k-NN (cosine similarity, majority vote, ties to the smaller label)
    of the frozen encoder's features."""
    if not 1 <= k <= len(train):
        raise ValueError(f"k = {k} is not allowed; allowed: 1 <= k <= {len(train)} (the labelled set)")
    sims = F.normalize(test.double(), dim=1) @ F.normalize(train.double(), dim=1).T
    neighbours = train_labels[sims.topk(k, dim=1).indices]
    n_classes = int(max(train_labels.max(), test_labels.max())) + 1
    votes = F.one_hot(neighbours, n_classes).sum(1)
    return (votes.argmax(1) == test_labels).double().mean().item()
