"""What a DPCL training releases at every step and with which sensitivity (seed 004, §3), and
the accounting phases of a training-time release — free of torch, so that the config check
can calibrate σ before any job runs.

Sensitivities under substitution of one example (an image and its two views), per-view
gradient pieces clipped to C:
- gradient, naive DP-SGD: 4|B|C, rigorous — NT-Xent or Barlow Twins' batch statistics couple
  every view, so all 2|B| pieces may change (triangle inequality over both batches' pieces);
- gradient, DPCL: 4C, the paper's heuristic (only the changed example's two pieces counted);
- similarity matrix S = ZZᵀ of 2|B| unit rows: 4√(2|B| − 1) (Theorem 1);
- per-feature mean of N unit rows: 2/N (Theorem 2); SSE: 6 (Theorem 3).
A DP head or a DP fine-tuning (privssl.training.private_sgd) clips per example: 2C.
"""

from __future__ import annotations

import math

from privssl.accounting.rdp import Phase

OBJECTIVES = ("simclr", "barlow_twins")
VARIANTS = ("naive", "dpcl")
SSE_SENSITIVITY = 6.0


def similarity_sensitivity(n_views: int) -> float:
    """Δ_S = 4√(|Z| − 1) of S = ZZᵀ over |Z| = 2|B| unit rows (Theorem 1)."""
    return 4.0 * math.sqrt(n_views - 1)


def mean_sensitivity(n: int) -> float:
    """Δ_μ = 2/N of the per-feature mean of N unit rows (Theorem 2)."""
    return 2.0 / n


def gradient_sensitivity(variant: str, batch_size: int, clip_norm: float) -> float:
    """Δ_g of the sum of the 2|B| per-view pieces, each clipped to C: 4|B|C (naive) or 4C (DPCL)."""
    if variant == "naive":
        return 4.0 * batch_size * clip_norm
    if variant == "dpcl":
        return 4.0 * clip_norm
    raise ValueError(f"unknown DPCL variant {variant!r}; allowed: {', '.join(VARIANTS)}")


def mechanisms(objective: str, variant: str) -> tuple[str, ...]:
    """The Gaussian mechanisms every encoder step releases, in accounting order."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown DPCL variant {variant!r}; allowed: {', '.join(VARIANTS)}")
    if variant == "naive":
        return ("gradient",)
    return ("gradient", "similarity") if objective == "simclr" else ("gradient", "mean_a", "mean_b", "sse_a", "sse_b")


def training_steps(n: int, stage: dict, key: str) -> int:
    """epochs × ⌊n / |B|⌋ steps of a private_sgd-shaped config `stage`; `key` names it in errors."""
    if stage["batch_size"] > n:
        raise ValueError(f"{key}.batch_size = {stage['batch_size']} is not allowed: larger than the {n} records "
                         f"it samples without replacement")
    return stage["epochs"] * (n // stage["batch_size"])


def dpcl_phases(section: dict, variant: str, n: int, noise_multiplier: float = 1.0,
                encoder_epochs: int | None = None) -> list[Phase]:
    """The accountant's phases of one DPCL release on n records (config section `dpcl`): the
    encoder's steps, every mechanism at σ, then the DP head's steps at σ. `encoder_epochs`:
    only the encoder's first epochs (ε spent so far), no head."""
    encoder = section["encoder"]
    releases = (noise_multiplier,) * len(mechanisms(section["objective"], variant))
    if encoder_epochs is not None:
        return [Phase(n, encoder["batch_size"], encoder_epochs * (n // encoder["batch_size"]), releases)]
    return [Phase(n, encoder["batch_size"], training_steps(n, encoder, "dpcl.encoder"), releases),
            Phase(n, section["head"]["batch_size"], training_steps(n, section["head"], "dpcl.head"),
                  (noise_multiplier,))]


def fine_tune_phases(section: dict, n: int, noise_multiplier: float = 1.0) -> list[Phase]:
    """The accountant's phase of DPAdapter's DP-SGD fine-tuning on n records (config `dpadapter`)."""
    stage = section["fine_tune"]
    return [Phase(n, stage["batch_size"], training_steps(n, stage, "dpadapter.fine_tune"), (noise_multiplier,))]
