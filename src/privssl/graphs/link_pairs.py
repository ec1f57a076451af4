"""The attack dataset of the link-stealing attacks (seed 003 §5.4.1, "Datasets Configuration").

"We first select all node pairs that are linked. Then, we randomly sample the same number of
node pairs that are not linked. [...] Next, we split the attack dataset randomly by half into
attack training dataset and attack testing dataset." The attack-train half is the adversary's
partial graph A* (Attack-3, 4, 6, 7); every attack is evaluated on the attack-test half. A
shadow dataset's attack dataset "is not split because we do not use it for evaluation".

A pair is an unordered node pair stored once as (u, v) with u < v. Non-edges are uniform over
the unordered pairs u != v that are not edges, without replacement (as the authors' code: draw
u, v uniformly, order them, reject self pairs, edges and pairs already drawn). The split halves
edges and non-edges separately, as the authors' code does, so both halves stay balanced.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AttackPairs:
    """Node pairs (P, 2) with u < v, their labels and the attack-train / attack-test split."""

    pairs: torch.Tensor  # (P, 2) long
    is_edge: torch.Tensor  # (P,) bool: positive node pair
    train: torch.Tensor  # (P,) bool: attack-train (the partial graph A*); the rest is attack-test

    @property
    def test(self) -> torch.Tensor:
        return ~self.train


def undirected_edges(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Each undirected edge once, as sorted codes u·N + v with u < v (self loops dropped)."""
    lo, hi = edge_index.min(0).values, edge_index.max(0).values
    keep = lo != hi
    return torch.unique(lo[keep] * num_nodes + hi[keep])


def _first_occurrences(codes: torch.Tensor) -> torch.Tensor:
    """The distinct codes in the order they were first drawn.

    Keeping draw order (not torch.unique's sorted order) is what makes truncating the list a
    uniform sample without replacement; a sorted list would favour pairs of small node ids.
    """
    unique, inverse = torch.unique(codes, return_inverse=True)
    first = torch.full((len(unique),), len(codes), dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(len(codes)), reduce="amin")
    return codes[first.sort().values]


def sample_non_edges(edge_codes: torch.Tensor, num_nodes: int, count: int,
                     generator: torch.Generator) -> torch.Tensor:
    """`count` distinct codes of unordered non-edge pairs u < v, uniformly without replacement."""
    available = num_nodes * (num_nodes - 1) // 2 - len(edge_codes)
    if count > available:
        raise ValueError(f"{count} non-edges requested but the graph has only {available}")
    chosen = torch.empty(0, dtype=torch.long)
    while len(chosen) < count:
        draws = max(2 * (count - len(chosen)), 1024)  # most draws are accepted on a sparse graph
        u, v = torch.randint(0, num_nodes, (2, draws), generator=generator)
        lo, hi = torch.minimum(u, v), torch.maximum(u, v)
        codes = _first_occurrences((lo * num_nodes + hi)[lo != hi])
        fresh = codes[~torch.isin(codes, torch.cat([edge_codes, chosen]))]
        chosen = torch.cat([chosen, fresh[:count - len(chosen)]])
    return chosen


def attack_pairs(edge_index: torch.Tensor, num_nodes: int,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """All edges plus as many random non-edges: pairs (P, 2) with u < v and is_edge (P,)."""
    edges = undirected_edges(edge_index.cpu(), num_nodes)
    codes = torch.cat([edges, sample_non_edges(edges, num_nodes, len(edges), generator)])
    pairs = torch.stack([codes // num_nodes, codes % num_nodes], 1)
    is_edge = torch.arange(len(codes)) < len(edges)
    return pairs, is_edge


def split_pairs(is_edge: torch.Tensor, generator: torch.Generator, train_fraction: float = 0.5) -> torch.Tensor:
    """Attack-train mask (P,): a random `train_fraction` of the edges and of the non-edges."""
    train = torch.zeros(len(is_edge), dtype=torch.bool)
    for label in (True, False):
        members = torch.nonzero(is_edge == label).squeeze(1)
        order = members[torch.randperm(len(members), generator=generator)]
        train[order[:int(len(members) * train_fraction)]] = True
    return train


def attack_dataset(edge_index: torch.Tensor, num_nodes: int, seed: int, split: bool = True,
                   train_fraction: float = 0.5) -> AttackPairs:
    """The attack dataset of one graph; split=False for a shadow dataset (all pairs train)."""
    generator = torch.Generator().manual_seed(seed)
    pairs, is_edge = attack_pairs(edge_index, num_nodes, generator)
    train = split_pairs(is_edge, generator, train_fraction) if split else torch.ones(len(pairs), dtype=torch.bool)
    return AttackPairs(pairs, is_edge, train)
