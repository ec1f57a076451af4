"""The noise of the additive mechanisms (paper §4): one object per mechanism's noise, holding its
unit-noise sampler, its log-density and its calibration from (Δ, ε, δ).

A release adds `scale · z` to the head's flattened weights, z ~ the family at unit scale and
`scale = noise.scale(Δ, ε, δ)` from `privssl.release.calibration`. The release-method registry
(`privssl.release.methods`) holds one of these objects per output-perturbation method, and the
release (`protection`), the adaptive attacker (`attacks.adaptive`) and the crafted-pair audit
(`audit.crafted_pair`) all draw and score through it. A new mechanism is a subclass here and one
registry entry.

| family     | unit noise z                                   | mechanism with scale            |
|------------|------------------------------------------------|---------------------------------|
| logistic   | Logistic(0, 1) per coordinate                  | ALM, s = Δ1/ε (Theorem 4.1)     |
| laplace    | Laplace(0, 1) per coordinate                   | Laplace, b = Δ1/ε               |
| gaussian   | N(0, 1) per coordinate                         | Gaussian, σ from Δ2, ε, δ       |
| l2_gamma   | ‖z‖ ~ Gamma(p, 1), z/‖z‖ uniform on the sphere | density ∝ exp(−ε‖b‖/Δ2), θ = Δ2/ε |

The l2_gamma family is the ε-DP output perturbation of Chaudhuri, Monteleoni & Sarwate (JMLR
2011, Algorithm 1): a density ∝ exp(−‖b‖/θ) on R^p, in polar coordinates, has a radius with
density ∝ r^{p−1} e^{−r/θ} (Gamma(p, θ)) and a direction independent of it and uniform.

torch is imported inside the methods, not at the top: the registry holds these objects and the
Snakefile reads the registry where torch may be absent (tests/test_layers.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ClassVar

if TYPE_CHECKING:
    import torch

Calibration = Callable[[float, float, "float | None"], float]  # (Δ, ε, δ or None) -> scale


@dataclass(frozen=True)
class NoiseFamily:
    """The noise of one additive mechanism: `calibrate` maps (Δ, ε, δ) to the scale."""

    calibrate: Calibration
    name: ClassVar[str]

    def scale(self, sensitivity: float, eps: float, delta: float | None = None) -> float:
        return self.calibrate(sensitivity, eps, delta)

    def sample(self, shape: tuple[int, ...], generator: "torch.Generator", dtype=None) -> "torch.Tensor":
        """Unit-scale noise of `shape` (float64 unless `dtype`), every draw from `generator`."""
        raise NotImplementedError

    def log_density(self, noise: "torch.Tensor", scale: float) -> "torch.Tensor":
        """log f(noise) at `scale` per row (the last dimension is one release's weights), up to an
        additive constant that depends on the scale and the dimension only: what a likelihood
        ratio between two releases at one scale needs."""
        raise NotImplementedError


def _float(dtype):
    import torch

    return torch.float64 if dtype is None else dtype


class Logistic(NoiseFamily):
    name = "logistic"

    def sample(self, shape, generator, dtype=None):
        import torch

        dtype = _float(dtype)
        u = torch.rand(shape, generator=generator, dtype=dtype)
        u = u.clamp(min=torch.finfo(dtype).tiny)  # rand is in [0, 1): only 0 must go
        return torch.log(u) - torch.log1p(-u)  # the inverse CDF log(u / (1 − u))

    def log_density(self, noise, scale):
        import torch

        z = noise.double().abs() / scale  # the pdf exp(−x/s) / (s (1 + exp(−x/s))²) is even
        return (-z - 2.0 * torch.log1p(torch.exp(-z))).sum(dim=-1)


class Laplace(NoiseFamily):
    name = "laplace"

    def sample(self, shape, generator, dtype=None):
        import torch

        u = 1.0 - torch.rand((2, *shape), generator=generator, dtype=_float(dtype))  # in (0, 1]
        return torch.log(u[1]) - torch.log(u[0])  # the difference of two unit exponentials

    def log_density(self, noise, scale):
        return -(noise.abs() / scale).sum(dim=-1)


class Gaussian(NoiseFamily):
    name = "gaussian"

    def sample(self, shape, generator, dtype=None):
        import torch

        return torch.randn(shape, generator=generator, dtype=_float(dtype))

    def log_density(self, noise, scale):
        return -0.5 * (noise / scale).square().sum(dim=-1)


class L2Gamma(NoiseFamily):
    """Vectors of R^p (p = shape[-1]) with density ∝ exp(−‖z‖): uniform direction, Gamma(p, 1) norm."""

    name = "l2_gamma"

    def sample(self, shape, generator, dtype=None):
        import numpy as np
        import torch

        dtype = _float(dtype)
        # the direction: a normalised standard Gaussian vector (rotation invariant)
        direction = torch.randn(shape, generator=generator, dtype=dtype)
        direction = direction / direction.norm(dim=-1, keepdim=True)
        # torch._standard_gamma takes no generator: draw with numpy from a seed of the generator
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        norms = np.random.default_rng(seed).standard_gamma(float(shape[-1]), size=shape[:-1])
        return direction * torch.as_tensor(norms, dtype=dtype).unsqueeze(-1)

    def log_density(self, noise, scale):
        return -noise.norm(dim=-1) / scale


NOISE_FAMILIES = (Logistic, Laplace, Gaussian, L2Gamma)
