"""DPAdapter's two-batch sharpness-aware minimisation (SAM) and the robust accuracy it is judged by.

DPAdapter ("DPAdapter: Improving Differentially Private Deep Learning through Noise Tolerance
Pre-training", §4.3-4.4, Algorithm 1) pre-trains a model whose parameters tolerate noise,
so that DP-SGD fine-tuning, which in effect perturbs the parameters, loses less accuracy. It builds
on SAM (Foret et al., "Sharpness-Aware Minimization for Efficiently Improving Generalization",
ICLR 2021). After `warmup_epochs` of standard training, every iteration

1. computes the gradient g_p of the loss on a large batch B_p at the weights w and the worst-case
   perturbation e = ρ · g_p / ||g_p||₂ (one L2 norm over all trainable parameters; e = 0 if g_p = 0),
2. moves to w + e,
3. computes the gradient of the loss on a separate, standard-size batch B_u at w + e,
4. reverts to w, and
5. lets the optimiser (SGD with momentum and weight decay) step with that gradient.

Why two batches: the perturbation is a worst-case direction and gains nothing from stochasticity, so
a large B_p estimates it accurately (ideally it would use the whole data set), while the update keeps
a standard-size B_u because large SGD batches generalise worse. Vanilla SAM (AMP, the paper's
baseline) is the special case B_p = B_u (`two_batch=False`); standard training is ρ = 0.

Robust accuracy (§2.3) measures the parameter robustness: the accuracy of the model with i.i.d.
Gaussian noise added to every parameter of every layer, averaged over independent draws.
"""

from __future__ import annotations

import math
from dataclasses import InitVar, dataclass, fields
from typing import Callable

import numpy as np
import torch
from torch import Tensor, nn

from privssl.io import Progress


@dataclass(frozen=True)
class SAMSpec:
    """Hyper-parameters of DPAdapter / vanilla SAM pre-training (config key `sam` by default).

    `prefix` names the config key in error messages; it is not a hyper-parameter."""

    rho: float = 0.5  # radius ρ of the perturbation; 0 = plain SGD
    perturb_batch: int = 256  # |B_p|
    update_batch: int = 64  # |B_u|
    two_batch: bool = True  # False: vanilla SAM, B_p is the update batch and perturb_batch is unused
    epochs: int = 10  # epochs of SAM steps after the warm-up; an epoch is ceil(n / update_batch) steps
    warmup_epochs: int = 2  # epochs of standard training first
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 5e-4
    prefix: InitVar[str] = "sam"

    def __post_init__(self, prefix: str) -> None:
        def bad(field: str, allowed: str) -> ValueError:
            return _bad(prefix, field, getattr(self, field), allowed)

        if not (_is_real(self.rho) and self.rho >= 0):
            raise bad("rho", "a finite number >= 0")
        for field in ("perturb_batch", "update_batch", "epochs"):
            if not (_is_int(getattr(self, field)) and getattr(self, field) >= 1):
                raise bad(field, "an integer >= 1")
        if not (_is_int(self.warmup_epochs) and self.warmup_epochs >= 0):
            raise bad("warmup_epochs", "an integer >= 0")
        if not isinstance(self.two_batch, (bool, np.bool_)):
            raise bad("two_batch", "true or false")
        if not (_is_real(self.lr) and self.lr > 0):
            raise bad("lr", "a finite number > 0")
        if not (_is_real(self.momentum) and 0 <= self.momentum < 1):
            raise bad("momentum", "a number in [0, 1)")
        if not (_is_real(self.weight_decay) and self.weight_decay >= 0):
            raise bad("weight_decay", "a finite number >= 0")

    @classmethod
    def from_config(cls, cfg: dict, prefix: str = "sam") -> SAMSpec:
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(cfg) - set(allowed))
        if unknown:
            raise ValueError(f"unknown {prefix} fields {unknown}; allowed: {allowed}")
        return cls(**cfg, prefix=prefix)

    def check_data_size(self, n: int, prefix: str = "sam") -> None:
        """Refuse batches larger than the n training records they are drawn from without replacement."""
        used = ("perturb_batch", "update_batch") if self.two_batch else ("update_batch",)
        for field in used:
            if getattr(self, field) > n:
                raise _bad(prefix, field, getattr(self, field), f"an integer <= {n}, the number of training records")


def _bad(prefix: str, field: str, value, allowed: str) -> ValueError:
    return ValueError(f"{prefix}.{field} = {value!r} is not allowed; allowed: {allowed}")


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) \
        and math.isfinite(value)


# `perturbed_loss` of train_sam's history is measured on one step in this many: a diagnostic of the
# ascent, whose forward pass over B_p would cost a fifth of every DPAdapter step (issue 50)
PERTURBED_LOSS_EVERY = 10


def sam_step(model: nn.Module, loss_fn, perturb_batch: tuple[Tensor, Tensor], update_batch: tuple[Tensor, Tensor],
             rho: float, optimizer: torch.optim.Optimizer, measure: bool = True) -> dict[str, float]:
    """One SAM step: ascend by ρ along the B_p gradient, take the B_u gradient there, revert, step.

    Returns the B_p loss at w (`perturb_loss`) and at w + e (`perturbed_loss`) and the B_u loss at
    w + e (`update_loss`). With ρ = 0 this is a plain optimiser step on B_u and B_p is never
    evaluated (both B_p losses NaN); so is one with a zero B_p gradient (perturbed_loss =
    perturb_loss). `measure` False skips the forward pass that only measures `perturbed_loss`
    (NaN then): a diagnostic, a fifth of a DPAdapter step's cost (|B_p| = 4 |B_u|). A skipped pass
    draws nothing from torch's global generator, so a network with dropout trains with other masks
    than one that ran every pass (the same weights only without dropout, as the workflow's networks)."""
    if not (_is_real(rho) and rho >= 0):
        raise ValueError(f"rho = {rho!r} is not allowed; allowed: a finite number >= 0")
    params = [p for p in model.parameters() if p.requires_grad]
    # The B_p passes only probe the loss surface: restore the buffers (BatchNorm running statistics)
    # after them, so that these follow the update batches exactly as in plain SGD.
    buffers = [b.clone() for b in model.buffers()]
    perturb_loss = perturbed_loss = math.nan
    scale = 0.0
    if rho > 0:
        loss = loss_fn(model(perturb_batch[0]), perturb_batch[1])
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()
        scale = rho / norm if norm > 0 else 0.0
        perturb_loss = perturbed_loss = loss.item()
    saved = None
    if scale > 0:
        with torch.no_grad():
            # Keep w itself rather than subtracting e later: (w + e) - e need not round back to w.
            saved = [p.detach().clone() for p in params]
            for p, g in zip(params, grads):
                p.add_(g, alpha=scale)
            perturbed_loss = loss_fn(model(perturb_batch[0]), perturb_batch[1]).item() if measure else math.nan
    with torch.no_grad():
        for b, kept in zip(model.buffers(), buffers):
            b.copy_(kept)
    optimizer.zero_grad()
    update_loss = loss_fn(model(update_batch[0]), update_batch[1])
    update_loss.backward()
    if saved is not None:
        with torch.no_grad():
            for p, w in zip(params, saved):
                p.copy_(w)
    optimizer.step()
    return {"perturb_loss": perturb_loss, "perturbed_loss": perturbed_loss, "update_loss": update_loss.item()}


def train_sam(model: nn.Module, loss_fn, x: Tensor, y: Tensor, spec: SAMSpec,
              generator: torch.Generator, log: Callable[[str], None] | None = None) -> list[dict]:
    """`spec.warmup_epochs` of plain SGD, then `spec.epochs` of `sam_step`, with one SGD optimiser throughout.

    Each epoch walks a fresh random permutation of the records in update batches; B_p is an
    independent uniform draw of `perturb_batch` records without replacement (two_batch) or the
    update batch itself (vanilla SAM). Batch randomness comes from the CPU `generator` only (dropout,
    if the model has any, uses torch's global generator). Returns one row per epoch: epoch (1-based),
    phase ("warmup" or "sam"), loss (mean update loss over the epoch's steps) and perturbed_loss
    (the mean B_p loss at w + e over every PERTURBED_LOSS_EVERY-th step of the epoch, from its
    first; NaN in the warm-up and at ρ = 0). Leaves the model in eval mode. `log` gets the
    progress, per step (an epoch of a large public set can take minutes)."""
    n = len(x)
    spec.check_data_size(n)
    progress = Progress(log or (lambda _: None), "pre-training steps",
                        (spec.warmup_epochs + spec.epochs) * math.ceil(n / spec.update_batch))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=spec.lr,
                                momentum=spec.momentum, weight_decay=spec.weight_decay)
    model.train()
    history = []
    for epoch in range(spec.warmup_epochs + spec.epochs):
        phase = "warmup" if epoch < spec.warmup_epochs else "sam"
        losses, perturbed = [], []
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, spec.update_batch):
            idx = order[start:start + spec.update_batch].to(x.device)
            update = (x[idx], y[idx])
            if phase == "warmup":
                optimizer.zero_grad()
                loss = loss_fn(model(update[0]), update[1])
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
                progress.advance()
                continue
            # B_p is drawn in both settings, so that vanilla SAM's update batches are the same
            # draws as DPAdapter's and standard training's: the kinds differ only in the perturbation
            pidx = torch.randperm(n, generator=generator)[:spec.perturb_batch].to(x.device)
            perturb = (x[pidx], y[pidx]) if spec.two_batch else update
            measure = (start // spec.update_batch) % PERTURBED_LOSS_EVERY == 0
            out = sam_step(model, loss_fn, perturb, update, spec.rho, optimizer, measure)
            losses.append(out["update_loss"])
            if measure and not math.isnan(out["perturbed_loss"]):
                perturbed.append(out["perturbed_loss"])
            progress.advance()
        history.append({"epoch": epoch + 1, "phase": phase, "loss": float(np.mean(losses)),
                        "perturbed_loss": float(np.mean(perturbed)) if perturbed else math.nan})
    model.eval()
    return history


@torch.no_grad()
def robust_accuracy(model: nn.Module, x: Tensor, y: Tensor, noise_std: float, draws: int,
                    generator: torch.Generator, batch_size: int = 1024) -> tuple[float, list[float]]:
    """DPAdapter's robust accuracy: the accuracy (in eval mode) with N(0, noise_std²) noise added to
    every parameter, as the mean over `draws` independent draws, and the per-draw accuracies.

    The noise is drawn on CPU from `generator` in each parameter's dtype and then moved to its
    device; the parameters and the train/eval mode are restored exactly afterwards."""
    if not (_is_real(noise_std) and noise_std >= 0):
        raise ValueError(f"noise_std = {noise_std!r} is not allowed; allowed: a finite number >= 0")
    if not (_is_int(draws) and draws >= 1):
        raise ValueError(f"draws = {draws!r} is not allowed; allowed: an integer >= 1")
    params = list(model.parameters())
    saved = [p.detach().clone() for p in params]
    was_training = model.training
    model.eval()
    accuracies = []
    try:
        for _ in range(draws):
            for p, w in zip(params, saved):
                noise = torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device)
                p.copy_(w + noise_std * noise)
            correct = sum(int((model(x[i:i + batch_size]).argmax(dim=1) == y[i:i + batch_size]).sum())
                          for i in range(0, len(x), batch_size))
            accuracies.append(correct / len(x))
    finally:
        for p, w in zip(params, saved):
            p.copy_(w)
        model.train(was_training)
    return float(np.mean(accuracies)), accuracies


class SharedTrunkRobustness:
    """`robust_accuracy` of many networks that share one frozen trunk, at the cost of one.

    DPAdapter fine-tunes each pre-trained network many times (every ε and repeat) with its
    convolutions frozen, and measures each fine-tuning's robust accuracy with the same seeded noise
    stream. The trunk's parameters come first in every such network's `parameters()`, so each draw
    perturbs the trunk alike in all of them: the noisy trunk's outputs of every draw are computed
    once (at the first network), with the generator's state after them, and each network then
    draws only its top's noise from that state. The accuracies equal `robust_accuracy`'s of the
    network top(trunk(·)) bit for bit (the same operations on the same batches, the same noise); a
    network whose trunk differs from the first one's, or whose top has other shapes, is refused."""

    def __init__(self, x: Tensor, noise_std: float, draws: int, seed: int, batch_size: int = 1024):
        if not (_is_real(noise_std) and noise_std >= 0):
            raise ValueError(f"noise_std = {noise_std!r} is not allowed; allowed: a finite number >= 0")
        if not (_is_int(draws) and draws >= 1):
            raise ValueError(f"draws = {draws!r} is not allowed; allowed: an integer >= 1")
        self.x, self.noise_std, self.draws, self.seed, self.batch_size = x, noise_std, draws, seed, batch_size
        self.trunk_state: list[Tensor] | None = None
        self.top_shapes: list[tuple] = []
        self.outputs, self.states = [], []  # per draw: the noisy trunk's output batches, the generator

    def _noisy_trunk(self, trunk: nn.Module, top: nn.Module) -> None:
        """Every draw's noisy trunk outputs, the generator moved past the top's noise of each draw
        as robust_accuracy's single stream is."""
        generator = torch.Generator().manual_seed(self.seed)
        self.trunk_state = [p.detach().clone() for p in trunk.parameters()]
        self.top_shapes = [(p.shape, p.dtype) for p in top.parameters()]
        was_training = trunk.training
        trunk.eval()
        try:
            for _ in range(self.draws):
                for p, w in zip(trunk.parameters(), self.trunk_state):
                    p.copy_(w + self.noise_std * torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device))
                self.states.append(generator.get_state())
                self.outputs.append([trunk(self.x[i:i + self.batch_size])
                                     for i in range(0, len(self.x), self.batch_size)])
                for shape, dtype in self.top_shapes:
                    torch.randn(shape, generator=generator, dtype=dtype)
        finally:
            for p, w in zip(trunk.parameters(), self.trunk_state):
                p.copy_(w)
            trunk.train(was_training)

    @torch.no_grad()
    def accuracy(self, trunk: nn.Module, top: nn.Module, y: Tensor) -> tuple[float, list[float]]:
        """(mean, per-draw accuracies) of top(trunk(x)) under the noise: `robust_accuracy` of the
        network whose parameters are trunk's, then top's."""
        if self.trunk_state is None:
            self._noisy_trunk(trunk, top)
        if [(p.shape, p.dtype) for p in top.parameters()] != self.top_shapes or not all(
                torch.equal(p, w) for p, w in zip(trunk.parameters(), self.trunk_state)):
            raise ValueError("the network's trunk or top differs from the first network's: its robust accuracy needs "
                             "its own noisy trunk (robust_accuracy)")
        params = list(top.parameters())
        saved = [p.detach().clone() for p in params]
        was_training = top.training
        top.eval()
        generator, accuracies = torch.Generator(), []
        try:
            for state, outputs in zip(self.states, self.outputs):
                generator.set_state(state)
                for p, w in zip(params, saved):
                    p.copy_(w + self.noise_std * torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device))
                size = self.batch_size
                correct = sum(int((top(out).argmax(dim=1) == y[i * size:(i + 1) * size]).sum())
                              for i, out in enumerate(outputs))
                accuracies.append(correct / len(self.x))
        finally:
            for p, w in zip(params, saved):
                p.copy_(w)
            top.train(was_training)
        return float(np.mean(accuracies)), accuracies
