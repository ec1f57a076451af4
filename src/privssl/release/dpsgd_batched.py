"""DP-SGD for many heads at once: the algorithm of `privssl.release.dpsgd` (Opacus), stacked.

The attacks release their shadow heads the victim's way (the mechanism is public), and for
the DP-SGD head that means one private training per shadow head and per ε: 80 heads × 7 ε
through Opacus one at a time would take minutes. Heads here are stacked along a leading
dimension B, each with its own data set (rows of a shared pool), its own Poisson batches and
its own noise multiplier, and every step is a few batched matrix products.

Per step, as Opacus' DPOptimizer does it (opacus/optimizers/optimizer.py):
- each record of a head's set joins the batch with probability q (Poisson);
- per-example gradients g_i of the cross-entropy are clipped by min(1, C / (‖g_i‖ + 1e-6));
- N(0, σ²C²) noise is added to their sum, which is divided by the expected batch size
  int(n·q) (loss_reduction "mean"); then SGD with momentum (PyTorch's update).

Per-example gradient norms need no per-example gradients: a linear layer's gradient for one
example is the outer product a_i g_iᵀ of its input and output gradient, of norm ‖a_i‖·‖g_i‖,
and the clipped sum Σ c_i a_i g_iᵀ is one matrix product (the "ghost clipping" identity).
tests/test_dpsgd_batched.py checks one step against Opacus itself.

An auditor's gradient canary (`GradientCanary`, privssl.audit.gradient_canary) can be inserted:
in the heads where it is present it is one more record of the Poisson batch, its draw one more
column of the records' draw (`poisson_mask`), whose gradient (a fixed direction at a fixed norm) is
clipped by the records' rule (`clip_factor`); the trace of the canary's coordinate over the steps
is kept for the white-box auditor, who sees every update. The draw, the clipping and the noise
(`gaussian_noise`) are one function each, so that the audit's tests plant a bug in each, for the
records and the canary alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from privssl.release.dpsgd_spec import DPSGDSpec, sampling_plan
from privssl.training.heads import DTYPE, HeadSpec, init_heads

_OPACUS_NORM_GUARD = 1e-6  # Opacus' clip factor C / (‖g‖ + 1e-6)


def clip_factor(norm_sq: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """Opacus' per-example clipping factor min(1, C / (‖g‖ + 1e-6)) from ‖g‖²."""
    return torch.clamp(clip_norm / (norm_sq.sqrt() + _OPACUS_NORM_GUARD), max=1.0)


def poisson_mask(generator: torch.Generator, heads: int, records: int, rate: float,
                 device: torch.device | str) -> torch.Tensor:
    """(heads, records) bool: each record of each head joins this step's batch with probability `rate`."""
    return torch.rand(heads, records, generator=generator, device=device, dtype=DTYPE) < rate


def gaussian_noise(generator: torch.Generator, shape: torch.Size, device: torch.device | str) -> torch.Tensor:
    """One step's standard normal noise for a parameter, drawn afresh at every step."""
    return torch.randn(shape, generator=generator, device=device, dtype=DTYPE)


@dataclass(frozen=True)
class GradientCanary:
    """A crafted gradient inserted as one more record: in the heads where `present` (B,), sampled
    with the records' rate; its gradient is `norm` times the unit basis vector of parameter `name` at
    `index` (a coordinate of one head), clipped like every per-example gradient."""

    name: str
    index: tuple[int, ...]
    norm: float
    present: torch.Tensor


def clipped_gradient_sum(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                         weights: torch.Tensor, clip_norm: float) -> dict[str, torch.Tensor]:
    """Σ_i weights[b, i] · clip_C(∇ℓ(head_b; x[b, i], y[b, i])) for B stacked heads.

    x: (B, n, F) float64, y: (B, n), weights: (B, n) (the Poisson mask). Heads are heads.py's
    linear or one-hidden-layer MLP; the gradients are those of the per-example cross-entropy."""
    mlp = "weight1" in params
    first_w, first_b = ("weight1", "bias1") if mlp else ("weight", "bias")
    z1 = torch.einsum("bnf,bfh->bnh", x, params[first_w]) + params[first_b][:, None, :]
    if mlp:
        a1 = torch.relu(z1)
        logits = torch.bmm(a1, params["weight2"]) + params["bias2"][:, None, :]
    else:
        logits = z1
    g_out = torch.softmax(logits, -1) - torch.nn.functional.one_hot(y, logits.shape[-1]).to(logits.dtype)
    x_sq = (x * x).sum(-1)
    if mlp:
        g_hidden = torch.bmm(g_out, params["weight2"].transpose(1, 2)) * (z1 > 0)
        norm_sq = (x_sq + 1) * (g_hidden * g_hidden).sum(-1) + ((a1 * a1).sum(-1) + 1) * (g_out * g_out).sum(-1)
    else:
        norm_sq = (x_sq + 1) * (g_out * g_out).sum(-1)
    factor = weights * clip_factor(norm_sq, clip_norm)
    if not mlp:
        g = g_out * factor[..., None]
        return {"weight": torch.einsum("bnf,bnc->bfc", x, g), "bias": g.sum(1)}
    gh, go = g_hidden * factor[..., None], g_out * factor[..., None]
    return {"weight1": torch.einsum("bnf,bnh->bfh", x, gh), "bias1": gh.sum(1),
            "weight2": torch.einsum("bnh,bnc->bhc", a1, go), "bias2": go.sum(1)}


@torch.no_grad()
def train_dpsgd_heads(features: torch.Tensor, labels: torch.Tensor, sets: torch.Tensor, n_classes: int,
                      head_spec: HeadSpec, spec: DPSGDSpec, noise_multipliers: torch.Tensor,
                      seed: int, canary: GradientCanary | None = None) -> dict[str, torch.Tensor]:
    """B DP-SGD heads: head b trains on rows features[sets[b]] (all sets of one size n) with
    noise multiplier noise_multipliers[b], from A_S's initialisation, for the steps and rate
    `sampling_plan(n, spec)` gives (Opacus'). `seed` fixes every Poisson batch and noise draw.
    With a `canary`, the returned parameters also hold "canary_trace" (B, steps + 1): the
    canary's coordinate before the first step and after every step."""
    if sets.ndim != 2 or sets.shape[1] < 1:
        raise ValueError(f"sets must be (heads, n) row indices, got {tuple(sets.shape)}")
    sigma = torch.as_tensor(noise_multipliers, dtype=DTYPE, device=features.device)
    if sigma.shape != (sets.shape[0],) or not bool(torch.isfinite(sigma).all() and (sigma >= 0).all()):
        raise ValueError(f"noise multipliers must be {sets.shape[0]} finite numbers >= 0, got {noise_multipliers}")
    n_heads, n = sets.shape
    sample_rate, steps = sampling_plan(n, spec)
    expected_batch = int(n * sample_rate)  # Opacus' expected_batch_size
    x = features.to(DTYPE)[sets]
    y = labels.to(features.device)[sets]
    params = init_heads(head_spec, features.shape[1], n_classes, n_heads, features.device)
    momentum = {k: torch.zeros_like(v) for k, v in params.items()}
    generator = torch.Generator(device=features.device).manual_seed(seed)
    noise_std = sigma * spec.clip_norm
    if canary is not None:
        if canary.present.shape != (n_heads,):
            raise ValueError(f"the canary's presence must be one flag per head ({n_heads}), got "
                             f"{tuple(canary.present.shape)}")
        at = (slice(None), *canary.index)  # the canary's coordinate in every head
        trace = [params[canary.name][at].clone()]
        present = canary.present.to(device=features.device, dtype=DTYPE)
        canary_clipped = canary.norm * clip_factor(torch.tensor(canary.norm ** 2, dtype=DTYPE), spec.clip_norm)
    for step in range(steps):
        # the canary, where there is one, is the last column of the draw: a record like the others
        drawn = poisson_mask(generator, n_heads, n + (canary is not None), sample_rate, features.device)
        chosen = drawn[:, :n]
        # Only the sampled rows enter the step: each head's rows first, padded to the largest
        # batch of the stack with weight 0 (about q·n rows instead of n).
        width = int(chosen.sum(1).max())
        rows = torch.argsort((~chosen).to(torch.int8), dim=1, stable=True)[:, :width]
        batch = chosen.gather(1, rows).to(DTYPE)
        xb = x.gather(1, rows[..., None].expand(-1, -1, x.shape[2]))
        grads = clipped_gradient_sum(params, xb, y.gather(1, rows), batch, spec.clip_norm)
        if canary is not None:
            grads[canary.name][at] += canary_clipped * present * drawn[:, n]
        for name, p in params.items():
            noise = gaussian_noise(generator, p.shape, p.device)
            grad = (grads[name] + noise_std.view(-1, *([1] * (p.ndim - 1))) * noise) / expected_batch
            # torch.optim.SGD: buf = grad at the first step, then momentum·buf + grad; p -= lr·buf
            momentum[name] = grad if step == 0 else spec.momentum * momentum[name] + grad
            p -= spec.lr * momentum[name]
        if canary is not None:
            trace.append(params[canary.name][at].clone())
    if canary is not None:
        params["canary_trace"] = torch.stack(trace, 1)
    return params
