"""Sensitivity sampling of the head's weights, two ways.

`population` (the default) follows Rubinstein & Aldà, *Pain-free random differential privacy
with sensitivity sampling* (ICML 2017), Algorithm 2 and its theorem: m i.i.d. pairs of
neighbouring data sets of size |d|, drawn from a public labelled pool P (the `reference` split):
D ~ P^{|d|−1}, x, x' ~ P, and the pair (D ∪ {x}, D ∪ {x'}). Δ̂ is the k-th smallest of the m
distances, with k from `order_statistic_index`; the release is then (ε, γ)-random DP with
respect to P. No private record enters: the noise scale is independent of d.

`paper` reproduces the seed paper's Algorithm 2: pairs (i, j) inside the private d, heads on
d∖{d_i} and d∖{d_j} (sets of size |d| − 1), Δ = the maximum. The noise scale is then a
function of the private data, so no DP guarantee follows; rows built on it say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from privssl.io import Progress
from privssl.release.random_dp import order_statistic_index
from privssl.training.heads import DTYPE, HeadSpec, flatten, train_heads, train_heads_on_sets

SAMPLINGS = ("population", "paper")


def population_pairs(pool_size: int, n: int, m: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """m i.i.d. neighbouring pairs of data sets of size n from a pool of `pool_size` records.

    Draws are i.i.d. from the pool's empirical distribution (with replacement, which is what
    D ~ P^{n−1}, x, x' ~ P means for P = uniform on the pool). Returns the sets (m, 2, n) of pool
    row indices, each pair sharing its first n − 1 rows and differing in the last, and the
    substituted records (m, 2).
    """
    if m < 1:
        raise ValueError(f"sensitivity sample size m must be >= 1, got {m}")
    if n < 1 or pool_size < 2:
        raise ValueError(f"population sampling needs n >= 1 and a pool of >= 2 records, got n={n}, pool={pool_size}")
    generator = torch.Generator().manual_seed(seed)
    shared = torch.randint(0, pool_size, (m, 1, n - 1), generator=generator)
    substituted = torch.randint(0, pool_size, (m, 2), generator=generator)
    sets = torch.cat([shared.expand(m, 2, n - 1), substituted[:, :, None]], dim=2)
    return sets, substituted


@dataclass(frozen=True)
class PopulationSampler:
    """Algorithm 2's settings over a public pool: m pairs, the order statistic's ρ and γ, the pairs'
    seed, and how many pairs train at once (`chunk_size`: memory only, the results do not change)."""

    m: int
    rho: float
    gamma: float
    seed: int
    chunk_size: int = 128

    @classmethod
    def from_config(cls, section: dict, seed: int) -> PopulationSampler:
        """From the config's `sensitivity` section, with the stage's seed."""
        return cls(section["m"], section["rho"], section["gamma"], seed, section.get("chunk_size", 128))


def population_sensitivity(spec: HeadSpec, pool_features: torch.Tensor, pool_labels: torch.Tensor, n_classes: int,
                           n: int, sampler: PopulationSampler, log: Callable[[str], None] | None = None) -> dict:
    """Rubinstein & Aldà's sampler over the public pool: the JSON-ready record of Δ̂1, Δ̂2 (each
    the k-th smallest of its m distances), the distances and the random-DP statement.

    The 2m heads are trained as batched computations of up to 2·chunk_size heads over the pool's
    shared features (chunking bounds memory only); `log` gets their progress, per epoch of a chunk."""
    m, rho, gamma, chunk_size = sampler.m, sampler.rho, sampler.gamma, sampler.chunk_size
    k = order_statistic_index(m, rho, gamma)
    sets, substituted = population_pairs(pool_features.shape[0], n, m, sampler.seed)
    l1, l2 = [], []
    starts = range(0, m, chunk_size)
    progress = _progress(log, f"{2 * m} heads in {len(starts)} chunks, epochs", len(starts) * spec.epochs)
    for start in starts:
        chunk = sets[start:start + chunk_size]
        heads = flatten(train_heads_on_sets(spec, pool_features, pool_labels, chunk.reshape(-1, n), n_classes,
                                            progress))
        diff = heads[0::2] - heads[1::2]
        l1.append(diff.abs().sum(1).cpu())
        l2.append(diff.norm(dim=1).cpu())
    l1, l2 = torch.cat(l1), torch.cat(l2)
    check_finite(l1, l2)
    delta1, delta2 = float(l1.sort().values[k - 1]), float(l2.sort().values[k - 1])
    statement = (f"(eps, gamma={gamma:g})-random DP with respect to the distribution of the reference pool "
                 f"({pool_features.shape[0]} records): with probability >= 1 - {gamma:g} over the sampler and a "
                 f"neighbouring pair of data sets of size {n} drawn from the pool (substitution of one record), "
                 f"the release satisfies the eps-DP inequality for that pair. Delta = the {k}-th smallest of "
                 f"{m} sampled distances (rho = {rho:g}).")
    return {
        "sampling": "population",
        "guarantee_kind": "random_dp",
        "m": m, "k": k, "rho": rho, "gamma": gamma,
        "finetune_size": n,
        "pool": {"split": "reference", "size": int(pool_features.shape[0]), "draws": "i.i.d. with replacement"},
        "adjacency": "substitution of one record; data sets of size |d| drawn from the pool",
        "delta1": delta1, "delta2": delta2,
        "max_distance_l1": float(l1.max()), "max_distance_l2": float(l2.max()),
        "substituted": substituted.tolist(),
        "distances_l1": l1.tolist(), "distances_l2": l2.tolist(),
        "statement": statement,
        "head": spec.__dict__,
    }


def check_finite(l1: torch.Tensor, l2: torch.Tensor) -> None:
    if not (torch.isfinite(l1).all() and torch.isfinite(l2).all()):
        raise FloatingPointError("head training diverged: non-finite weight distances")


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
                   pairs: torch.Tensor, chunk_size: int = 128,
                   log: Callable[[str], None] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """1-norm and 2-norm distances (m,) between the heads of each sampled neighbour pair.

    The head of d∖{d_r} is trained once per distinct r (so a pair with i = j gives exactly 0),
    as batched computations of up to 2·chunk_size heads over the shared features; chunking
    only bounds memory, it does not change results.
    """
    n = features.shape[0]
    removed, slot = torch.unique(pairs, return_inverse=True)  # slot[k, 0|1]: head of pair k's i | j
    flat = []
    starts = range(0, len(removed), 2 * chunk_size)
    progress = _progress(log, f"{len(removed)} heads in {len(starts)} chunks, epochs", len(starts) * spec.epochs)
    for start in starts:
        masks = leave_one_out_masks(n, removed[start:start + 2 * chunk_size]).to(features.device)
        flat.append(flatten(train_heads(spec, features, labels, masks, n_classes, progress)))
    flat = torch.cat(flat)
    diff = flat[slot[:, 0].to(flat.device)] - flat[slot[:, 1].to(flat.device)]
    return diff.abs().sum(1).cpu(), diff.norm(dim=1).cpu()


def paper_sensitivity(spec: HeadSpec, features: torch.Tensor, labels: torch.Tensor, n_classes: int,
                      m: int, seed: int, chunk_size: int = 128, log: Callable[[str], None] | None = None) -> dict:
    """The seed paper's Algorithm 2 inside d: the JSON-ready record of Δ1, Δ2 (the maxima) and the
    per-pair distances. The Δ depends on the private data: the record says it supports no guarantee."""
    pairs = sample_pairs(features.shape[0], m, seed)
    l1, l2 = pair_distances(spec, features, labels, n_classes, pairs, chunk_size, log)
    check_finite(l1, l2)
    return {
        "sampling": "paper",
        "guarantee_kind": "none",
        "m": m, "k": m,
        "finetune_size": int(features.shape[0]),
        "adjacency": "substitution of one record inside d; data sets of size |d|-1",
        "delta1": float(l1.max()),
        "delta2": float(l2.max()),
        "pairs": pairs.tolist(),
        "distances_l1": l1.tolist(),
        "distances_l2": l2.tolist(),
        "statement": ("none: Delta is the maximum over pairs of records of the private set d (the paper's "
                      "Algorithm 2), so the noise scale is a function of the private data and no DP guarantee "
                      "follows."),
        "head": spec.__dict__,
    }


def _progress(log: Callable[[str], None] | None, what: str, total: int) -> Callable[[], None] | None:
    """A per-epoch callback that logs the sampler's progress (privssl.io.Progress), or None."""
    return None if log is None else Progress(log, what, total).advance
