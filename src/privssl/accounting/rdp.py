"""What the accountants share, free of Opacus, torch and dp_accounting (the config check imports
it): the RDP orders searched, the error of an ε no noise multiplier reaches, the phases of a
training accounted by `privssl.accounting.dpcl`, and a closed-form check that an ε is reachable.

`RDP_ORDERS` are Google dp_accounting's DEFAULT_RDP_ORDERS, a superset of Opacus' default
alphas (1.1 … 63) with 128 … 1024 added: Opacus' default stops at α = 63, whose conversion term
log(1/δ)/62 alone is ≈ 0.19 at δ = 1e-5, so no σ would reach ε = 0.1. Any order gives a valid
bound; more orders only tighten it.
"""

import math
from dataclasses import dataclass

MAX_MULTIPLIER = 1e6  # the largest noise multiplier a calibration searches (Opacus' cap of σ, likewise)
RDP_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024]


class UnreachableEpsilon(ValueError):
    """The accountant cannot calibrate σ for this ε (the message says why)."""

    def __init__(self, eps: float, reason: str):
        super().__init__(f"ε = {eps:g} is unreachable: {reason}")
        self.eps = eps
        self.reason = reason


@dataclass(frozen=True)
class Phase:
    """`steps` steps, each sampling `batch_size` of `n` records without replacement and releasing
    Gaussian mechanisms with these noise multipliers (std / replace-one L2 sensitivity)."""

    n: int
    batch_size: int
    steps: int
    noise_multipliers: tuple[float, ...]

    def __post_init__(self):
        # a tuple of floats (a list or NumPy values are accepted), so that phases hash: `epsilon` caches on them
        object.__setattr__(self, "noise_multipliers", tuple(map(float, self.noise_multipliers)))
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got n = {self.n}")
        if not 1 <= self.batch_size <= self.n:
            raise ValueError(f"batch_size must lie in [1, n = {self.n}], got batch_size = {self.batch_size}")
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got steps = {self.steps}")
        # an empty tuple would be a step releasing nothing: dp_accounting's effective σ is then 0^-1/2
        if not self.noise_multipliers or not all(math.isfinite(s) and s > 0 for s in self.noise_multipliers):
            raise ValueError(f"noise_multipliers must be a non-empty tuple of finite values > 0, "
                             f"got noise_multipliers = {self.noise_multipliers}")


def reachable_by_bound(eps: float, delta: float, phases, multiplier: float) -> bool:
    """True where ε ≤ eps is certain at every noise multiplier scaled to `multiplier` × its ratio.

    Subsampling only lowers RDP, so the Gaussians without it bound each phase: RDP(α) ≤ α·c with
    c = Σ steps Σ_k 1/(2σ_k²); the conversion is dp_accounting's (Canonne et al. 2020, Prop. 12):
    ε ≤ min_α α·c + log(1 − 1/α) − (log δ + log α)/(α − 1). False means "not certain by this
    bound" — the caller then asks the accountant itself."""
    c = math.fsum(p.steps * math.fsum(1 / (2 * (multiplier * r) ** 2) for r in p.noise_multipliers) for p in phases)
    bound = min(a * c + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1) for a in RDP_ORDERS)
    return bound <= eps
