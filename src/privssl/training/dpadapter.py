"""DPAdapter (seed 002) as this workflow runs it: supervised pre-training of the public SimCLR
encoder and a classifier on the *public* labelled split, by standard training, vanilla SAM or DPAdapter's
two-batch SAM (`sam.py`), then DP-SGD fine-tuning of the whole network on the private d.

The paper's claim (Table 1) is that a pre-trained model with robust parameters loses less
accuracy to the downstream DP-SGD noise: DPAdapter ≥ vanilla SAM ≥ standard pre-training.
Parameter robustness is measured as the paper's *robust accuracy*: the accuracy under i.i.d.
Gaussian noise on every weight.

Pre-training kinds, all from the same seeded initialisation and the same batches' generator:
- `standard`: warm-up plus the SAM epochs as plain SGD steps (ρ = 0 — `sam_step` is then
  exactly an SGD step);
- `sam`: vanilla SAM, the perturbation from the update batch itself (B_p = B_u);
- `dpadapter`: the perturbation from a separate large batch B_p.
Downstream, the classification layer is re-initialised for the private task's classes (the
paper moves from CIFAR-100 to CIFAR-10) and every weight is fine-tuned by `private_sgd`.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from privssl.training.encoders import unit_float
from privssl.training.sam import SAMSpec, train_sam

PRETRAININGS = ("standard", "sam", "dpadapter")


class Classifier(nn.Module):
    """An encoder followed by a linear classification layer."""

    def __init__(self, encoder: nn.Module, n_classes: int):
        super().__init__()
        self.encoder = encoder
        self.classifier = nn.Linear(encoder.out_dim, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.encoder(x))


def pretraining_spec(kind: str, rho: float, spec: SAMSpec) -> SAMSpec:
    """The SAM settings of one pre-training kind at radius ρ."""
    if kind == "standard":
        return replace(spec, rho=0.0)
    if kind == "sam":
        return replace(spec, rho=rho, two_batch=False)
    if kind == "dpadapter":
        return replace(spec, rho=rho, two_batch=True)
    raise ValueError(f"unknown pre-training {kind!r}; allowed: {', '.join(PRETRAININGS)}")


def pretrain_classifier(kind: str, rho: float, spec: SAMSpec, images: torch.Tensor, labels: torch.Tensor,
                        n_classes: int, encoder: nn.Module, seed: int,
                        log: Callable[[str], None] | None = None) -> tuple[Classifier, list[dict]]:
    """Pre-train a Classifier on the public (images, labels), starting from a copy of `encoder`
    (the workflow's public SimCLR encoder: supervised pre-training then converges in a few
    epochs on CPU); `seed` fixes the classification layer's initialisation and the batches, so
    the kinds differ only in their perturbation. `log` gets the progress of the training steps."""
    torch.manual_seed(seed)
    device = next(encoder.parameters()).device  # the layer is initialised on the CPU, as on a CPU run
    model = Classifier(copy.deepcopy(encoder), n_classes).to(device)
    generator = torch.Generator().manual_seed(seed)
    history = train_sam(model, F.cross_entropy, unit_float(images.to(device)), labels.long().to(device),
                        pretraining_spec(kind, rho, spec), generator, log)
    return model, history


def downstream_model(pretrained: Classifier, n_classes: int, seed: int) -> Classifier:
    """A copy of the pre-trained network with a fresh classification layer for the private task."""
    model = copy.deepcopy(pretrained)
    torch.manual_seed(seed)
    model.classifier = nn.Linear(model.encoder.out_dim, n_classes).to(next(pretrained.parameters()).device)
    return model
