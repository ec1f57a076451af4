"""Node-pair features of the link-stealing attacks (seed 003 §5.3, Tables 5.2, 5.12, 5.13).

For a node pair (u, v) and one vector per node (posteriors f, reference posteriors g,
attributes F):
- d(·, ·): the 8 distances of Table 5.12, with scipy.spatial.distance's definitions;
- Ψ(·, ·): the 4 pairwise vector operations of Table 5.13 (after Grover & Leskovec),
  element-wise, also applied to the two scalars e(f(u)), e(f(v));
- e(f(u)) = −Σ_i f_i(u) log f_i(u), the entropy of a posterior (Eq. 5.1).
All are symmetric in u and v, which "naturally solves the problem of node pair order".

Undefined values get the value of their limit, never NaN (the authors' code maps NaN to 0
afterwards, which would call a zero attribute vector identical to every other vector):
- canberra: a term 0/0 (both coordinates 0) counts 0, as scipy does;
- braycurtis: 0/0 (both vectors 0, hence identical) is 0; scipy returns NaN;
- cosine, correlation: where a vector has zero norm (after centring, for correlation: a
  constant vector) the similarity is taken as 0, i.e. distance 1; scipy returns NaN.

Everything is vectorised over pairs and computed in float64: linked nodes have near-identical
posteriors, their correlation distances are ~1e-4 and float32 cancellation would blur their
ranking. Pairs are processed in chunks, so 10^5 pairs of 3703-dim attributes fit in memory.
Vectors may carry leading dimensions (..., N, D), e.g. B releases of the same posteriors.
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch

from privssl.graphs.link_spec import DISTANCES

OPERATIONS = ("average", "hadamard", "weighted_l1", "weighted_l2")
# Gathered coordinates per chunk: 2 MiB float64 temporaries stay in cache; 8 MiB ones ran 2-4x slower.
CHUNK_ELEMENTS = 1 << 18


def entropy(p: torch.Tensor) -> torch.Tensor:
    """e(p) = −Σ_i p_i log p_i over the last dimension (natural log, 0 log 0 = 0), in float64."""
    p = p.double()
    return -torch.special.xlogy(p, p).sum(-1)


def _chunks(pairs: torch.Tensor, dim: int, chunk_elements: int) -> Iterator[torch.Tensor]:
    size = max(1, chunk_elements // max(dim, 1))
    for start in range(0, len(pairs), size):
        yield pairs[start:start + size]


def _endpoints(vectors: torch.Tensor, pairs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., n, D) float64 vectors of the two end nodes of each pair."""
    pairs = pairs.to(vectors.device)
    return vectors[..., pairs[:, 0], :].double(), vectors[..., pairs[:, 1], :].double()


def _one_minus_cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    norms = torch.linalg.vector_norm(a, dim=-1) * torch.linalg.vector_norm(b, dim=-1)
    similarity = torch.where(norms > 0, (a * b).sum(-1) / norms, 0.0)
    return (1.0 - similarity).clamp(0.0, 2.0)  # scipy clips rounding excursions the same way


def _distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The 8 distances (..., n, 8) in DISTANCES order between rows of a and b."""
    diff = a - b
    abs_diff = diff.abs()
    manhattan = abs_diff.sum(-1)
    sqeuclidean = (diff * diff).sum(-1)
    total = (a + b).abs().sum(-1)
    coordinate_total = a.abs() + b.abs()
    return torch.stack([
        _one_minus_cosine(a, b),
        sqeuclidean.sqrt(),
        _one_minus_cosine(a - a.mean(-1, keepdim=True), b - b.mean(-1, keepdim=True)),
        abs_diff.amax(-1),
        torch.where(total > 0, manhattan / total, 0.0),
        manhattan,
        torch.where(coordinate_total > 0, abs_diff / coordinate_total, 0.0).sum(-1),
        sqeuclidean,
    ], -1)


def _operations(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Ψ(a, b) for the 4 operations, concatenated in OPERATIONS order: (..., n, 4·D)."""
    diff = a - b
    return torch.cat([(a + b) / 2, a * b, diff.abs(), diff * diff], -1)


def _per_pair(fn: Callable, vectors: torch.Tensor, pairs: torch.Tensor, width: int, dtype: torch.dtype,
              chunk_elements: int) -> torch.Tensor:
    out = torch.empty(*vectors.shape[:-2], len(pairs), width, dtype=dtype, device=vectors.device)
    start = 0
    for chunk in _chunks(pairs, vectors.shape[-1], chunk_elements):
        out[..., start:start + len(chunk), :] = fn(*_endpoints(vectors, chunk))
        start += len(chunk)
    return out


def pair_distances(vectors: torch.Tensor, pairs: torch.Tensor,
                   chunk_elements: int = CHUNK_ELEMENTS) -> torch.Tensor:
    """d(x_u, x_v) for vectors (..., N, D) and pairs (P, 2): (..., P, 8) float64, DISTANCES order."""
    return _per_pair(_distances, vectors, pairs, len(DISTANCES), torch.float64, chunk_elements)


def pair_operations(vectors: torch.Tensor, pairs: torch.Tensor, dtype: torch.dtype = torch.float64,
                    chunk_elements: int = CHUNK_ELEMENTS) -> torch.Tensor:
    """Ψ(x_u, x_v) for vectors (..., N, D): (..., P, 4·D), blocks of D in OPERATIONS order.

    `dtype` is the storage type: Ψ of attributes is P × 4·|F| numbers (150 M on CiteSeer).
    """
    return _per_pair(_operations, vectors, pairs, len(OPERATIONS) * vectors.shape[-1], dtype, chunk_elements)


# Table 5.2's columns, named in its notation: block -> (feature, the per-node vectors it uses).
# f: target posteriors, g: reference posteriors, F: attributes, e(·): entropy of a posterior.
BLOCKS = {
    "d(f)": ("distances", "posteriors"),
    "psi(f)": ("operations", "posteriors"),
    "psi(e(f))": ("entropy_operations", "posteriors"),
    "d(g)": ("distances", "reference"),
    "psi(g)": ("operations", "reference"),
    "psi(e(g))": ("entropy_operations", "reference"),
    "d(F)": ("distances", "attributes"),
    "psi(F)": ("operations", "attributes"),
}

# Table 5.2's rows. The transferring attacks (1, 4, 5, 7) keep only blocks whose width does not
# depend on the number of classes or attributes ("dimension mismatch"). Attack-6 has every
# block: the table ticks Ψ(F_u, F_v), although §5.3's prose lists only d(F_u, F_v).
ATTACK_FEATURES = {
    "attack-1": ("d(f)", "psi(e(f))"),
    "attack-3": ("d(f)", "psi(f)", "psi(e(f))"),
    "attack-4": ("d(f)", "psi(e(f))"),
    "attack-5": ("d(f)", "psi(e(f))", "d(g)", "psi(e(g))", "d(F)"),
    "attack-6": tuple(BLOCKS),
    "attack-7": ("d(f)", "psi(e(f))", "d(g)", "psi(e(g))", "d(F)"),
}


def feature_block(name: str, pairs: torch.Tensor, vectors: dict[str, torch.Tensor | None],
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """One block of Table 5.2 for pairs (P, 2): (..., P, width) in `dtype`."""
    feature, source = BLOCKS[name]
    x = vectors.get(source)
    if x is None:
        raise ValueError(f"feature block {name} needs the {source}, which the adversary does not have")
    if feature == "distances":
        return pair_distances(x, pairs).to(dtype)
    if feature == "operations":
        return pair_operations(x, pairs, dtype)
    return pair_operations(entropy(x).unsqueeze(-1), pairs, dtype)


def feature_matrix(blocks: tuple[str, ...], pairs: torch.Tensor, posteriors: torch.Tensor,
                   reference: torch.Tensor | None = None, attributes: torch.Tensor | None = None,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The attack model's input for pairs (P, 2): the blocks concatenated, (..., P, K).

    Leading dimensions of `posteriors` (releases) are kept; blocks of the reference
    posteriors and attributes are shared by every release.
    """
    vectors = {"posteriors": posteriors, "reference": reference, "attributes": attributes}
    leading = posteriors.shape[:-2]
    parts = [feature_block(name, pairs, vectors, dtype) for name in blocks]
    return torch.cat([p.expand(*leading, *p.shape[-2:]) for p in parts], -1)
