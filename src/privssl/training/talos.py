"""Talos (thesis Ch. 4.4, He & Zhang): contrastive learning that censors a sensitive attribute.

An adversarial classifier C (3-layer MLP, 64 hidden units) learns to predict the attribute s from
the base encoder's output h = f(x̃) of both augmented views (eq. 4.1, L_C). The encoder is trained
on L_Talos = L_Contrastive − λ·L_C (eq. 4.2): it keeps the contrastive objective and makes the
attribute hard to read from h. The minus sign is realised by a gradient-reversal layer between h
and C (Ganin & Lempitsky 2015): the forward pass is the identity, the backward pass multiplies
the gradient by −λ, so one backward of L_Contrastive + L_C gives the projection head ∇L_Contrastive
and the encoder ∇L_Contrastive − λ∇L_C.

Algorithm 2 alternates by epoch: an epoch that updates C alone on L_C, then an epoch that updates
the encoder and projection head. `TalosAdversary.fit_epoch` is the first kind; `simclr.pretrain`
runs it before each of its own epochs. The adversary's epoch draws from its own generator and
reads the encoder in evaluation mode without gradients, so it leaves the encoder and the
contrastive epochs' randomness exactly as it found them: at λ = 0 Talos is plain SimCLR, bit for
bit (tests/test_talos.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from privssl.training.encoders import unit_float


class GradientReversal(torch.autograd.Function):
    """Identity forward; backward multiplies the incoming gradient by −λ."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, lam: float) -> torch.Tensor:
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return -ctx.lam * grad, None


def reverse_gradient(x: torch.Tensor, lam: float) -> torch.Tensor:
    return GradientReversal.apply(x, lam)


def adversarial_classifier(in_dim: int, hidden: int, n_attributes: int) -> nn.Module:
    """C: the thesis's 3-layer MLP (smaller than the attribute-inference attack's 128 units)."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, n_attributes))


@dataclass(frozen=True)
class TalosSpec:
    """λ, the adversarial factor (0: plain contrastive learning), and C's width and Adam rate."""

    lam: float
    hidden: int = 64
    lr: float = 1e-3

    def __post_init__(self) -> None:
        if not self.lam >= 0:
            raise ValueError(f"Talos adversarial factor lambda must be >= 0, got {self.lam}")


class TalosAdversary:
    """C, its optimiser and the attributes of the training images (aligned with them)."""

    def __init__(self, spec: TalosSpec, attributes: torch.Tensor, n_attributes: int, in_dim: int, seed: int,
                 device: torch.device):
        if attributes.ndim != 1 or int(attributes.min()) < 0 or int(attributes.max()) >= n_attributes:
            raise ValueError(f"attributes must be a 1-D tensor of values in [0, {n_attributes}), got shape "
                             f"{tuple(attributes.shape)} and range [{int(attributes.min())}, {int(attributes.max())}]")
        self.spec, self.seed, self.n_attributes = spec, seed, n_attributes
        self.attributes = attributes.long().to(device)
        with torch.random.fork_rng(devices=[]):  # C's initialisation must not shift the encoder's RNG
            torch.manual_seed(seed)
            self.classifier = adversarial_classifier(in_dim, spec.hidden, n_attributes).to(device)
        self.optimiser = torch.optim.Adam(self.classifier.parameters(), lr=spec.lr)

    def fingerprint(self) -> dict:
        """What shapes the adversary's effect on the encoder, for the SimCLR checkpoint."""
        data = hashlib.sha256(self.attributes.cpu().numpy().tobytes()).hexdigest()
        return {"spec": self.spec, "seed": self.seed, "n_attributes": self.n_attributes, "attributes": data}

    def loss(self, representations: torch.Tensor, idx: torch.Tensor, reverse: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """L_C (eq. 4.1) of the two views' representations (2B, D) of images idx (B,), and C's accuracy;
        through the gradient-reversal layer when `reverse` (the encoder's epoch)."""
        attributes = self.attributes[idx].repeat(2)
        h = reverse_gradient(representations, self.spec.lam) if reverse else representations
        logits = self.classifier(h)
        return F.cross_entropy(logits, attributes), (logits.argmax(1) == attributes).float().mean()

    def fit_epoch(self, encoder: nn.Module, images: torch.Tensor, epoch: int, batch_size: int, augmentation,
                  device: torch.device) -> dict[str, float]:
        """One epoch of C alone on L_C (Algorithm 2, line 10), on fresh augmented views of every image.
        The encoder is read in evaluation mode without gradients (batch-norm statistics untouched)."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        permutation = torch.randperm(len(images), generator=generator)
        was_training = encoder.training
        encoder.eval()
        total_loss = total_acc = 0.0
        for start in range(0, len(images), batch_size):
            idx = permutation[start:start + batch_size]
            batch = unit_float(images[idx].to(device))
            with torch.no_grad():
                h = torch.cat([encoder(augmentation(batch, generator)) for _ in range(2)])
            loss, acc = self.loss(h, idx.to(device), reverse=False)
            self.optimiser.zero_grad(set_to_none=True)
            loss.backward()
            self.optimiser.step()
            total_loss += loss.item() * len(idx)
            total_acc += acc.item() * len(idx)
        encoder.train(was_training)
        return {"adversary_loss": total_loss / len(images), "adversary_accuracy": total_acc / len(images)}

    def state_dict(self) -> dict:
        return {"classifier": self.classifier.state_dict(), "optimiser": self.optimiser.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.classifier.load_state_dict(state["classifier"])
        self.optimiser.load_state_dict(state["optimiser"])
