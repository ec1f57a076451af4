"""The attack dataset: all edges, as many uniform non-edges, and a balanced 50/50 split."""

import pytest
import torch
from scipy import stats
from torch_geometric.utils import to_undirected

from privssl.graphs.link_pairs import attack_dataset, attack_pairs, sample_non_edges, split_pairs, undirected_edges


def random_graph(n_nodes, n_edges, seed):
    """Undirected graph in the project's layout: both directions, no self loops."""
    g = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, n_nodes, (2, n_edges), generator=g)
    edges = edges[:, edges[0] != edges[1]]
    return to_undirected(edges, num_nodes=n_nodes)


def as_set(pairs):
    return {tuple(p) for p in pairs.tolist()}


def test_attack_pairs_are_all_edges_and_as_many_non_edges():
    n = 200
    edge_index = random_graph(n, 600, seed=0)
    edges = {tuple(sorted(e)) for e in edge_index.t().tolist()}
    pairs, is_edge = attack_pairs(edge_index, n, torch.Generator().manual_seed(0))
    assert (pairs[:, 0] < pairs[:, 1]).all()  # u < v: no self pair, each unordered pair once
    assert len(as_set(pairs)) == len(pairs)  # no duplicates
    assert as_set(pairs[is_edge]) == edges  # every edge, once
    assert not (as_set(pairs[~is_edge]) & edges)  # no edge among the non-edges
    assert int(is_edge.sum()) == int((~is_edge).sum()) == len(edges)


def test_split_is_a_balanced_partition():
    edge_index = random_graph(150, 401, seed=1)
    data = attack_dataset(edge_index, 150, seed=3)
    train, test = data.pairs[data.train], data.pairs[data.test]
    assert not (as_set(train) & as_set(test))
    assert len(train) + len(test) == len(data.pairs)
    n_edges = int(data.is_edge.sum())
    for half in (data.train, data.test):
        assert int((data.is_edge & half).sum()) == int((~data.is_edge & half).sum())  # balanced
    assert int((data.is_edge & data.train).sum()) == n_edges // 2
    shadow = attack_dataset(edge_index, 150, seed=3, split=False)
    assert shadow.train.all() and not shadow.test.any()
    assert int(split_pairs(data.is_edge, torch.Generator().manual_seed(0), 0.2)[data.is_edge].sum()) == n_edges // 5


def test_deterministic_under_a_seed():
    edge_index = random_graph(120, 300, seed=2)
    a, b, c = (attack_dataset(edge_index, 120, seed=s) for s in (7, 7, 8))
    assert torch.equal(a.pairs, b.pairs) and torch.equal(a.train, b.train) and torch.equal(a.is_edge, b.is_edge)
    assert not torch.equal(a.pairs, c.pairs)


def test_non_edges_are_uniform():
    """Every eligible pair is drawn equally often over many samples (chi-square test).

    Truncating a *sorted* list of accepted draws would favour pairs of small node ids and fail.
    The counts of a sample without replacement vary less than multinomial ones, so the
    chi-square statistic is conservative here.
    """
    n = 12
    path = torch.stack([torch.arange(n - 2), torch.arange(1, n - 1)])  # 10 edges, 56 eligible pairs
    edge_codes = undirected_edges(to_undirected(path), n)
    g = torch.Generator().manual_seed(0)
    draws = torch.cat([sample_non_edges(edge_codes, n, 10, g) for _ in range(600)])
    counts = torch.bincount(draws, minlength=n * n)
    eligible = torch.tensor([u * n + v for u in range(n) for v in range(u + 1, n)])
    eligible = eligible[~torch.isin(eligible, edge_codes)]
    assert len(eligible) == 56 and counts.sum() == counts[eligible].sum()
    assert stats.chisquare(counts[eligible].numpy()).pvalue > 1e-3


def test_too_dense_graph_is_refused():
    n = 6
    complete = torch.combinations(torch.arange(n)).t()
    with pytest.raises(ValueError, match="non-edges"):
        attack_pairs(to_undirected(complete), n, torch.Generator().manual_seed(0))


def test_one_direction_and_self_loops_are_tolerated():
    edge_index = torch.tensor([[0, 1, 2, 3, 3], [1, 0, 3, 3, 4]])  # 0-1 both ways, 2-3 one way, a self loop
    pairs, is_edge = attack_pairs(edge_index, 10, torch.Generator().manual_seed(0))
    assert as_set(pairs[is_edge]) == {(0, 1), (2, 3), (3, 4)}
