"""Unit-scale noise of the additive mechanisms, on a flattened weight vector (paper §4).

A release adds `scale · z` to the head's weights, z drawn here and the scale from
`privssl.release.calibration` (which scale, for which sensitivity, is the release-method registry's
business: `privssl.release.methods`). Families:

| family     | unit noise z                                   | mechanism with scale            |
|------------|------------------------------------------------|---------------------------------|
| logistic   | Logistic(0, 1) per coordinate                  | ALM, s = Δ1/ε (Theorem 4.1)     |
| laplace    | Laplace(0, 1) per coordinate                   | Laplace, b = Δ1/ε               |
| gaussian   | N(0, 1) per coordinate                         | Gaussian, σ from Δ2, ε, δ       |
| l2_gamma   | ‖z‖ ~ Gamma(p, 1), z/‖z‖ uniform on the sphere | density ∝ exp(−ε‖b‖/Δ2), θ = Δ2/ε |

The l2_gamma family is the ε-DP output perturbation of Chaudhuri, Monteleoni & Sarwate (JMLR
2011, Algorithm 1): a density ∝ exp(−‖b‖/θ) on R^p, in polar coordinates, has a radius with
density ∝ r^{p−1} e^{−r/θ} (Gamma(p, θ)) and a direction independent of it and uniform.
"""

from __future__ import annotations

import math

import numpy as np
import torch

NOISE_FAMILIES = ("logistic", "laplace", "gaussian", "l2_gamma")


def standard_noise(family: str, shape: tuple[int, ...], generator: torch.Generator,
                   dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Unit-scale noise of `family`; multiply by the calibrated scale.

    Logistic noise by the inverse CDF log(u / (1 − u)) with u strictly inside (0, 1);
    Laplace noise as the difference of two unit exponentials −log(u) with u in (0, 1];
    l2_gamma: each row (last dimension = p) is one vector with a Gamma(p, 1) norm.
    """
    if family not in NOISE_FAMILIES:
        raise ValueError(f"unknown noise family {family!r}; allowed: {', '.join(NOISE_FAMILIES)}")
    if family == "logistic":
        u = torch.rand(shape, generator=generator, dtype=dtype)
        u = u.clamp(min=torch.finfo(dtype).tiny)  # rand is in [0, 1): only 0 must go
        return torch.log(u) - torch.log1p(-u)
    if family == "laplace":
        u = 1.0 - torch.rand((2, *shape), generator=generator, dtype=dtype)  # in (0, 1]
        return torch.log(u[1]) - torch.log(u[0])
    if family == "gaussian":
        return torch.randn(shape, generator=generator, dtype=dtype)
    return l2_gamma_noise(shape, generator, dtype)


def l2_gamma_noise(shape: tuple[int, ...], generator: torch.Generator,
                   dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Vectors of R^p (p = shape[-1]) with density ∝ exp(−‖z‖): uniform direction, Gamma(p, 1) norm.

    The direction is a normalised standard Gaussian vector (rotation invariant); the norm is
    drawn by torch's Gamma sampler, seeded from `generator` so that one seed fixes every draw.
    """
    p = shape[-1]
    direction = torch.randn(shape, generator=generator, dtype=dtype)
    direction = direction / direction.norm(dim=-1, keepdim=True)
    # torch._standard_gamma takes no generator: draw with numpy from a seed of the generator
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    norms = np.random.default_rng(seed).standard_gamma(float(p), size=shape[:-1])
    return direction * torch.as_tensor(norms, dtype=dtype).unsqueeze(-1)


def logistic_log_density(x: np.ndarray, scale: float) -> np.ndarray:
    """log of the Logistic(0, s) pdf exp(−x/s) / (s (1 + exp(−x/s))²), stable for large |x|."""
    z = np.abs(np.asarray(x, dtype=float)) / scale  # the pdf is even
    return -z - 2.0 * np.log1p(np.exp(-z)) - math.log(scale)
