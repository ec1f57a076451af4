"""Post-training protection (Algorithm 1): release ω + noise, and the utility it costs.

For one mechanism, R standard noise draws z_r are taken once and the release at budget ε is
ω + scale(ε)·z_r. Each released head still uses a single draw (no composition); sharing the
draws across ε (common random numbers) only removes draw-to-draw jitter between the points of
one curve, so the utility-vs-ε curves are smooth without more repeats.
"""

from __future__ import annotations

import torch

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
