"""Deep Graph Infomax: deterministic under its seed, the loss falls, embeddings carry the classes."""

import pytest
import torch
from sklearn.linear_model import LogisticRegression

from privssl.graphs.data import stochastic_block_graph
from privssl.graphs.dgi import DGISpec, embed, pretrain_dgi

# weak features, informative edges: what DGI's message passing should pick up
GRAPH = stochastic_block_graph("sbm", block_sizes=[80, 80, 80], p_in=0.1, p_out=0.005, features=16,
                               separation=0.3, seed=0)
SPEC = DGISpec(hidden=32, epochs=60, lr=0.01)


@pytest.fixture(scope="module")
def trained():
    return pretrain_dgi(SPEC, GRAPH.x, GRAPH.edge_index, seed=0, log=lambda _: None)


def test_loss_decreases(trained):
    _, history = trained
    first, last = history[0]["loss"], sum(h["loss"] for h in history[-5:]) / 5
    assert last < 0.7 * first, (first, last)


def test_training_is_deterministic(trained):
    model, _ = trained
    again, _ = pretrain_dgi(SPEC, GRAPH.x, GRAPH.edge_index, seed=0, log=lambda _: None)
    assert torch.equal(embed(model, GRAPH.x, GRAPH.edge_index), embed(again, GRAPH.x, GRAPH.edge_index))


def test_embeddings_beat_the_raw_features_on_a_planted_partition(trained):
    model, _ = trained
    z = embed(model, GRAPH.x, GRAPH.edge_index)
    order = torch.randperm(GRAPH.num_nodes, generator=torch.Generator().manual_seed(0))
    train, test = order[:120], order[120:]
    probe = lambda f: LogisticRegression(max_iter=2000).fit(f[train], GRAPH.y[train]).score(f[test], GRAPH.y[test])  # noqa: E731
    assert probe(z) > probe(GRAPH.x) + 0.1
