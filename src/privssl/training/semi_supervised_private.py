"""FixMatch by DP-SGD (thesis Table 3.4's defence with a real budget), `train_private`, on the run
and checkpoints of privssl.training.semi_supervised.

FixMatch's losses, each labelled and each unlabelled record one clipped per-example gradient
(unlabelled ones scaled by λ_u / μ before clipping, as the batch means weigh them), Poisson
sampling of each set at q_l = B / n_l and q_u = μB / n_u, Gaussian noise σC on the sum, divided
by B. The claim: (ε, δ)-DP
of the sequence of weights over the steps (so of their EMA, post-processing, which is released)
for add/remove of one training image, labelled or unlabelled, with ε the accountant's
(privssl.accounting.dpsgd) for the Poisson-subsampled Gaussian at (q = max(q_l, q_u), σ, N steps)
and δ the configured one; proven, given the accountant. It rests on three facts:

- sensitivity C: a record enters the sum through its own clipped gradient only, so its addition
  or removal changes the sum by at most C, and it is sampled with probability at most q;
- no record's gradient depends on another's: the pseudo-label of u is computed from u alone
  (FlexMatch's class thresholds count every unlabelled record, so it has no DP-SGD variant), the
  network has no batch statistics, and every random choice about a record (whether a step samples
  it, its weak crop and flip, its strong view's crop, flip and RandAugment operations) is a
  function of (a step seed drawn from the run's generator, the record's identity), never of its
  position in the batch (`private_batch`; privssl.training.augment.weak_keyed, strong_keyed: the
  identity must not change with the other records, e.g. a pool index). `train`'s positional
  augmentation would break this: a record's presence shifts the draws of every record after it in the batch and, with
  images_per_draw > 1, which records share RandAugment's operations, so it changes the joint
  distribution of the other records' views;
- |d| is public: the sizes n_l and n_u of the labelled and unlabelled sets are treated as known
  under add/remove adjacency. The sampling rates q_l and q_u read them, and so do σ (calibrated
  to ε at those rates) and the accountant's ε; a neighbour with one image more or fewer would be
  trained at B / (n ± 1), a difference the claim ignores, as DP-SGD's usual accounting (Opacus)
  does. The number of steps is the config's, read from no data.

The history rows (labelled loss, mask rate, clipped fraction) are computed on the private batches
without noise: they are covered by no claim (the workflow keeps them under
diagnostics/not_private/).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from privssl.io import Progress
from privssl.training.augment import AugmentSpec, keyed_hash, strong_keyed, weak_keyed
from privssl.training.per_example import clip_and_sum, gaussian_noise_like, per_example_loss_grads
from privssl.training.semi_supervised import (
    TrainingSet,
    TrainSpec,
    cosine_lr,
    keep_checkpoint,
    resume_run,
    start_run,
    update_ema,
)


@dataclass(frozen=True)
class PrivateSpec:
    """DP-SGD of FixMatch: noise multiplier σ, clipping norm C, and the sampling it is accounted for."""

    noise_multiplier: float
    clip_norm: float


def poisson_rates(spec: TrainSpec, n_labelled: int, n_unlabelled: int) -> tuple[float, float]:
    """(q_l, q_u) = (B / n_l, μB / n_u), the Poisson sampling rates of DP-SGD's two sets; they read
    the sets' sizes, which the claim treats as public."""
    if min(n_labelled, n_unlabelled) < 1:
        raise ValueError(f"DP-SGD FixMatch needs labelled and unlabelled images, got {n_labelled} and {n_unlabelled}")
    rates = (spec.batch_size / n_labelled, spec.batch_size * spec.unlabelled_ratio / n_unlabelled)
    if max(rates) > 1:
        raise ValueError(f"expected batches B = {spec.batch_size}, μB = {spec.batch_size * spec.unlabelled_ratio} "
                         f"exceed the sets ({n_labelled} labelled, {n_unlabelled} unlabelled): allowed: B <= n_l "
                         "and μB <= n_u (Poisson sampling rates <= 1)")
    return rates


def sampling_rate(spec: TrainSpec, n_labelled: int, n_unlabelled: int) -> float:
    """q = max(B / n_l, μB / n_u): the largest probability that a step samples a given record."""
    return max(poisson_rates(spec, n_labelled, n_unlabelled))


# the salts of DP-SGD's keyed draws, one per (set, use): a record's sampling and its views are
# independent draws, and a labelled and an unlabelled record of one id share nothing
_LABELLED_SAMPLE, _UNLABELLED_SAMPLE, _LABELLED_WEAK, _UNLABELLED_WEAK, _UNLABELLED_STRONG = range(5)


@dataclass(frozen=True)
class PrivateBatch:
    """One step's Poisson batches of DP-SGD and their views, in the order of the sets."""

    sampled_labelled: torch.Tensor  # bool, one per labelled record
    sampled_unlabelled: torch.Tensor  # bool, one per unlabelled record
    labelled: torch.Tensor  # the weak views of the sampled labelled records
    labels: torch.Tensor
    weak: torch.Tensor  # the weak views of the sampled unlabelled records ...
    strong: torch.Tensor  # ... and their strong views


def _poisson_keyed(ids: torch.Tensor, rate: float, step_seed: int, salt: int) -> torch.Tensor:
    """Whether each record is in this step's batch, from hash(step seed, salt, id) < ⌊rate · 2³²⌋:
    independently per record at a rate ≤ `rate` (lower by < 2⁻³², which the accountant's ε at
    `rate` covers), and a function of the record alone given the step seed."""
    return keyed_hash(step_seed, salt, 0, ids) < math.floor(rate * 2**32)


def private_batch(data: TrainingSet, spec: TrainSpec, rates: tuple[float, float], augment: AugmentSpec,
                  step_seed: int) -> PrivateBatch:
    """The Poisson batches of one DP-SGD step at `rates` (q_l, q_u: `poisson_rates`) and their
    views, every random choice about a record a function of (step seed, its id): given the step
    seed and the rates, whether another record is in the set changes nothing about it
    (privssl.training.augment, "keyed to the record")."""
    ids_l, ids_u = data.record_ids()
    in_l = _poisson_keyed(ids_l, rates[0], step_seed, _LABELLED_SAMPLE)
    in_u = _poisson_keyed(ids_u, rates[1], step_seed, _UNLABELLED_SAMPLE)
    u = data.unlabelled[in_u]
    return PrivateBatch(in_l, in_u, weak_keyed(data.labelled[in_l], ids_l[in_l], augment, step_seed, _LABELLED_WEAK),
                        data.labels[in_l], weak_keyed(u, ids_u[in_u], augment, step_seed, _UNLABELLED_WEAK),
                        strong_keyed(u, ids_u[in_u], augment, step_seed, _UNLABELLED_STRONG,
                                     spec.batch_size * spec.unlabelled_ratio))


def train_private(network: nn.Module, data: TrainingSet, spec: TrainSpec, private: PrivateSpec, augment: AugmentSpec,
                  seed: int, device: torch.device, checkpoint: Path | None = None, fingerprint: dict[str, str] | None = None,
                  log: Callable[[str], None] = print) -> tuple[dict[int, dict], list[dict]]:
    """FixMatch by DP-SGD (module docstring) for spec.steps steps at noise multiplier σ; returns
    the EMA states and history as `train`. The model runs in eval mode: per-example gradients
    need a network without batch statistics (GroupNorm in the private WRN). Each step draws one
    seed from the run's generator, which `private_batch` keys every record's sampling and views
    to; the generator then gives the noise. Neither reads the data or its size: at the same rates,
    removing a record that no step samples leaves the training bit for bit as it was."""
    rates = poisson_rates(spec, len(data.labels), len(data.unlabelled))  # refuses empty sets and rates > 1
    data.record_ids()  # refuses ids that are not one per record, distinct, before any step
    run = start_run(network, data, spec, seed, device, False, cycles=False)
    resume_run(run, checkpoint, fingerprint, log)
    run.model.eval()
    scale_u = spec.unlabelled_weight / spec.unlabelled_ratio
    sums = {"loss_labelled": 0.0, "loss_unlabelled": 0.0, "mask_rate": 0.0, "clipped_fraction": 0.0}
    progress = Progress(log, "fixmatch (DP-SGD) steps", spec.steps - run.step)
    while run.step < spec.steps:
        for group in run.optimiser.param_groups:
            group["lr"] = cosine_lr(spec.lr, run.step, spec.steps)
        batch = private_batch(data, spec, rates, augment, int(torch.randint(0, 2**62, (1,), generator=run.generator)))
        x, y = batch.labelled.to(device), batch.labels.to(device)
        u_weak, u_strong = batch.weak.to(device), batch.strong.to(device)
        with torch.no_grad():
            confidence, pseudo = torch.softmax(run.model(u_weak).double(), -1).max(-1) if len(u_weak) else (
                torch.zeros(0, device=device), torch.zeros(0, dtype=torch.long, device=device))
        mask = confidence >= spec.thresholds["fixmatch"]
        grads, norms = {}, []
        for inputs, targets, weight in ((x, y, 1.0), (u_strong[mask], pseudo[mask], scale_u)):
            if not len(targets):
                continue
            per_example = per_example_loss_grads(run.model, F.cross_entropy, inputs, targets)
            per_example = {k: g * weight for k, g in per_example.items()}
            summed, norm = clip_and_sum(per_example, private.clip_norm)
            grads = {k: grads.get(k, 0) + v for k, v in summed.items()}
            norms.append(norm)
        if not grads:  # an empty Poisson batch: the noise alone
            grads = {k: torch.zeros_like(p) for k, p in run.model.named_parameters() if p.requires_grad}
        noisy = gaussian_noise_like(grads, private.noise_multiplier * private.clip_norm, run.generator)
        run.optimiser.zero_grad(set_to_none=True)
        for name, param in run.model.named_parameters():
            param.grad = (noisy[name] / spec.batch_size).to(param.dtype)
        run.optimiser.step()
        update_ema(run.ema, run.model, spec.ema)
        with torch.no_grad():
            sums["loss_labelled"] += F.cross_entropy(run.model(x), y).item() if len(y) else 0.0
        sums["mask_rate"] += mask.double().mean().item() if len(mask) else 0.0
        sums["clipped_fraction"] += (torch.cat(norms) > private.clip_norm).double().mean().item() if norms else 0.0
        run.step += 1
        progress.advance()
        if run.step % spec.checkpoint_every == 0:
            row = {"step": run.step, "lr": cosine_lr(spec.lr, run.step - 1, spec.steps),
                   **{k: v / spec.checkpoint_every for k, v in sums.items()}}
            row["loss_unlabelled"] = float("nan")  # not computed: it would cost a forward pass per step
            keep_checkpoint(run, checkpoint, fingerprint, row)
            log(f"fixmatch (DP-SGD, σ = {private.noise_multiplier:.4g}) step {run.step}/{spec.steps}: "
                + ", ".join(f"{k} {v:.4g}" for k, v in row.items() if k != "step"))
            sums = dict.fromkeys(sums, 0.0)
    return run.kept, run.history
