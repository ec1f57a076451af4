"""A head whose L2 sensitivity is proven: output perturbation of Chaudhuri, Monteleoni & Sarwate
(JMLR 2011, "Differentially private empirical risk minimization", Algorithm 1).

The learner is L2-regularised multinomial logistic regression on clipped features. A feature row
is clipped to ‖x‖ ≤ R (`protection.head_inputs`, the one owner of clipping) and augmented with a
constant 1, x̃ = [x, 1], so the bias is an ordinary *regularised* weight and ‖x̃‖ ≤ √(R² + 1).
With W̃ = [weight; bias] of shape (F + 1, C) the objective is

    J_d(W̃) = (1/n) Σ_i CE(W̃ᵀx̃_i, y_i) + (λ/2) ‖W̃‖²_F.

Sensitivity (substitution of one of the n records of d). The cross-entropy gradient w.r.t. W̃ is
x̃ (p − e_y)ᵀ, of Frobenius norm ‖x̃‖·‖p − e_y‖ ≤ √(R² + 1)·√2 (‖p − e_y‖² = (1 − p_y)² + Σ_{j≠y} p_j²
≤ 2 (1 − p_y)²), so the loss is L-Lipschitz with L = √2·√(R² + 1). J is λ-strongly convex, and
J_d' − J_d = (ℓ' − ℓ)/n has gradient norm ≤ 2L/n, so the exact minimisers of neighbouring sets are
within 2L/(nλ) (Chaudhuri et al. 2011, Lemma 7 and Corollary 8, there with L = 1 and no bias).
The solver releases an approximate minimiser Ŵ with ‖∇J(Ŵ)‖ ≤ g; strong convexity gives
‖Ŵ − W*‖ ≤ ‖∇J(Ŵ)‖/λ ≤ g/λ, for both sets, hence

    Δ2 = 2L/(nλ) + 2g/λ   bounds ‖Ŵ_d − Ŵ_d'‖_F for every neighbouring pair.

Stopping rule: a fixed iteration count k(R, λ, g, C), never a test on the data. An optimiser that
stops when its own convergence test passes, or aborts when an iteration cap is reached first,
makes the release (and the abort, which is observable) depend on d in a way the proof does not
cover. Here k is derived from constants that hold for *every* data set:

- Smoothness. The Hessian of CE in the logits is diag(p) − ppᵀ, whose quadratic form vᵀ(·)v is the
  variance of v under p, ≤ (max v − min v)²/4 ≤ ‖v‖²/2 (Popoviciu). The logits z = W̃ᵀx̃ are linear
  in W̃ with operator norm ‖x̃‖ ≤ √(R² + 1), so each loss term is (R² + 1)/2-smooth, and J is
  β-smooth with β = (R² + 1)/2 + λ (equality: two classes, all rows equal and at the clip norm,
  W̃ = 0). J is λ-strongly convex (the loss is convex, the regulariser λ-strongly convex).
- Start. W̃_0 = 0, where ∇J(0) = (1/n) Σ x̃_i (p_i − e_{y_i})ᵀ has norm ≤ L. Strong convexity gives
  J(0) − J* ≤ ‖∇J(0)‖²/(2λ) ≤ L²/(2λ) and ‖0 − W̃*‖ ≤ ‖∇J(0)‖/λ ≤ L/λ, so the potential
  Φ_0 = J(0) − J* + (λ/2)‖0 − W̃*‖² ≤ L²/λ. With C classes also Φ_0 ≤ ln C: J(0) = ln C (uniform
  softmax) and J* = mean CE(W̃*) + (λ/2)‖W̃*‖², so Φ_0 = ln C − mean CE(W̃*) ≤ ln C (CE ≥ 0). The
  solver uses Φ_0 ≤ min(L²/λ, ln C) (`start_potential`); without C, L²/λ.
- Rate. Nesterov's constant-step accelerated gradient method for μ-strongly convex, L_f-smooth f
  (Nesterov 2004, *Introductory Lectures on Convex Optimization*, §2.2.1, "constant step scheme
  III", (2.2.19)): y_0 = x_0,
      x_{k+1} = y_k − ∇f(y_k)/L_f,   y_{k+1} = x_{k+1} + (1 − q)/(1 + q) · (x_{k+1} − x_k),  q = √(μ/L_f).
  It is §2.2.1's general scheme (2.2.6) with γ_0 = μ, so α_k ≡ q and λ_k = Π(1 − α_i) = (1 − q)^k,
  and the estimate-sequence theorem for that scheme, f(x_k) − f* ≤ λ_k [f(x_0) − f* + (γ_0/2)‖x_0 − x*‖²],
  gives for every k ≥ 0
      f(x_k) − f* ≤ (1 − q)^k · [f(x_0) − f* + (μ/2)‖x_0 − x*‖²]        (the constant is 1).
  (Section and equation numbers of the 2004 edition.) The inequality is checked numerically on
  every iterate, on J and on ill-conditioned quadratics, in tests/test_certified.py.
- Gradient. An L_f-smooth f has ‖∇f(x)‖² ≤ 2L_f (f(x) − f*) (the descent lemma at x − ∇f(x)/L_f). With
  f = J, μ = λ, L_f = β and the start above, after k iterations
      ‖∇J(W̃_k)‖ ≤ √(2β (1 − √(λ/β))^k Φ_0),
  and k is the smallest count for which this is ≤ g (`CertifiedSpec.iterations(C)`): a function
  of R, λ, g and C only. The solver runs exactly k iterations from zero; it never stops early.

The gradient norm is then computed at the released point. In exact arithmetic it is ≤ g for
every data set (the theorem); if the computed norm exceeds g the head is not released
(ConvergenceError). That abort can only come from floating-point round-off, not from the data
through the optimiser's progress. A spec whose g is below RESOLUTION_MARGIN times the float64
resolution of the iterate, ε_mach·β·L/λ (the gradient a relative rounding of W̃*, ‖W̃*‖ ≤ L/λ,
can leave), is refused up front, as is one that needs more than MAX_ITERATIONS iterations for
some number of classes (the count without C, which bounds the count for every C).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
import torch

from privssl.release.protection import head_inputs
from privssl.training.heads import DTYPE

ADJACENCY = "substitution of one record of d (|d| fixed)"
MAX_ITERATIONS = 1_000_000  # a spec that needs more is refused (it would take minutes per fit)
# g must exceed the float64 resolution of the iterate, ε_mach·β·L/λ, by this factor
RESOLUTION_MARGIN = 10.0
METHOD = "Nesterov constant-step accelerated gradient, step 1/β, momentum (1 − q)/(1 + q), q = √(λ/β)"


class ConvergenceError(RuntimeError):
    """The released point's computed gradient norm exceeds the tolerance (round-off only)."""


def lipschitz_constant(clip_norm: float) -> float:
    """L = √2·√(R² + 1): the per-record loss gradient bound."""
    return math.sqrt(2.0) * math.sqrt(clip_norm ** 2 + 1.0)


def smoothness(clip_norm: float, l2: float) -> float:
    """β = (R² + 1)/2 + λ: the largest Hessian eigenvalue J can have on any data set."""
    return 0.5 * (clip_norm ** 2 + 1.0) + l2


def start_potential(clip_norm: float, l2: float, n_classes: int | None = None) -> float:
    """Φ_0 = J(0) − J* + (λ/2)‖W̃*‖² ≤ L²/λ on any data set; with C classes also ≤ ln C."""
    bound = lipschitz_constant(clip_norm) ** 2 / l2
    return bound if n_classes is None else min(bound, math.log(n_classes))


def log_gradient_bound(clip_norm: float, l2: float, iterations: int, n_classes: int | None = None) -> float:
    """ln of √(2β (1 − √(λ/β))^k Φ_0), the proven ‖∇J‖ after k iterations from W̃ = 0."""
    beta = smoothness(clip_norm, l2)
    rate = math.log1p(-math.sqrt(l2 / beta))
    return 0.5 * (math.log(2.0 * beta * start_potential(clip_norm, l2, n_classes)) + iterations * rate)


def iteration_count(clip_norm: float, l2: float, tolerance: float, n_classes: int | None = None) -> int:
    """The smallest k ≥ 0 whose proven gradient bound is ≤ g: a function of R, λ, g and C only
    (None: the bound without C, at least the count for every C)."""
    rate = math.log1p(-math.sqrt(l2 / smoothness(clip_norm, l2)))  # < 0
    target = math.log(tolerance)
    # ln bound(k) = ln bound(0) + k·rate/2
    k = max(0, math.ceil(2.0 * (target - log_gradient_bound(clip_norm, l2, 0, n_classes)) / rate))
    # The closed form up to round-off in the logarithms; settle the exact smallest k.
    while log_gradient_bound(clip_norm, l2, k, n_classes) > target:
        k += 1
    while k > 0 and log_gradient_bound(clip_norm, l2, k - 1, n_classes) <= target:
        k -= 1
    return k


@dataclass(frozen=True)
class CertifiedSpec:
    """Hyper-parameters of the certified learner: R, λ and g. The solver's iteration count is
    derived from them and the number of classes (`iterations`), never from the data."""

    clip_norm: float  # R: feature rows are clipped to L2 norm ≤ R
    l2: float  # λ: strength of the regularisation, the strong convexity of J
    tolerance: float = 1e-6  # g: proven ‖∇J‖_F at the released point

    def __post_init__(self) -> None:
        for name in ("clip_norm", "l2", "tolerance"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
                raise ValueError(f"certified {name} must be a finite number > 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        settings = f"clip_norm R = {self.clip_norm:g}, l2 λ = {self.l2:g}, tolerance g = {self.tolerance:g}"
        k = self.iterations()
        if k > MAX_ITERATIONS:
            raise ValueError(
                f"certified spec ({settings}) needs up to {k} solver iterations (β = {self.smoothness:g}), above "
                f"the limit {MAX_ITERATIONS}; raise l2 or tolerance, or lower clip_norm")
        floor = RESOLUTION_MARGIN * np.finfo(np.float64).eps * self.smoothness * self.lipschitz / self.l2
        if self.tolerance < floor:
            raise ValueError(
                f"certified spec ({settings}) asks for a gradient norm float64 cannot certify: g must be "
                f"≥ {RESOLUTION_MARGIN:g}·ε·β·L/λ = {floor:.3g}; raise tolerance or l2")

    @property
    def lipschitz(self) -> float:
        return lipschitz_constant(self.clip_norm)

    @property
    def smoothness(self) -> float:
        return smoothness(self.clip_norm, self.l2)

    def iterations(self, n_classes: int | None = None) -> int:
        """The solver's fixed iteration count for C = `n_classes` (None: the count with Φ_0 ≤ L²/λ,
        at least that of every C)."""
        return iteration_count(self.clip_norm, self.l2, self.tolerance, n_classes)

    @classmethod
    def from_config(cls, cfg: dict) -> "CertifiedSpec":
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(cfg) - set(names))
        if unknown:
            raise ValueError(f"certified spec has unknown field(s) {', '.join(unknown)}; allowed: "
                             f"{', '.join(names)} (the solver's iteration count is derived from them)")
        missing = [name for name in names if name != "tolerance" and name not in cfg]
        if missing:
            raise ValueError(f"certified spec lacks {', '.join(missing)}; given: {sorted(cfg)}")
        return cls(**{name: cfg[name] for name in names if name in cfg})


@dataclass(frozen=True)
class CertifiedFit:
    """The released head (heads.py linear layout, B = 1) and what the solver reached."""

    params: dict[str, torch.Tensor]
    gradient_norm: float
    iterations: int


def augmented_inputs(features: torch.Tensor, clip_norm: float) -> np.ndarray:
    """x̃ = [clip_R(x), 1] as float64 numpy, (n, F + 1)."""
    x = head_inputs(features.detach().to("cpu", DTYPE), clip_norm)
    return np.hstack([x.numpy(), np.ones((x.shape[0], 1))])


def accelerated_gradient(gradient: Callable[[np.ndarray], np.ndarray], start: np.ndarray, smoothness: float,
                         strong_convexity: float, iterations: int,
                         callback: Callable[[int, np.ndarray], None] | None = None) -> np.ndarray:
    """x_k of Nesterov's constant step scheme III (2004, (2.2.19)) after exactly `iterations`
    steps from x_0 = y_0 = `start`; `callback(k, x_k)` sees every iterate k ≥ 1 (tests)."""
    q = math.sqrt(strong_convexity / smoothness)
    momentum, step = (1.0 - q) / (1.0 + q), 1.0 / smoothness
    x, y = start.copy(), start.copy()
    for k in range(1, iterations + 1):
        x_next = gradient(y)  # a fresh array the update may overwrite
        x_next *= -step
        x_next += y  # x_{k} = y_{k-1} − ∇f(y_{k-1})/L_f
        y = x_next - x
        y *= momentum
        y += x_next  # y_k = x_k + m (x_k − x_{k-1})
        x = x_next
        if callback is not None:
            callback(k, x)
    return x


def _gradient_function(x: np.ndarray, onehot: np.ndarray, l2: float) -> Callable[[np.ndarray], np.ndarray]:
    """W̃ᵀ ↦ ∇J(W̃)ᵀ = (P − Y)ᵀX̃/n + λW̃ᵀ, on (C, F + 1) arrays (class-major: the softmax reduces
    over the leading axis, which numpy does faster on these small arrays)."""
    rows_t = np.ascontiguousarray(x.T)  # (F + 1, n)
    scaled = x / x.shape[0]  # (n, F + 1)
    onehot_t = np.ascontiguousarray(onehot.T)  # (C, n)

    def gradient(weights_t: np.ndarray) -> np.ndarray:
        logits = weights_t @ rows_t  # (C, n)
        logits -= logits.max(axis=0)
        np.exp(logits, out=logits)
        logits /= logits.sum(axis=0)
        logits -= onehot_t  # P − Y
        out = logits @ scaled
        out += l2 * weights_t
        return out

    return gradient


def fit_certified_head(features: torch.Tensor, labels: torch.Tensor, n_classes: int,
                       spec: CertifiedSpec) -> CertifiedFit:
    """Minimise J from zeros by exactly `spec.iterations(n_classes)` accelerated gradient steps (a
    count that does not depend on the data); refuse a point whose computed ‖∇J‖_F exceeds g, which
    the rate excludes in exact arithmetic."""
    if features.ndim != 2 or labels.shape != (features.shape[0],) or features.shape[0] < 1:
        raise ValueError(f"certified head needs features (n, F) with n ≥ 1 and labels (n,), got "
                         f"{tuple(features.shape)} and {tuple(labels.shape)}")
    if not bool(torch.isfinite(features).all()):
        raise ValueError("certified head needs finite features, got NaN or ±inf")
    y = labels.detach().cpu().long().numpy()
    n_classes = operator.index(n_classes)
    if n_classes < 2 or y.min() < 0 or y.max() >= n_classes:
        raise ValueError(f"certified head needs labels in [0, n_classes) with n_classes ≥ 2, got labels in "
                         f"[{y.min()}, {y.max()}] and n_classes = {n_classes}")
    x = augmented_inputs(features, spec.clip_norm)
    onehot = np.eye(n_classes)[y]
    gradient = _gradient_function(x, onehot, spec.l2)
    iterations = spec.iterations(n_classes)
    weights_t = accelerated_gradient(gradient, np.zeros((n_classes, x.shape[1])), spec.smoothness, spec.l2,
                                     iterations)
    # Recompute at the released point: the bound needs this norm.
    gradient_norm = float(np.linalg.norm(gradient(weights_t)))
    if not gradient_norm <= spec.tolerance:
        raise ConvergenceError(
            f"certified head not released: gradient norm {gradient_norm:.3e} exceeds the tolerance "
            f"g = {spec.tolerance:g} after the {iterations} iterations the rate proves sufficient for any data "
            f"set; only floating-point round-off can cause this: raise the tolerance")
    weights = torch.as_tensor(np.ascontiguousarray(weights_t.T), dtype=DTYPE)  # (F + 1, C)
    return CertifiedFit({"weight": weights[:-1].unsqueeze(0).clone(), "bias": weights[-1:].clone()},
                        gradient_norm, iterations)


def train_certified_head(features: torch.Tensor, labels: torch.Tensor, n_classes: int,
                         spec: CertifiedSpec) -> dict[str, torch.Tensor]:
    """The released head {"weight": (1, F, C), "bias": (1, C)}: its logits on x are
    `head_logits(params, head_inputs(x, spec.clip_norm))`."""
    return fit_certified_head(features, labels, n_classes, spec).params


def certified_sensitivity(n: int, n_classes: int, spec: CertifiedSpec) -> dict:
    """The proven Δ2 = 2L/(nλ) + 2g/λ, L = √2·√(R² + 1), as a sensitivity record (JSON-ready).

    `n_classes` does not enter the bound (‖p − e_y‖ ≤ √2 for any C); it is recorded, with the
    solver's derived iteration count and the smoothness β it rests on."""
    if n < 1:
        raise ValueError(f"certified sensitivity needs a fine-tuning set of n ≥ 1 records, got {n}")
    lipschitz = spec.lipschitz
    delta2 = 2.0 * lipschitz / (n * spec.l2) + 2.0 * spec.tolerance / spec.l2
    return {
        "sampling": "certified",
        "sensitivity_kind": "proven",  # the release's guarantee kind is its method's (registry)
        "delta2": delta2,
        "delta1": None,
        "lipschitz": lipschitz,
        "clip_norm": spec.clip_norm,
        "l2": spec.l2,
        "tolerance": spec.tolerance,
        "beta": spec.smoothness,  # β, the smoothness of J the iteration count rests on
        "iterations": spec.iterations(n_classes),
        "solver": METHOD,
        "finetune_size": n,
        "n_classes": n_classes,
        "adjacency": ADJACENCY,
        "statement": (f"Δ2 = 2L/(nλ) + 2g/λ = 2·{lipschitz:.6g}/({n}·{spec.l2:g}) + 2·{spec.tolerance:g}/{spec.l2:g} "
                      f"= {delta2:.6g}, with L = √2·√(R²+1), R = {spec.clip_norm:g}, bounds ‖W − W'‖_F of the "
                      f"certified head (bias included) for every {ADJACENCY} (Chaudhuri et al. 2011, Corollary 8); "
                      f"‖∇J‖ ≤ g holds after the fixed {spec.iterations(n_classes)} accelerated gradient steps from 0 "
                      f"(β = {spec.smoothness:.6g}, Nesterov 2004, scheme (2.2.19)), for any d."),
    }
