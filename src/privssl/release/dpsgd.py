"""The DP-SGD head: the head of `HeadSpec` trained privately by Opacus, the baseline a DP user
would pick instead of adding noise to a trained head.

One training is Opacus' DP-SGD as documented: `PrivacyEngine.make_private` over SGD with
momentum, per-example gradients clipped to L2 norm C, Gaussian noise σ·C on their sum, Poisson
sampling of the batches. σ for a target (ε, δ) is calibrated by the spec's accountant (`pld`,
`rdp` or `prv`) for the sample rate and step count the run will actually have, and the run's ε is
that accountant's over the steps the engine recorded. The claim is (ε, δ)-DP under addition or removal of one record.

Choices, and why:
- The module keeps heads.py's parameter layout (weights (in, out)), so `flatten` of its
  parameters is the released head and `unflatten` + `predict_proba` reproduce it exactly; it
  starts from `init_heads` (the initialisation of A_S). Only `architecture`, `hidden` and
  `init_seed` of the HeadSpec are used: DP-SGD has its own optimiser (`DPSGDSpec`).
- Training is in float64, the dtype of every other head (heads.DTYPE): the released vector is
  the trained one without a cast, and at 128 features × ≤ 128 hidden units float64 costs
  nothing measurable next to Opacus' per-step bookkeeping.
- Accounting (σ for a target ε, the ε a run spent) is `privssl.accounting.dpsgd`.
- Sample rate and steps are Opacus': q = 1 / ceil(n / batch_size) (the DPDataLoader's rate),
  int(1/q) Poisson batches per epoch; the training checks that it took exactly that many steps.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from opacus import PrivacyEngine
from opacus.grad_sample import register_grad_sampler
from torch import nn

from privssl.accounting.dpsgd import OPACUS_ACCOUNTANTS, epsilon_spent
from privssl.release.dpsgd_spec import DPSGDSpec, sampling_plan  # noqa: F401  (re-exported: the spec of this head)
from privssl.training.heads import DTYPE, HeadSpec, flatten, init_heads

# --------------------------------------------------------------------------------------------
# The head as an Opacus-trainable module


class InOutLinear(nn.Module):
    """y = x W + b with W stored (in, out), as heads.py stores it."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone())
        self.bias = nn.Parameter(bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x, self.weight)


def _in_out_linear_grad_sample(layer: InOutLinear, activations: list[torch.Tensor],
                               backprops: torch.Tensor) -> dict[nn.Parameter, torch.Tensor]:
    """Per-example gradients of InOutLinear: x_i ⊗ g_i (in, out) and g_i (Opacus grad sampler)."""
    x = activations[0].to(backprops.dtype)
    out = {}
    if layer.weight.requires_grad:
        out[layer.weight] = torch.einsum("ni,nj->nij", x, backprops)
    if layer.bias.requires_grad:
        out[layer.bias] = backprops
    return out


register_grad_sampler(InOutLinear)(_in_out_linear_grad_sample)


class HeadModule(nn.Module):
    """One head of heads.py as a module: `linear` (weight, bias) or `mlp` (weight1, bias1, ReLU,
    weight2, bias2), parameters in heads.py's shapes and flatten order."""

    def __init__(self, params: dict[str, torch.Tensor]):
        """`params`: one head, shapes as `parameter_shapes` (no leading head dimension)."""
        super().__init__()
        if set(params) == {"weight", "bias"}:
            self.names = [("weight", "bias")]
        elif set(params) == {"weight1", "bias1", "weight2", "bias2"}:
            self.names = [("weight1", "bias1"), ("weight2", "bias2")]
        else:
            raise ValueError(f"not a head of heads.py: parameters {sorted(params)}")
        self.layers = nn.ModuleList(InOutLinear(params[w], params[b]) for w, b in self.names)

    @classmethod
    def initial(cls, head_spec: HeadSpec, in_dim: int, n_classes: int) -> "HeadModule":
        """The head A_S starts from (init_heads, drawn from head_spec.init_seed)."""
        return cls({k: v[0] for k, v in init_heads(head_spec, in_dim, n_classes, 1).items()})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers[0](x)
        if len(self.layers) == 2:
            x = self.layers[1](torch.relu(x))
        return x

    def head_params(self) -> dict[str, torch.Tensor]:
        """The parameters as heads.py's stacked dict, one head (leading dimension 1), detached."""
        out = {}
        for (w, b), layer in zip(self.names, self.layers):
            out[w] = layer.weight.detach()[None].clone()
            out[b] = layer.bias.detach()[None].clone()
        return out


class _Records(torch.utils.data.Dataset):
    """(features, labels) rows; a whole Poisson batch is one tensor index, no per-row collation."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __getitems__(self, indices: list[int]):
        idx = torch.as_tensor(indices, dtype=torch.long, device=self.y.device)
        return self.x[idx], self.y[idx]


def _batch_as_is(batch):
    return batch


# --------------------------------------------------------------------------------------------
# Training


@dataclass
class DPSGDRun:
    """One private training: the flat head (P,) float64 in heads.py's order, and its accounting."""

    flat: torch.Tensor
    noise_multiplier: float
    sample_rate: float
    steps: int  # optimiser steps taken (each one a Poisson-sampled noisy step)
    eps_spent: float  # the spec's accountant at δ over the engine's recorded steps, after training
    delta: float
    module: HeadModule  # the trained module itself (flat == flatten(module.head_params())[0])


def draw_generators(seed: int, device: torch.device | str = "cpu") -> tuple[torch.Generator, torch.Generator]:
    """(Poisson sampler generator on the CPU, noise generator on `device`), both from `seed`."""
    sampler_seed, noise_seed = np.random.SeedSequence(seed).generate_state(2)
    sampler = torch.Generator().manual_seed(int(sampler_seed))
    noise = torch.Generator(device=device).manual_seed(int(noise_seed))
    return sampler, noise


def train_dpsgd_head(features: torch.Tensor, labels: torch.Tensor, n_classes: int, head_spec: HeadSpec,
                     spec: DPSGDSpec, noise_multiplier: float, delta: float, seed: int) -> DPSGDRun:
    """DP-SGD by Opacus on (features, labels) from the initialisation of A_S; `seed` (≥ 0) fixes
    the Poisson batches and the noise, so the same seed gives the same head."""
    if not (math.isfinite(noise_multiplier) and noise_multiplier >= 0):
        raise ValueError(f"noise multiplier must be finite and >= 0, got {noise_multiplier}")
    device = features.device
    x, y = features.to(DTYPE), labels.to(device=device, dtype=torch.long)
    if x.ndim != 2 or y.shape != (len(x),):
        raise ValueError(f"features must be (n, F) and labels (n,), got {tuple(x.shape)} and {tuple(y.shape)}")
    sample_rate, planned_steps = sampling_plan(len(y), spec)
    module = HeadModule.initial(head_spec, x.shape[1], n_classes).to(device)
    optimizer = torch.optim.SGD(module.parameters(), lr=spec.lr, momentum=spec.momentum)
    sampler_gen, noise_gen = draw_generators(seed, device)
    loader = torch.utils.data.DataLoader(_Records(x, y), batch_size=spec.batch_size, collate_fn=_batch_as_is,
                                         generator=sampler_gen)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Secure RNG turned off")  # seeded on purpose
        # Opacus has no PLD accountant: a `pld` run records its steps in Opacus' RDP accountant's
        # history of (σ, q, steps), and epsilon_spent composes that history in the PLD accountant
        engine = PrivacyEngine(accountant=spec.accountant if spec.accountant in OPACUS_ACCOUNTANTS else "rdp",
                               secure_mode=False)
    private, dp_optimizer, dp_loader = engine.make_private(
        module=module, optimizer=optimizer, data_loader=loader, noise_multiplier=noise_multiplier,
        max_grad_norm=spec.clip_norm, poisson_sampling=True, noise_generator=noise_gen)
    if not math.isclose(dp_loader.sample_rate, sample_rate, rel_tol=1e-12):
        raise RuntimeError(f"Opacus samples at q = {dp_loader.sample_rate}, the calibration assumed {sample_rate}")
    private.train()
    with warnings.catch_warnings():
        # Opacus' backward hooks on the first layer, whose input (the features) needs no gradient
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        for _ in range(spec.epochs):
            for xb, yb in dp_loader:
                dp_optimizer.zero_grad(set_to_none=True)
                F.cross_entropy(private(xb), yb).backward()
                dp_optimizer.step()
    steps = sum(s for _, _, s in engine.accountant.history)
    if steps != planned_steps:
        raise RuntimeError(f"DP-SGD took {steps} steps, the calibration assumed {planned_steps}")
    # σ = 0: the noise-free limit
    eps = epsilon_spent(engine, delta, spec.accountant) if noise_multiplier > 0 else math.inf
    module = private.to_standard_module().eval()  # Opacus' hooks and per-sample attributes removed
    flat = flatten(module.head_params())[0].to(device="cpu", dtype=DTYPE)
    return DPSGDRun(flat, float(noise_multiplier), sample_rate, steps, eps, delta, module)
