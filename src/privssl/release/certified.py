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
The solver stops at an approximate minimiser Ŵ with ‖∇J(Ŵ)‖ ≤ g; strong convexity gives
‖Ŵ − W*‖ ≤ ‖∇J(Ŵ)‖/λ ≤ g/λ, for both sets, hence

    Δ2 = 2L/(nλ) + 2g/λ   bounds ‖Ŵ_d − Ŵ_d'‖_F for every neighbouring pair.

The gradient norm is checked at the returned point; a solver that does not reach g releases
nothing (ConvergenceError), since the bound would not cover its output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import torch
from scipy.optimize import minimize
from scipy.special import log_softmax

from privssl.release.protection import head_inputs
from privssl.training.heads import DTYPE

ADJACENCY = "substitution of one record of d (|d| fixed)"


class ConvergenceError(RuntimeError):
    """The solver stopped with a gradient norm above the tolerance the bound assumes."""


@dataclass(frozen=True)
class CertifiedSpec:
    """Hyper-parameters of the certified learner: R, λ, g and the solver's iteration cap."""

    clip_norm: float  # R: feature rows are clipped to L2 norm ≤ R
    l2: float  # λ: strength of the regularisation, the strong convexity of J
    tolerance: float = 1e-6  # g: required ‖∇J‖_F at the released point
    max_iter: int = 1000

    def __post_init__(self) -> None:
        for name in ("clip_norm", "l2", "tolerance"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
                raise ValueError(f"certified {name} must be a finite number > 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, int) or self.max_iter < 1:
            raise ValueError(f"certified max_iter must be an integer ≥ 1, got {self.max_iter!r}")

    @classmethod
    def from_config(cls, cfg: dict) -> "CertifiedSpec":
        required = [f.name for f in fields(cls) if f.name not in ("tolerance", "max_iter")]
        missing = [name for name in required if name not in cfg]
        if missing:
            raise ValueError(f"certified spec lacks {', '.join(missing)}; given: {sorted(cfg)}")
        return cls(**{f.name: cfg[f.name] for f in fields(cls) if f.name in cfg})


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


def _objective(w: np.ndarray, x: np.ndarray, onehot: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    """J and its analytic gradient X̃ᵀ(P − Y)/n + λW̃, on W̃ flattened."""
    weights = w.reshape(x.shape[1], onehot.shape[1])
    log_p = log_softmax(x @ weights, axis=1)
    n = x.shape[0]
    value = -(onehot * log_p).sum() / n + 0.5 * l2 * (w @ w)
    grad = x.T @ (np.exp(log_p) - onehot) / n + l2 * weights
    return value, grad.ravel()


def fit_certified_head(features: torch.Tensor, labels: torch.Tensor, n_classes: int,
                       spec: CertifiedSpec) -> CertifiedFit:
    """Minimise J from zeros (deterministic) with L-BFGS; refuse a point with ‖∇J‖_F > g."""
    x = augmented_inputs(features, spec.clip_norm)
    onehot = np.eye(n_classes)[labels.detach().cpu().long().numpy()]
    size = x.shape[1] * n_classes
    # pgtol bounds the largest gradient entry; g/(10√P) on it keeps the Frobenius norm below g.
    # ftol = 0: never stop on a small relative decrease, only on the gradient (or max_iter).
    result = minimize(_objective, np.zeros(size), args=(x, onehot, spec.l2), jac=True, method="L-BFGS-B",
                      options={"maxiter": spec.max_iter, "maxfun": 20 * spec.max_iter, "ftol": 0.0,
                               "gtol": spec.tolerance / (10 * math.sqrt(size)), "maxcor": 20})
    # Recompute at the returned point: the bound needs this norm, not the solver's own test.
    gradient_norm = float(np.linalg.norm(_objective(result.x, x, onehot, spec.l2)[1]))
    if not gradient_norm <= spec.tolerance:
        raise ConvergenceError(
            f"certified head not released: gradient norm {gradient_norm:.3e} exceeds the tolerance "
            f"g = {spec.tolerance:g} after {result.nit} iterations (max_iter = {spec.max_iter}; "
            f"solver: {result.message}); raise max_iter or the tolerance")
    weights = torch.as_tensor(result.x.reshape(x.shape[1], n_classes), dtype=DTYPE)
    return CertifiedFit({"weight": weights[:-1].unsqueeze(0).clone(), "bias": weights[-1:].clone()},
                        gradient_norm, int(result.nit))


def train_certified_head(features: torch.Tensor, labels: torch.Tensor, n_classes: int,
                         spec: CertifiedSpec) -> dict[str, torch.Tensor]:
    """The released head {"weight": (1, F, C), "bias": (1, C)}: its logits on x are
    `head_logits(params, head_inputs(x, spec.clip_norm))`."""
    return fit_certified_head(features, labels, n_classes, spec).params


def certified_sensitivity(n: int, n_classes: int, spec: CertifiedSpec) -> dict:
    """The proven Δ2 = 2L/(nλ) + 2g/λ, L = √2·√(R² + 1), as a sensitivity record (JSON-ready).

    `n_classes` does not enter the bound (‖p − e_y‖ ≤ √2 for any C); it is recorded."""
    if n < 1:
        raise ValueError(f"certified sensitivity needs a fine-tuning set of n ≥ 1 records, got {n}")
    lipschitz = math.sqrt(2.0) * math.sqrt(spec.clip_norm ** 2 + 1.0)
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
        "max_iter": spec.max_iter,
        "finetune_size": n,
        "n_classes": n_classes,
        "adjacency": ADJACENCY,
        "statement": (f"Δ2 = 2L/(nλ) + 2g/λ = 2·{lipschitz:.6g}/({n}·{spec.l2:g}) + 2·{spec.tolerance:g}/{spec.l2:g} "
                      f"= {delta2:.6g}, with L = √2·√(R²+1), R = {spec.clip_norm:g}, bounds ‖W − W'‖_F of the "
                      f"certified head (bias included) for every {ADJACENCY} (Chaudhuri et al. 2011, Corollary 8)."),
    }
