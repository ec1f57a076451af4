"""FixMatch, FlexMatch and UDA, the supervised reference and FixMatch by DP-SGD (thesis §3.4.1).

The three algorithms share everything but the unlabelled loss, as in the thesis ("the same
hyperparameters"): SGD (Nesterov momentum, weight decay) at lr η·cos(πk / 2N) over N steps,
labelled batches of B weakly augmented images with cross-entropy, unlabelled batches of μB images
seen twice (weak view α(u), strong view A(u)), an exponential moving average (EMA) of the weights,
which is the model evaluated and attacked. Unlabelled loss per image, weighted by λ_u = 1:

- FixMatch (Sohn et al. 2020): q = softmax(f(α(u))) without gradient; if max q ≥ τ (0.95), the
  cross-entropy of f(A(u)) against the pseudo-label argmax q;
- FlexMatch (Zhang et al. 2021): FixMatch with a threshold per class, τ · M(β(c)), M(x) = x / (2 − x),
  β(c) = σ(c) / max(max_c σ, unused), σ(c) = unlabelled images whose latest confident prediction
  (max q ≥ τ) is c, "unused" = images with none yet (the threshold warm-up); a batch is masked
  with the thresholds of the batches before it, then counted;
- UDA (Xie et al. 2020): if max q ≥ τ (0.8), the cross-entropy of f(A(u)) against q sharpened at
  temperature T (0.4).

Why not `semilearn` (USB, which implements all three): its wheel requires torchaudio (built for one
torch version, none for the pinned 2.14.1 in the local index), transformers, wandb, aim and
tensorboard, and its algorithms run inside its own trainer and data pipeline, with no way to
stop at the checkpoints and draw the views this branch needs. The losses above are a few lines
each and follow USB's FixMatch, FlexMatch (with threshold warm-up) and UDA (no training-signal
annealing, USB's default).

FixMatch by DP-SGD (the defence of Table 3.4 with a real budget) and its claim:
privssl.training.semi_supervised_private, on this module's run and checkpoints.
"""

from __future__ import annotations

import copy
import math
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from privssl.io import InputError, Progress, atomic_torch_save
from privssl.training import checkpoints
from privssl.training.augment import AugmentSpec, strong, weak
from privssl.training.precision import arithmetic, autocast, channels_last
from privssl.training.semi_supervised_spec import ALGORITHMS, SUPERVISED


@dataclass(frozen=True)
class TrainSpec:
    steps: int  # N
    checkpoint_every: int  # the EMA model is kept every this many steps (and resumption saved)
    batch_size: int  # B, labelled images per step
    unlabelled_ratio: int  # μ
    lr: float
    momentum: float
    weight_decay: float
    ema: float
    thresholds: dict = field(default_factory=dict)  # τ per algorithm
    uda_temperature: float = 0.4
    unlabelled_weight: float = 1.0  # λ_u

    @classmethod
    def from_config(cls, cfg: dict) -> "TrainSpec":
        return cls(**{k: cfg[k] for k in cls.__dataclass_fields__ if k in cfg})

    def checkpoints(self) -> list[int]:
        return list(range(self.checkpoint_every, self.steps + 1, self.checkpoint_every))


@dataclass
class TrainingSet:
    labelled: torch.Tensor  # (n_l, C, H, W) float in [0, 1]
    labels: torch.Tensor
    unlabelled: torch.Tensor  # (n_u, C, H, W); empty for the supervised reference
    n_classes: int
    # each record's identity, which DP-SGD keys its augmentation to (`train` does not read them):
    # fixed for the record whatever else is in the set, e.g. its index in the dataset's pool; None:
    # its position in its set, an identity only if no record before it is ever removed
    labelled_ids: torch.Tensor | None = None
    unlabelled_ids: torch.Tensor | None = None

    def record_ids(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(labelled ids, unlabelled ids), each distinct within its set, one per record."""
        out = []
        for name, images, ids in (("labelled", self.labelled, self.labelled_ids),
                                  ("unlabelled", self.unlabelled, self.unlabelled_ids)):
            if ids is None:
                ids = torch.arange(len(images))
            if ids.ndim != 1 or len(ids) != len(images):
                raise ValueError(f"{name} record ids of shape {tuple(ids.shape)} are not allowed for "
                                 f"{len(images)} images; allowed: one id per image")
            values, counts = torch.unique(ids, return_counts=True)
            if len(counts) and int(counts.max()) > 1:
                raise ValueError(f"{name} record id {int(values[counts.argmax()])} is given to "
                                 f"{int(counts.max())} records; allowed: distinct ids")
            out.append(ids.to(torch.int64))
        return out[0], out[1]


class _Cycle:
    """Indices from consecutive random permutations of range(n): every record once per pass."""

    def __init__(self, n: int, generator: torch.Generator):
        if n < 1:
            raise ValueError(f"cannot draw batches from {n} records; allowed: at least 1")
        self.n, self.generator = n, generator
        self.order, self.position = torch.randperm(n, generator=generator), 0

    def take(self, k: int) -> torch.Tensor:
        out = []
        while k:
            if self.position == self.n:
                self.order, self.position = torch.randperm(self.n, generator=self.generator), 0
            part = self.order[self.position:self.position + k]
            self.position += len(part)
            k -= len(part)
            out.append(part)
        return torch.cat(out)

    def state(self) -> dict:
        return {"order": self.order.clone(), "position": self.position}

    def load(self, state: dict) -> None:
        self.order, self.position = state["order"], int(state["position"])


def cosine_lr(base: float, step: int, steps: int) -> float:
    """The thesis's schedule η · cos(π k / 2N)."""
    return base * math.cos(math.pi * step / (2 * steps))


def flexmatch_thresholds(selected: torch.Tensor, n_classes: int, tau: float) -> torch.Tensor:
    """FlexMatch's threshold per class, τ · M(β(c)) with M(x) = x / (2 − x), from the latest
    confident prediction of every unlabelled record (−1: none yet)."""
    counts = torch.bincount(selected[selected >= 0], minlength=n_classes).double()
    unused = int((selected < 0).sum())
    beta = counts / max(float(counts.max()), float(unused), 1.0)
    return tau * beta / (2 - beta)


def unlabelled_losses(algorithm: str, logits_weak: torch.Tensor, logits_strong: torch.Tensor, spec: TrainSpec,
                      class_thresholds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-image loss, mask) of the algorithm's unlabelled term; the weak view gives the target
    without gradient."""
    probs = torch.softmax(logits_weak.detach().double(), -1)
    confidence, pseudo = probs.max(-1)
    tau = spec.thresholds[algorithm]
    if algorithm == "fixmatch":
        mask = confidence >= tau
        return F.cross_entropy(logits_strong, pseudo, reduction="none") * mask, mask
    if algorithm == "flexmatch":
        mask = confidence >= class_thresholds[pseudo]
        return F.cross_entropy(logits_strong, pseudo, reduction="none") * mask, mask
    if algorithm == "uda":
        mask = confidence >= tau
        target = torch.softmax(logits_weak.detach().double() / spec.uda_temperature, -1).to(logits_strong.dtype)
        return -(target * torch.log_softmax(logits_strong, -1)).sum(-1) * mask, mask
    raise ValueError(f"unknown algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")


@torch.no_grad()
def update_ema(ema: nn.Module, model: nn.Module, momentum: float) -> None:
    for e, p in zip(ema.parameters(), model.parameters()):
        e.mul_(momentum).add_(p.detach(), alpha=1 - momentum)
    for e, b in zip(ema.buffers(), model.buffers()):
        e.copy_(b)


def _cpu_state(module: nn.Module) -> dict:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


@dataclass
class Run:
    """Everything a restarted job needs to continue a training exactly."""

    model: nn.Module
    ema: nn.Module
    optimiser: torch.optim.Optimizer
    generator: torch.Generator
    labelled: _Cycle | None  # None for DP-SGD, which samples by keyed Poisson draws
    unlabelled: _Cycle | None
    selected: torch.Tensor | None  # FlexMatch's latest confident prediction per unlabelled record
    step: int = 0
    kept: dict = field(default_factory=dict)  # step -> EMA state
    history: list = field(default_factory=list)

    def state(self, fingerprint: dict[str, str] | None) -> dict:
        return {"fingerprint": fingerprint or {}, "step": self.step, "model": _cpu_state(self.model),
                "ema": _cpu_state(self.ema), "optimiser": self.optimiser.state_dict(),
                "generator": self.generator.get_state(),
                "labelled": None if self.labelled is None else self.labelled.state(),
                "unlabelled": None if self.unlabelled is None else self.unlabelled.state(),
                "selected": self.selected, "kept": self.kept, "history": self.history}

    def load(self, saved: dict) -> None:
        self.step = int(saved["step"])
        self.model.load_state_dict(saved["model"])
        self.ema.load_state_dict(saved["ema"])
        self.optimiser.load_state_dict(saved["optimiser"])
        self.generator.set_state(saved["generator"])
        if self.labelled is not None:
            self.labelled.load(saved["labelled"])
        if self.unlabelled is not None:
            self.unlabelled.load(saved["unlabelled"])
        self.selected = saved["selected"]
        self.kept, self.history = saved["kept"], saved["history"]


def start_run(network: nn.Module, data: TrainingSet, spec: TrainSpec, seed: int, device: torch.device,
           flexmatch: bool, cycles: bool = True) -> Run:
    """A fresh run; without `cycles` (DP-SGD) no permutation of the sets is drawn, so what the
    generator gives later does not depend on the sets' sizes."""
    model = network.to(device)
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    optimiser = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum, nesterov=spec.momentum > 0,
                                weight_decay=spec.weight_decay)
    generator = torch.Generator().manual_seed(seed)
    n_u = len(data.unlabelled)
    return Run(model, ema, optimiser, generator, _Cycle(len(data.labels), generator) if cycles else None,
                _Cycle(n_u, generator) if n_u and cycles else None,
                torch.full((n_u,), -1, dtype=torch.long) if flexmatch else None)


def checkpoint_fingerprint(target: str, spec: TrainSpec, augment: AugmentSpec, network: dict, seed: int,
                           device: torch.device, data: str, code: str, **private) -> dict[str, str]:
    """What a target's checkpoint is resumed under (privssl.training.checkpoints): the target, every
    field of its training, augmentation and network settings, the seed, the data's digest, the
    device's arithmetic, the intra-op thread count (it splits float sums differently), the code,
    and for DP-SGD its calibration and clipping (`private`)."""
    return checkpoints.fingerprint(target=target, train=spec, augment=augment, network=network, seed=seed, **private,
                                   arithmetic=arithmetic(device), threads=torch.get_num_threads(), data=data,
                                   code=code)


def resume_run(run: Run, checkpoint: Path | None, fingerprint: dict[str, str] | None,
            log: Callable[[str], None]) -> None:
    if checkpoint is not None and checkpoint.exists():
        # read like every artefact: weights_only unpickles tensors and plain containers only, so a
        # file put in its place runs no code; onto the CPU (a GPU checkpoint opens on any machine, its
        # fingerprint names the device kind), load_state_dict moves the states to the network
        try:
            saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as err:
            raise InputError(f"{checkpoint}: not a checkpoint of this training (it holds more than tensors and plain "
                             f"containers: {str(err).splitlines()[0]}); allowed: the file this job writes; delete it to "
                             "train from the start") from err
        if checkpoints.resumable(saved["fingerprint"], fingerprint or {}, checkpoint, log):
            run.load(saved)
            log(f"resumed from {checkpoint} at step {run.step}")


def keep_checkpoint(run: Run, checkpoint: Path | None, fingerprint: dict[str, str] | None, row: dict) -> None:
    run.kept[run.step] = _cpu_state(run.ema)
    run.history.append(row)
    if checkpoint is not None:
        atomic_torch_save(run.state(fingerprint), checkpoint)


def needs_joint_forward(model: nn.Module) -> bool:
    """Whether a step's views must go through the network in one forward: BatchNorm normalises by
    its batch's statistics (an image's output depends on the others), and dropout draws its masks
    in the forward's order (a forward of the weak views alone would draw other masks)."""
    return any(isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.modules.dropout._DropoutNd))
               for m in model.modules())


def _forward_views(model: nn.Module, x: torch.Tensor, u_weak: torch.Tensor, u_strong: torch.Tensor,
                   joint: bool, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The logits of the labelled batch, the weak views and the strong views. `joint`
    (`needs_joint_forward`): all three go through one forward, so that BatchNorm sees every view,
    as in the reference implementations. Otherwise each image's logits are the same in any batch
    (to rounding), and the weak views, which only give the targets (detached), go through a
    forward without a graph: the backward then runs over the labelled and strong images alone
    (0.65x the network's time in a step on the Fashion-MNIST preset's CNN,
    `benchmarks/training_throughput.py`). The same logits; the gradient's float sums run over
    fewer rows (the weak rows' terms were zeros), so the weights agree to rounding, not bit for
    bit, with a training by one forward."""
    with autocast(device):  # bf16 on CUDA (this target has no privacy claim; train_private has no autocast)
        if joint:
            logits = model(channels_last(torch.cat([x, u_weak, u_strong]), device)).float()
            return logits.split([len(x), len(u_weak), len(u_strong)])
        with torch.no_grad():
            logits_w = model(channels_last(u_weak, device)).float()
        logits = model(channels_last(torch.cat([x, u_strong]), device)).float()
    logits_l, logits_s = logits.split([len(x), len(u_strong)])
    return logits_l, logits_w, logits_s


def train(algorithm: str, network: nn.Module, data: TrainingSet, spec: TrainSpec, augment: AugmentSpec, seed: int,
          device: torch.device, checkpoint: Path | None = None, fingerprint: dict[str, str] | None = None,
          log: Callable[[str], None] = print) -> tuple[dict[int, dict], list[dict]]:
    """Train `network` (initialised by the caller: `seeded_network`) by `algorithm` (or
    `supervised`: labelled images only) for spec.steps steps.
    Returns the EMA model's state at every checkpoint step and one history row per checkpoint
    (means over its steps of the labelled and unlabelled losses and of the mask rate). The run
    resumes from `checkpoint` when it holds a run of the same `fingerprint`."""
    if algorithm != SUPERVISED and algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; allowed: {', '.join((*ALGORITHMS, SUPERVISED))}")
    semi = algorithm != SUPERVISED
    if semi and not len(data.unlabelled):
        raise ValueError(f"{algorithm} needs unlabelled images; the training set has none")
    run = start_run(network, data, spec, seed, device, algorithm == "flexmatch")
    run.model = channels_last(run.model, device)
    joint = needs_joint_forward(run.model)
    resume_run(run, checkpoint, fingerprint, log)
    sums = {"loss_labelled": 0.0, "loss_unlabelled": 0.0, "mask_rate": 0.0}
    run.model.train()
    progress = Progress(log, f"{algorithm} steps", spec.steps - run.step)  # from where it resumed
    while run.step < spec.steps:
        for group in run.optimiser.param_groups:
            group["lr"] = cosine_lr(spec.lr, run.step, spec.steps)
        idx_l = run.labelled.take(spec.batch_size)
        x = weak(data.labelled[idx_l], augment, run.generator).to(device)
        y = data.labels[idx_l].to(device)
        if semi:
            idx_u = run.unlabelled.take(spec.batch_size * spec.unlabelled_ratio)
            u = data.unlabelled[idx_u]
            u_weak, u_strong = weak(u, augment, run.generator).to(device), strong(u, augment, run.generator).to(device)
            logits_l, logits_w, logits_s = _forward_views(run.model, x, u_weak, u_strong, joint, device)
        else:
            with autocast(device):
                logits_l = run.model(channels_last(x, device)).float()
        loss_l = F.cross_entropy(logits_l, y)
        loss = loss_l
        if semi:
            thresholds = None
            if algorithm == "flexmatch":  # as USB: the mask from the thresholds so far, then this batch counted
                thresholds = flexmatch_thresholds(run.selected, data.n_classes,
                                                  spec.thresholds[algorithm]).to(device)
            per_image, mask = unlabelled_losses(algorithm, logits_w, logits_s, spec, thresholds)
            if algorithm == "flexmatch":
                confidence, pseudo = torch.softmax(logits_w.detach().double(), -1).max(-1)
                confident = (confidence >= spec.thresholds[algorithm]).cpu()
                run.selected[idx_u[confident]] = pseudo.cpu()[confident]
            loss_u = per_image.mean()
            loss = loss + spec.unlabelled_weight * loss_u
            sums["loss_unlabelled"] += loss_u.item()
            sums["mask_rate"] += mask.double().mean().item()
        run.optimiser.zero_grad(set_to_none=True)
        loss.backward()
        run.optimiser.step()
        update_ema(run.ema, run.model, spec.ema)
        sums["loss_labelled"] += loss_l.item()
        run.step += 1
        progress.advance()
        if run.step % spec.checkpoint_every == 0:
            row = {"step": run.step, "lr": cosine_lr(spec.lr, run.step - 1, spec.steps),
                   **{k: v / spec.checkpoint_every for k, v in sums.items()}}
            row["clipped_fraction"] = float("nan")  # no clipping without DP-SGD
            if not semi:
                row["loss_unlabelled"] = row["mask_rate"] = float("nan")
            keep_checkpoint(run, checkpoint, fingerprint, row)
            log(f"{algorithm} step {run.step}/{spec.steps}: " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()
                                                                           if k != "step"))
            sums = dict.fromkeys(sums, 0.0)
    return run.kept, run.history


@torch.no_grad()
def posteriors(model: nn.Module, images: torch.Tensor, device: torch.device, batch_size: int = 2048) -> torch.Tensor:
    """Softmax outputs (..., classes) in float64 on the CPU for images (..., C, H, W)."""
    model.eval()
    flat = images.reshape(-1, *images.shape[-3:])
    out = [torch.softmax(model(flat[i:i + batch_size].to(device)).double(), -1).cpu()
           for i in range(0, len(flat), batch_size)]
    return torch.cat(out).reshape(*images.shape[:-3], -1)
