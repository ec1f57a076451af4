"""The sensitivity sampler (paper Algorithm 2, after Rubinstein & Aldà 2017).

For k = 1..m: draw i, j uniformly from d; train the head on d∖{d_i} and on d∖{d_j}; record
‖ω1 − ω2‖₁ and ‖ω1 − ω2‖₂ over all head parameters. Δ = max over the m samples.

The two data sets of a sample have |d| − 1 elements and differ in one record (d_i replaced by
d_j): the adjacency is *substitution of one record*. A sampled maximum is not a worst-case
bound; `random_dp_statement` says exactly what it does guarantee.
"""

from __future__ import annotations


import torch

from privssl.heads import DTYPE, HeadSpec, flatten, train_heads


def sample_pairs(n: int, m: int, seed: int) -> torch.Tensor:
    """(m, 2) indices i, j drawn independently and uniformly from range(n), as Algorithm 2."""
    if m < 1:
        raise ValueError(f"sensitivity sample size m must be >= 1, got {m}")
    if n < 2:
        raise ValueError(f"the fine-tuning set needs at least 2 elements, got {n}")
    return torch.randint(0, n, (m, 2), generator=torch.Generator().manual_seed(seed))


def leave_one_out_masks(n: int, removed: torch.Tensor) -> torch.Tensor:
    """(len(removed), n) masks of d∖{d_r}, one row per removed index r."""
    masks = torch.ones(len(removed), n, dtype=DTYPE)
    masks[torch.arange(len(removed)), removed] = 0.0
    return masks


def pair_distances(spec: HeadSpec, features: torch.Tensor, labels: torch.Tensor, n_classes: int,
                   pairs: torch.Tensor, chunk_size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """1-norm and 2-norm distances (m,) between the heads of each sampled neighbour pair.

    The head of d∖{d_r} is trained once per distinct r (so a pair with i = j gives exactly 0),
    as batched computations of up to 2·chunk_size heads over the shared features; chunking
    only bounds memory, it does not change results.
    """
    n = features.shape[0]
    removed, slot = torch.unique(pairs, return_inverse=True)  # slot[k, 0|1]: head of pair k's i | j
    flat = []
    for start in range(0, len(removed), 2 * chunk_size):
        masks = leave_one_out_masks(n, removed[start:start + 2 * chunk_size]).to(features.device)
        flat.append(flatten(train_heads(spec, features, labels, masks, n_classes)))
    flat = torch.cat(flat)
    diff = flat[slot[:, 0].to(flat.device)] - flat[slot[:, 1].to(flat.device)]
    return diff.abs().sum(1).cpu(), diff.norm(dim=1).cpu()


def random_dp_statement(m: int, rho: float, confidence: float = 0.95) -> dict:
    """What the sampled maximum Δ̂ guarantees, for i.i.d. samples of the pair distance.

    P(Δ̂ < q_{1−ρ}) = P(every sample < q_{1−ρ}) ≤ (1 − ρ)^m, so with probability at least
    1 − (1 − ρ)^m over the sampling, Δ̂ ≥ the (1 − ρ)-quantile of the distance and the ε
    guarantee holds for at least a (1 − ρ) fraction of neighbouring pairs (drawn as the
    sampler draws them). Also given: the ρ reached with the requested `confidence`.
    """
    if not 0 < rho < 1:
        raise ValueError(f"rho must lie in (0, 1), got {rho}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    probability = 1.0 - (1.0 - rho) ** m
    rho_at_confidence = 1.0 - (1.0 - confidence) ** (1.0 / m)
    return {
        "kind": "random differential privacy (sampled sensitivity, not a worst-case bound)",
        "adjacency": "substitution of one record of the fine-tuning set d (data sets of size |d|-1)",
        "rho": rho,
        "covered_fraction": 1.0 - rho,
        "probability": probability,
        "confidence": confidence,
        "covered_fraction_at_confidence": 1.0 - rho_at_confidence,
        "statement": (
            f"With probability >= {probability:.4f} over the {m} i.i.d. samples, the sampled "
            f"sensitivity is at least the {1 - rho:.4g}-quantile of the neighbour distance, so each "
            f"eps guarantee holds for at least {100 * (1 - rho):.4g}% of neighbouring pairs; "
            f"with probability {confidence:.4g} it holds for at least "
            f"{100 * (1 - rho_at_confidence):.4g}% of them."
        ),
    }


def sample_sensitivity(spec: HeadSpec, features: torch.Tensor, labels: torch.Tensor, n_classes: int,
                       m: int, seed: int, rho: float, chunk_size: int = 128) -> dict:
    """Run Algorithm 2 and return the JSON-ready record of Δ1, Δ2 and the per-sample distances."""
    pairs = sample_pairs(features.shape[0], m, seed)
    l1, l2 = pair_distances(spec, features, labels, n_classes, pairs, chunk_size)
    if not (torch.isfinite(l1).all() and torch.isfinite(l2).all()):
        raise FloatingPointError("head training diverged: non-finite weight distances")
    return {
        "m": m,
        "finetune_size": int(features.shape[0]),
        "delta1": float(l1.max()),
        "delta2": float(l2.max()),
        "pairs": pairs.tolist(),
        "distances_l1": l1.tolist(),
        "distances_l2": l2.tolist(),
        "random_dp": random_dp_statement(m, rho),
        "head": spec.__dict__,
    }
