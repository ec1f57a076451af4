"""SimCLR pre-training A_H of the base encoder on the public set D (Chen et al. 2020), with the
augmentations and loss of the Keras `semisupervised_simclr` example that the paper follows.

Resumable: a checkpoint is written atomically after every epoch, and every epoch draws its
shuffling and augmentations from a generator seeded by (seed, epoch), so a run killed and
resumed yields the same encoder as one that never stopped. Nothing depends on the number of
epochs (Adam at a constant learning rate, no schedule), so the state after epoch k of any run
with the same other settings is the state after epoch k of this one: a checkpoint at k ≤ epochs
is resumed, one past the requested epochs is not.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from privssl.io import atomic_torch_save
from privssl.training import checkpoints
from privssl.training.encoders import build_encoder, projection_head, unit_float
from privssl.training.precision import arithmetic, autocast, channels_last
from privssl.training.talos import TalosAdversary

NEGATIVES = ("cross_view", "all")


@dataclass(frozen=True)
class Augmentation:
    """Contrastive augmentation of the Keras example: flip, translate + zoom keeping at least
    `min_area` of the image, colour affine jitter (brightness scale, channel-mixing jitter)."""

    min_area: float = 0.25
    brightness: float = 0.6
    jitter: float = 0.2
    horizontal_flip: bool = True

    def __call__(self, images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        b, c = images.shape[:2]
        draw = lambda *shape: torch.rand(shape, generator=generator)  # noqa: E731 (CPU draws: device-independent)
        zoom = 1.0 - math.sqrt(self.min_area)
        # Keras RandomZoom((-zoom, 0)) zooms in: each side keeps a fraction in [1 - zoom, 1].
        keep = 1.0 - zoom * draw(b, 2)
        shift = (draw(b, 2) * 2 - 1) * zoom  # ±zoom/2 of the side; the normalised side is 2 long
        flip = torch.where(draw(b) < 0.5, -1.0, 1.0) if self.horizontal_flip else torch.ones(b)
        theta = torch.zeros(b, 2, 3)
        theta[:, 0, 0] = keep[:, 0] * flip
        theta[:, 1, 1] = keep[:, 1]
        theta[:, :, 2] = shift
        theta = theta.to(images)
        grid = F.affine_grid(theta, list(images.shape), align_corners=False)
        out = F.grid_sample(images, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
        # RandomColorAffine: x ↦ clip(x · (I·brightness_scale + jitter_matrix), 0, 1), per image.
        scale = 1.0 + (draw(b, 1, 1) * 2 - 1) * self.brightness
        mix = (draw(b, c, c) * 2 - 1) * self.jitter
        transform = (torch.eye(c).expand(b, c, c) * scale + mix).to(images)
        out = torch.einsum("bchw,bcd->bdhw", out, transform)
        return out.clamp(0.0, 1.0)


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float,
            negatives: str = "cross_view") -> tuple[torch.Tensor, torch.Tensor]:
    """NT-Xent loss of two views' projections (N, K) and the contrastive accuracy.

    `cross_view` (the Keras example): s_ij = cos(z1_i, z2_j)/τ, loss = ½[CE(s, I) + CE(sᵀ, I)],
    i.e. each view's positive is its partner and the negatives are the other view's N − 1 items.
    `all` (Chen et al. 2020, eq. 1): over the 2N projections, each positive against all 2N − 2
    others; symmetric in the views by construction.
    Accuracy: how often the partner is the most similar candidate, both directions.
    """
    n = z1.shape[0]
    z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    targets = torch.arange(n, device=z1.device)
    if negatives == "cross_view":
        sim = z1 @ z2.T / temperature
        loss = 0.5 * (F.cross_entropy(sim, targets) + F.cross_entropy(sim.T, targets))
        correct = (sim.argmax(1) == targets).sum() + (sim.argmax(0) == targets).sum()
        return loss, correct / (2 * n)
    if negatives == "all":
        z = torch.cat([z1, z2])
        sim = z @ z.T / temperature
        sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
        partner = torch.cat([targets + n, targets])
        return F.cross_entropy(sim, partner), (sim.argmax(1) == partner).float().mean()
    raise ValueError(f"unknown negatives {negatives!r}; allowed: {NEGATIVES}")


@dataclass(frozen=True)
class SimCLRSpec:
    encoder: str = "convnet"
    width: int = 128
    epochs: int = 20
    batch_size: int = 525
    temperature: float = 0.1
    lr: float = 1e-3
    negatives: str = "cross_view"
    augmentation: Augmentation = field(default_factory=Augmentation)

    @classmethod
    def from_config(cls, cfg: dict) -> "SimCLRSpec":
        kwargs = {k: cfg[k] for k in cls.__dataclass_fields__ if k in cfg and k != "augmentation"}
        return cls(augmentation=Augmentation(**cfg.get("augmentation", {})), **kwargs)


class SimCLR(nn.Module):
    def __init__(self, spec: SimCLRSpec, in_channels: int, image_size: int):
        super().__init__()
        self.encoder = build_encoder(spec.encoder, in_channels, image_size, spec.width)
        self.projector = projection_head(self.encoder.out_dim, spec.width)


def state_digest(state: dict[str, torch.Tensor] | None) -> str | None:
    """SHA-256 of a state dict's tensors in key order (None for none)."""
    if state is None:
        return None
    digest = hashlib.sha256()
    for key in sorted(state):
        digest.update(key.encode())
        digest.update(state[key].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def pretrain(spec: SimCLRSpec, images: torch.Tensor, seed: int, device: torch.device,
             checkpoint: Path, log: Callable[[str], None] = print,
             init_encoder: dict[str, torch.Tensor] | None = None,
             adversary: TalosAdversary | None = None, code: str = "") -> tuple[SimCLR, list[dict]]:
    """Train SimCLR on `images` (N, C, H, W): uint8, or float in [0, 1]; resume from `checkpoint`.

    `init_encoder`: start the base encoder from these weights (contrastive fine-tuning of a public
    encoder, thesis §4.2.3) instead of the seeded initialisation; the projection head is fresh.
    `adversary`: Talos (privssl.training.talos): before each epoch its classifier trains one epoch on the
    encoder's representations, and the encoder's loss becomes L_Contrastive − λ L_C.
    Returns the model and the per-epoch history (epoch, loss, contrastive_accuracy, and with an
    adversary its epoch's adversary_loss and adversary_accuracy).
    """
    torch.manual_seed(seed)
    model = channels_last(SimCLR(spec, images.shape[1], images.shape[-1]).to(device), device)
    if init_encoder is not None:
        model.encoder.load_state_dict(init_encoder)
    optimiser = torch.optim.Adam(model.parameters(), lr=spec.lr)
    history: list[dict] = []
    # Everything but the epochs that shapes the result: the spec (encoder, width, batch size,
    # temperature, lr, negatives, augmentation), the seed, the images and their order, the
    # starting encoder, the adversary, the device kind, whose kernels round differently (a CPU run
    # resumed from a GPU epoch is neither), and the intra-op thread count, which splits float sums
    # differently (config `torch_threads`), and the code (`code`: privssl.training.checkpoints).
    data = hashlib.sha256(images.cpu().contiguous().numpy()).hexdigest()
    fingerprint = checkpoints.fingerprint(
        simclr=replace(spec, epochs=0), seed=seed, dtype=str(images.dtype), shape=tuple(images.shape), images=data,
        arithmetic=arithmetic(device), threads=torch.get_num_threads(), init_encoder=state_digest(init_encoder),
        adversary=adversary.fingerprint() if adversary else None, code=code)
    state = torch.load(checkpoint, map_location=device, weights_only=True) if checkpoint.exists() else None
    if state is not None and checkpoints.resumable(state["fingerprint"], fingerprint, checkpoint, log):
        done = len(state["history"])
        if done > spec.epochs:
            log(f"ignoring {checkpoint}: it holds epoch {done}, past the {spec.epochs} requested, and a "
                f"later epoch's model cannot be wound back; starting afresh")
        else:
            model.load_state_dict(state["model"])
            optimiser.load_state_dict(state["optimiser"])
            if adversary is not None:
                adversary.load_state_dict(state["adversary"])
            history = state["history"]
            log(f"resumed from {checkpoint} after epoch {done}")
    for epoch in range(len(history), spec.epochs):
        generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        permutation = torch.randperm(len(images), generator=generator)
        record = {"epoch": epoch + 1}
        if adversary is not None:  # Algorithm 2: the classifier's epoch first
            record |= adversary.fit_epoch(model.encoder, images, epoch, spec.batch_size, spec.augmentation, device)
        model.train()
        total_loss = total_acc = seen = 0.0
        for start in range(0, len(images), spec.batch_size):
            idx = permutation[start:start + spec.batch_size]
            if len(idx) < 2:  # a contrastive batch needs a negative
                continue
            batch = unit_float(images[idx].to(device))
            views = [channels_last(spec.augmentation(batch, generator), device) for _ in range(2)]
            with autocast(device):  # bf16 on CUDA: public data, no privacy claim rests on it
                h1, h2 = (model.encoder(v) for v in views)
                z1, z2 = model.projector(h1), model.projector(h2)
            h1, h2 = h1.float(), h2.float()
            loss, acc = nt_xent(z1.float(), z2.float(), spec.temperature, spec.negatives)
            objective = loss
            if adversary is not None:  # L_Contrastive + L_C through the reversal: the encoder gets −λ∇L_C
                objective = loss + adversary.loss(torch.cat([h1, h2]), idx.to(device), reverse=True)[0]
            optimiser.zero_grad(set_to_none=True)
            objective.backward()
            optimiser.step()
            total_loss += loss.detach().item() * len(idx)
            total_acc += acc.item() * len(idx)
            seen += len(idx)
        history.append(record | {"loss": total_loss / seen, "contrastive_accuracy": total_acc / seen})
        log(" ".join([f"epoch {epoch + 1}/{spec.epochs}"] + [f"{k} {v:.4f}" for k, v in history[-1].items()
                                                             if k != "epoch"]))
        atomic_torch_save({"model": model.state_dict(), "optimiser": optimiser.state_dict(), "history": history,
                           "fingerprint": fingerprint, "adversary": adversary.state_dict() if adversary else None},
                          checkpoint)
    return model, history
