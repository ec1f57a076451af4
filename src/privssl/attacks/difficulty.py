"""The difficulty-calibrated loss attack of Watson, Guo, Cormode & Sablayrolles, "On the Importance
of Difficulty Calibration in Membership Inference Attacks" (ICLR 2022).

The loss attack scores a record by the target's loss on it, which conflates membership with how
hard the record is: an easy non-member has a low loss too. Calibration subtracts what the loss
would be without the record, the mean loss of reference models that did not train on it:

    s(x) = mean_{r : x ∉ D_r} ℓ(θ_r; x) − ℓ(θ; x)     (higher = member),

with ℓ the cross-entropy −log p_y. It says "member" without fitting anything where the target's
loss is below the references' (s > 0). A candidate no reference left out falls back to the mean
OUT loss over all candidates (the plain loss attack, shifted), as LiRA's fit does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CALIBRATED_THRESHOLD = 0.0  # the target's loss equal to the references' mean


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """ℓ = −log p_y (..., N) from logits (..., N, C) and labels (N,), in float64."""
    log_p = F.log_softmax(logits.double(), -1)
    return -log_p.gather(-1, labels.expand(log_p.shape[:-1]).unsqueeze(-1)).squeeze(-1)


def calibrated_loss_scores(target_logits: torch.Tensor, reference_logits: torch.Tensor, reference_in: torch.Tensor,
                           labels: torch.Tensor) -> torch.Tensor:
    """s (T, N) of T targets' logits (T, N, C) against S references' (S, N, C), reference_in (S, N)
    bool: candidate n in reference s's training set (module docstring)."""
    if reference_logits.shape[:2] != reference_in.shape or target_logits.shape[1:] != reference_logits.shape[1:]:
        raise ValueError(f"shapes disagree: targets {tuple(target_logits.shape)}, references "
                         f"{tuple(reference_logits.shape)}, membership {tuple(reference_in.shape)}")
    out = (~reference_in).double()
    if out.sum() == 0:
        raise ValueError("every reference trained on every candidate: the calibration needs references without it")
    loss = cross_entropy(reference_logits, labels)
    count = out.sum(0)
    mean_out = torch.where(count > 0, (loss * out).sum(0) / count.clamp(min=1), (loss * out).sum() / out.sum())
    return mean_out[None] - cross_entropy(target_logits, labels)
