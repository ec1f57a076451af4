"""Post-training protection (Algorithm 1): release ω + noise, and the utility it costs.

For one method, R unit noise draws z_r are taken once and the release at budget ε is
ω + scale(ε)·z_r. Each released head still uses a single draw (no composition); sharing the
draws across ε (common random numbers) only removes draw-to-draw jitter between the points of
one curve, so the utility-vs-ε curves are smooth without more repeats.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from privssl.release.mechanisms import NoiseFamily
from privssl.release.methods import output_perturbation_guarantee, release_method
from privssl.training.heads import flatten


@dataclass(frozen=True)
class Calibration:
    """Noise scale of one method at one ε, and the exact claim it supports."""

    method: str
    eps: float
    delta: float  # 0 for the pure-ε methods
    sensitivity_norm: str  # "l1" or "l2": which sensitivity the scale uses
    sensitivity: float
    noise_scale: float  # s, b, σ or the Gamma-norm scale θ
    guarantee_kind: str
    guarantee: str


def calibrate(name: str, eps: float, delta: float, sensitivity: dict, graph: bool = False) -> Calibration:
    """Noise scale of output-perturbation method `name` at (ε, δ) and its claim, from the
    sensitivity record (sensitivity.json: `delta1`, `delta2`, `sampling`, ...); `graph`: a head
    on a graph's node embeddings (the claim's adjacency says so)."""
    method = release_method(name)
    if method.release != "output_perturbation":
        raise ValueError(f"{name!r} releases no noisy copy of a trained head (its release is {method.release!r})")
    value = sensitivity.get(method.sensitivity_key())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < float("inf")):
        raise ValueError(f"sensitivity record: {method.sensitivity_key()} = {value!r} is not a finite number > 0 "
                         f"(needed by {name!r})")
    used_delta = delta if method.uses_delta else 0.0
    scale = method.noise.scale(value, eps, delta if method.uses_delta else None)
    claim = output_perturbation_guarantee(name, eps, delta, sensitivity, graph)
    return Calibration(name, eps, used_delta, "l1" if method.sensitivity == "l1" else "l2", value, scale,
                       claim.kind, claim.statement)


def protected_heads(released: torch.Tensor, name: str, eps_grid: list[float], repeats: int, delta: float,
                    sensitivity: dict, seed: int, graph: bool = False) -> tuple[torch.Tensor, list[Calibration]]:
    """Noisy copies (len(eps_grid), repeats, P) of the flat released head (P,)."""
    calibrations = [calibrate(name, eps, delta, sensitivity, graph) for eps in eps_grid]
    scales = torch.tensor([c.noise_scale for c in calibrations], dtype=released.dtype)
    copies = released.reshape(1, -1).expand(repeats, -1)
    return add_noise(copies, release_method(name).noise, scales, torch.Generator().manual_seed(seed),
                     draws_per_scale=False), calibrations


def add_noise(heads: torch.Tensor, noise: NoiseFamily, scales: torch.Tensor, generator: torch.Generator,
              draws_per_scale: bool) -> torch.Tensor:
    """(E, B, P): the flat heads (B, P) plus unit noise of `noise` times each of the E scales, one
    draw per head: fresh for every scale (`draws_per_scale`), or the same B draws at every scale
    (common random numbers: one release curve over ε without draw-to-draw jitter)."""
    draws = noise.sample(((len(scales) if draws_per_scale else 1) * heads.shape[0], heads.shape[1]), generator,
                         dtype=heads.dtype)
    return heads[None] + scales.to(heads.dtype)[:, None, None] * draws.reshape(-1, *heads.shape)


def utility_loss(noisy_accuracy: torch.Tensor, clean_accuracy: float) -> torch.Tensor:
    """Definition 6.1: L_util = 1 − M(ỹ, y_GT) / M(y, y_GT), M = accuracy."""
    if clean_accuracy <= 0:
        raise ValueError(f"utility loss is undefined for a clean accuracy of {clean_accuracy}")
    return 1.0 - noisy_accuracy / clean_accuracy


@dataclass
class Releases:
    """The heads an attack rule queries, flattened (H, P), ε-major: head h has ε = eps[h // repeats]
    and draw h % repeats. `clip_norm`: rows of the features are clipped to this L2 norm before
    the head sees them (the certified head's input contract), None for no clipping."""

    method: str
    flat: torch.Tensor
    eps: list[float]
    repeats: int
    shapes: dict
    clip_norm: float | None


def released_heads(head: dict, protected: dict | None) -> Releases:
    """The clean head (`protected` None; method `none`, ε NaN) or every release of a protect
    rule's file, as `privssl.artefacts.image.load_release` returns it (it carries its own shapes and
    input clipping)."""
    if protected is None:
        return Releases("none", flatten(head["params"]), [float("nan")], 1, head["shapes"], head.get("clip_norm"))
    flat = protected["flat"]
    return Releases(protected["method"], flat.reshape(-1, flat.shape[-1]), protected["eps"].tolist(), flat.shape[1],
                    protected["shapes"], protected.get("clip_norm"))


def head_inputs(features: torch.Tensor, clip_norm: float | None) -> torch.Tensor:
    """Features as a head sees them: rows scaled down to L2 norm ≤ clip_norm (None: unchanged)."""
    if clip_norm is None:
        return features
    norms = features.norm(dim=-1, keepdim=True)
    return features * torch.clamp(clip_norm / norms.clamp(min=torch.finfo(features.dtype).tiny), max=1.0)
