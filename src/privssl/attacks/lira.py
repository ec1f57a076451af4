"""The likelihood-ratio attack (LiRA) of Carlini et al., "Membership Inference Attacks From First
Principles" (IEEE S&P 2022), on heads released from a candidate pool.

Shadow and target heads are trained by the victim's algorithm on random subsets of |d| records
of a candidate pool (halves when the pool has 2|d| records, the default): every head then has
exactly the training-set size the victim's noise is calibrated for. For each candidate x with
label y and each head, the statistic is the logit-scaled confidence

    φ = log(p_y / (1 − p_y)) = z_y − log Σ_{j≠y} exp(z_j),

computed from the logits z so that it stays finite for saturated heads. Per candidate, φ is
approximately Gaussian over the heads that trained on it (IN) and over those that did not
(OUT). The online attack scores a target's φ by the log-likelihood ratio
log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²); the offline attack, which needs no IN heads,
by the one-sided log P[Z ≤ φ], Z ~ N(μ_out, σ_out²) (a large φ is unlikely for a non-member).
The variance is per candidate, or one global variance for all candidates (pooled within-
candidate variance, the paper's fix for few shadows). With several queries per candidate
(augmentations), scores are averaged over queries, as in the paper's code.
"""

from __future__ import annotations

import math

import torch

VARIANTS = ("online", "offline")
VARIANCES = ("per_example", "global")
_MIN_STD = 1e-8  # a candidate whose φ never moves (e.g. a zero-noise release of identical heads)


def candidate_pool(feats: dict, splits: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Features and labels of the candidate pool: the splits of a features file, concatenated
    in the order given."""
    return torch.cat([feats[s] for s in splits]), torch.cat([feats[f"{s}_labels"] for s in splits])


def draw_training_sets(pool_size: int, set_size: int, n_heads: int, seed: int) -> torch.Tensor:
    """(n_heads, set_size) sorted pool indices: each head's training set, a uniform random subset."""
    if not 1 <= set_size <= pool_size:
        raise ValueError(f"training sets of {set_size} records cannot be drawn from a pool of {pool_size}")
    generator = torch.Generator().manual_seed(seed)
    keys = torch.rand(n_heads, pool_size, generator=generator)
    return keys.argsort(1)[:, :set_size].sort(1).values


def membership(sets: torch.Tensor, pool_size: int) -> torch.Tensor:
    """(heads, pool) bool: candidate i is in head h's training set."""
    inside = torch.zeros(sets.shape[0], pool_size, dtype=torch.bool)
    inside.scatter_(1, sets.cpu(), True)
    return inside


def logit_confidence(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """φ (..., N) from logits (..., N, C) and labels (N,): z_y − logsumexp_{j≠y} z_j."""
    logits = logits.double()
    is_true = torch.nn.functional.one_hot(labels, logits.shape[-1]).bool().expand(logits.shape)
    z_true = logits.gather(-1, labels.expand(logits.shape[:-1]).unsqueeze(-1)).squeeze(-1)
    z_rest = torch.logsumexp(logits.masked_fill(is_true, -math.inf), -1)
    return z_true - z_rest


def _normal_logpdf(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    return -0.5 * ((x - mean) / std) ** 2 - torch.log(std) - 0.5 * math.log(2 * math.pi)


def _fit(phi: torch.Tensor, inside: torch.Tensor, variance: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std per candidate (and query) of φ over the shadow heads with `inside` true.

    phi: (S, N, Q), inside: (S, N). A candidate with no such head falls back to the mean over
    all candidates, one with a single head to the pooled (global) standard deviation."""
    weight = inside.to(phi.dtype)[..., None]
    count = weight.sum(0)
    if bool((count.sum() == 0).item()):
        raise ValueError("no shadow head is on this side for any candidate: LiRA needs IN and OUT shadows")
    mean = (phi * weight).sum(0) / count.clamp(min=1)
    global_mean = (phi * weight).sum((0, 1)) / count.sum(0)
    mean = torch.where(count > 0, mean, global_mean)
    squares = (((phi - mean) ** 2) * weight).sum(0)
    pooled = torch.sqrt(squares.sum(0) / (count - 1).clamp(min=0).sum(0).clamp(min=1)).clamp(min=_MIN_STD)
    if variance == "global":
        return mean, pooled.expand_as(mean)
    std = torch.sqrt(squares / (count - 1).clamp(min=1))
    return mean, torch.where(count > 1, std.clamp(min=_MIN_STD), pooled)


def lira_scores(target_phi: torch.Tensor, shadow_phi: torch.Tensor, shadow_in: torch.Tensor,
                variant: str = "online", variance: str = "per_example") -> torch.Tensor:
    """Membership scores (T, N), higher = member, of T target heads on N candidates.

    target_phi: (T, N) or (T, N, Q) queries; shadow_phi: (S, N) or (S, N, Q); shadow_in:
    (S, N) bool, candidate n in shadow s's training set. No target may be among the shadows
    (leave-one-target-out is the caller's split)."""
    if variant not in VARIANTS:
        raise ValueError(f"LiRA variant {variant!r} unknown; allowed: {VARIANTS}")
    if variance not in VARIANCES:
        raise ValueError(f"LiRA variance {variance!r} unknown; allowed: {VARIANCES}")
    if target_phi.ndim == 2:
        target_phi, shadow_phi = target_phi[..., None], shadow_phi[..., None]
    if shadow_phi.shape[:2] != shadow_in.shape or target_phi.shape[1:] != shadow_phi.shape[1:]:
        raise ValueError(f"shapes disagree: targets {tuple(target_phi.shape)}, shadows {tuple(shadow_phi.shape)}, "
                         f"membership {tuple(shadow_in.shape)}")
    mean_out, std_out = _fit(shadow_phi, ~shadow_in, variance)
    if variant == "offline":
        z = (target_phi - mean_out) / std_out
        score = torch.special.log_ndtr(z)
    else:
        mean_in, std_in = _fit(shadow_phi, shadow_in, variance)
        score = _normal_logpdf(target_phi, mean_in, std_in) - _normal_logpdf(target_phi, mean_out, std_out)
    return score.mean(-1)
