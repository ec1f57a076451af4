"""Per-example gradients and their clipping, for DP-SGD and DPCL (differentially private
contrastive learning).

DP training clips each example's gradient to L2 norm C and adds Gaussian noise to the sum, so it
needs every example's gradient separately. They are computed with torch.func: `functional_call`
makes the module a function of its parameters, `grad` differentiates one example, and `vmap`
runs that over the batch as one vectorised computation (no Python loop, no hooks on the module).

Why not Opacus' hooks: they give gradients of a per-example loss, sum_b dL_b/dθ. In contrastive
learning the loss couples the batch (each view's negatives are the other views), so a view's share
of the batch gradient is the vector-Jacobian product J_bᵀ (dL/dz_b) of its own forward pass with
the cotangent dL/dz_b taken from the whole batch. `per_example_vjp` takes any cotangent, so it
splits that gradient into per-view pieces that sum to the batch gradient.

BatchNorm caveat: in training mode (or without running statistics) BatchNorm normalises by batch
statistics, which couple the examples, so per-example gradients are not defined; such modules are
refused. In evaluation mode with running statistics it is an affine map per example and is fine.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

_BATCHNORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


def _trainable(module: nn.Module) -> dict[str, Tensor]:
    """The parameters to differentiate; BatchNorm on batch statistics is refused (see the module
    docstring). Frozen parameters and buffers are left out: functional_call takes them from the
    module."""
    for name, layer in module.named_modules():
        # BatchNorm uses batch statistics in eval mode too when it tracks no running statistics
        if isinstance(layer, _BATCHNORMS) and (layer.training or layer.running_mean is None):
            raise ValueError(
                f"{type(module).__name__} has {type(layer).__name__} layer {name!r} normalising by batch "
                "statistics (training mode or track_running_stats=False): the examples are coupled, so "
                "per-example gradients are not defined; put it in eval mode with running statistics, or "
                "use a per-example normalisation (GroupNorm, LayerNorm)")
    return {name: p.detach() for name, p in module.named_parameters() if p.requires_grad}


def _check_batch(inputs: Tensor, other: Tensor, what: str) -> None:
    if inputs.shape[0] != other.shape[0]:
        raise ValueError(f"inputs {tuple(inputs.shape)} and {what} {tuple(other.shape)} differ in "
                         "the leading (batch) dimension")


def _per_example(module: nn.Module, example_grad: Callable, inputs: Tensor, other: Tensor,
                 chunk_size: int | None) -> dict[str, Tensor]:
    """vmap of `example_grad(params, x_b, other_b)` over the rows, params shared."""
    params = _trainable(module)
    return vmap(example_grad, in_dims=(None, 0, 0), chunk_size=chunk_size)(params, inputs, other)


def per_example_vjp(module: nn.Module, inputs: Tensor, cotangents: Tensor,
                    chunk_size: int | None = None) -> dict[str, Tensor]:
    """J_bᵀ c_b for each row b: the gradient w.r.t. the trainable parameters of
    <module(inputs[b:b+1])[0], cotangents[b]>. With cotangents G = dL/dZ of a loss L on
    Z = module(inputs), the rows sum to dL/dθ. Returns {name: (B, *param.shape)}; `chunk_size`
    rows at a time bound the memory (None: all at once)."""
    _check_batch(inputs, cotangents, "cotangents")

    def inner(params, x, c):
        out = functional_call(module, params, (x.unsqueeze(0),))[0]
        # a broadcastable mismatch would give a wrong product without an error
        if out.shape != c.shape:
            raise ValueError(f"cotangents {tuple(cotangents.shape)} do not match the module's output: "
                             f"per example {tuple(c.shape)} against {tuple(out.shape)}")
        return (out * c).sum()

    return _per_example(module, grad(inner), inputs, cotangents, chunk_size)


def per_example_loss_grads(module: nn.Module, loss_fn: Callable[[Tensor, Tensor], Tensor], inputs: Tensor,
                           targets: Tensor, chunk_size: int | None = None) -> dict[str, Tensor]:
    """For each row b the gradient of loss_fn(module(inputs[b:b+1]), targets[b:b+1]) (a scalar)
    w.r.t. the trainable parameters: supervised DP-SGD. Returns {name: (B, *param.shape)}."""
    _check_batch(inputs, targets, "targets")

    def inner(params, x, t):
        return loss_fn(functional_call(module, params, (x.unsqueeze(0),)), t.unsqueeze(0))

    return _per_example(module, grad(inner), inputs, targets, chunk_size)


def flat_norms(grads: dict[str, Tensor]) -> Tensor:
    """(B,) L2 norm of each example's gradient over all parameters together."""
    # norms of norms: no squares of the entries, which could overflow in low precision
    per_param = [torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads.values()]
    return torch.linalg.vector_norm(torch.stack(per_param, dim=1), dim=1)


def clip_and_sum(grads: dict[str, Tensor], clip_norm: float) -> tuple[dict[str, Tensor], Tensor]:
    """Scale each example's gradient by min(1, C / ‖g_b‖) (a zero gradient keeps factor 1) so that
    its norm is at most C (up to rounding), then sum over the examples. Returns the sum
    {name: param shape} and the unclipped norms (B,)."""
    if not (math.isfinite(clip_norm) and clip_norm > 0):
        raise ValueError(f"clip_norm must be finite and > 0, got {clip_norm!r}")
    norms = flat_norms(grads)
    factors = (clip_norm / norms).clamp(max=1.0)  # C / 0 = inf → 1
    return {name: torch.tensordot(factors, g, dims=1) for name, g in grads.items()}, norms


def gaussian_noise_like(summed: dict[str, Tensor], std: float, generator: torch.Generator) -> dict[str, Tensor]:
    """summed + N(0, std²) per coordinate. The noise is drawn on the CPU in float64 from
    `generator`, parameter by parameter in the dict's order, then moved to each tensor's device
    and dtype, so a seed gives the same noise on any device; std = 0 returns a copy (and draws
    nothing)."""
    if not (math.isfinite(std) and std >= 0):
        raise ValueError(f"std must be finite and >= 0, got {std!r}")
    if std == 0:
        return {name: g.clone() for name, g in summed.items()}
    return {name: g + (std * torch.randn(g.shape, generator=generator, dtype=torch.float64)).to(g.device, g.dtype)
            for name, g in summed.items()}
