"""Post-training protection (Algorithm 1): release ω + noise, and the utility it costs.

For one mechanism, R standard noise draws z_r are taken once and the release at budget ε is
ω + scale(ε)·z_r. Each released head still uses a single draw (no composition); sharing the
draws across ε (common random numbers) only removes draw-to-draw jitter between the points of
one curve, so the utility-vs-ε curves are smooth without more repeats.
"""

from __future__ import annotations

import torch

from privssl.heads import flatten
from privssl.io import load_tensors
from privssl.mechanisms import Calibration, calibrate, standard_noise


def protected_heads(released: torch.Tensor, mechanism: str, eps_grid: list[float], repeats: int,
                    delta1: float, delta2: float, delta: float,
                    seed: int) -> tuple[torch.Tensor, list[Calibration]]:
    """Noisy copies (len(eps_grid), repeats, P) of the flat released head (P,)."""
    calibrations = [calibrate(mechanism, eps, delta1, delta2, delta) for eps in eps_grid]
    generator = torch.Generator().manual_seed(seed)
    noise = standard_noise(mechanism, (repeats, released.numel()), generator, dtype=released.dtype)
    scales = torch.tensor([c.noise_scale for c in calibrations], dtype=released.dtype)
    return released + scales[:, None, None] * noise[None], calibrations


def utility_loss(noisy_accuracy: torch.Tensor, clean_accuracy: float) -> torch.Tensor:
    """Definition 6.1: L_util = 1 − M(ỹ, y_GT) / M(y, y_GT), M = accuracy."""
    if clean_accuracy <= 0:
        raise ValueError(f"utility loss is undefined for a clean accuracy of {clean_accuracy}")
    return 1.0 - noisy_accuracy / clean_accuracy


def released_heads(head: dict, protected_path: str | None) -> tuple[str, torch.Tensor, list[float], int]:
    """The heads an attack rule queries: the clean head (`protected_path` None; mechanism `none`,
    ε NaN) or every noisy head of the protect rule's file, flattened to (len(eps)·repeats, P),
    ε-major. Returns (mechanism, flat heads, ε grid, repeats): head h has ε = eps[h // repeats]
    and noise draw h % repeats."""
    if protected_path is None:
        return "none", flatten(head["params"]), [float("nan")], 1
    protected = load_tensors(protected_path)
    flat = protected["flat"]
    return protected["mechanism"], flat.reshape(-1, flat.shape[-1]), protected["eps"].tolist(), flat.shape[1]
