"""The target GCN's training recipe (src/privssl/graphs/gcn.py): tkipf/gcn's row normalisation of
the features and its weight decay on the first layer only. The GCN's accuracy and determinism are
tested in tests/test_link_attacks.py."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.utils import stochastic_blockmodel_graph

from privssl.graphs import gcn
from privssl.graphs.gcn import (
    GCN,
    GCNSpec,
    ReferenceMLP,
    labelled_nodes,
    row_normalize,
    train_gcn,
    train_reference_mlp,
)


def planted_partition(seed: int = 0):
    """300 nodes in 3 blocks, class-dependent non-negative attributes (bag-of-words-like counts)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        edge_index = stochastic_blockmodel_graph([100, 100, 100], torch.tensor(
            [[0.08, 0.005, 0.005], [0.005, 0.08, 0.005], [0.005, 0.005, 0.08]]))
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(3).repeat_interleave(100)
    rates = 0.2 + 2.0 * torch.rand(3, 16, generator=g)
    x = torch.poisson(rates[y], generator=g)
    return x, edge_index, y


def test_row_normalisation_matches_a_hand_computation():
    x = torch.tensor([[1.0, 3.0, 0.0, 0.0],
                      [0.0, 0.0, 0.0, 0.0],  # a node without attributes (CiteSeer has some): stays zero
                      [2.0, 2.0, 4.0, 0.0],
                      [0.0, 0.0, 0.0, 5.0]])
    expected = torch.tensor([[0.25, 0.75, 0.0, 0.0],
                             [0.0, 0.0, 0.0, 0.0],
                             [0.25, 0.25, 0.5, 0.0],
                             [0.0, 0.0, 0.0, 1.0]])
    assert torch.equal(row_normalize(x), expected)
    assert torch.equal(row_normalize(x.double()), expected.double())
    assert torch.equal(x[1], torch.zeros(4))  # the input is not changed in place


def test_normalised_features_are_the_inputs_of_the_target_and_the_reference_model():
    x, edge_index, y = planted_partition()
    spec = GCNSpec(epochs=20, normalize_features=True)
    plain = replace(spec, normalize_features=False)
    mask = labelled_nodes(300, spec.label_rate, seed=0)
    normalised = row_normalize(x)
    assert torch.equal(train_gcn(x, edge_index, y, mask, spec, seed=0),
                       train_gcn(normalised, edge_index, y, mask, plain, seed=0))
    assert torch.equal(train_reference_mlp(x, y, mask, spec, seed=0),
                       train_reference_mlp(normalised, y, mask, plain, seed=0))
    assert not torch.equal(train_gcn(x, edge_index, y, mask, spec, seed=0),
                           train_gcn(x, edge_index, y, mask, plain, seed=0))
    # so the models no longer see a node's attribute count, only its attribute distribution
    scaled = x * torch.randint(1, 5, (300, 1)).float()
    torch.testing.assert_close(train_gcn(scaled, edge_index, y, mask, spec, seed=0),
                               train_gcn(x, edge_index, y, mask, spec, seed=0))


def trained_models(monkeypatch, train, spec):
    """Run `train(spec)` and return the model it trained (GCN or ReferenceMLP, whichever it built)."""
    built = []

    def recording(cls):
        class Recorded(cls):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                built.append(self)
        return Recorded

    monkeypatch.setattr(gcn, "GCN", recording(GCN))
    monkeypatch.setattr(gcn, "ReferenceMLP", recording(ReferenceMLP))
    train(spec)
    (model,) = built
    return model


def weight_norms(model) -> list[float]:
    return [float(next(p for name, p in layer.named_parameters() if name.endswith("weight")).detach().norm())
            for layer in model.layers]


@pytest.mark.parametrize("model", ["gcn", "mlp"])
def test_weight_decay_shrinks_the_first_layer_only(monkeypatch, model):
    x, edge_index, y = planted_partition()
    mask = labelled_nodes(300, 0.1, seed=0)
    train = {"gcn": lambda spec: train_gcn(x, edge_index, y, mask, spec, seed=0),
             "mlp": lambda spec: train_reference_mlp(x, y, mask, spec, seed=0)}[model]
    free = weight_norms(trained_models(monkeypatch, train, GCNSpec(lr=0.05, epochs=100)))
    first = weight_norms(trained_models(monkeypatch, train, GCNSpec(lr=0.05, epochs=100, weight_decay=10.0)))
    both = weight_norms(trained_models(monkeypatch, train, GCNSpec(lr=0.05, epochs=100, weight_decay=10.0,
                                                                   weight_decay_layers="all")))
    assert first[0] < 0.1 * free[0]  # the first layer's weights decayed to almost nothing
    assert first[1] > 0.5 * free[1]  # the second's not (measured: 0.8x for the MLP, 1.5x for the GCN)
    assert both[0] < 0.1 * free[0] and both[1] < 0.1 * free[1]


def test_decay_is_tkipfs_l2_term_on_the_first_weight_matrix_and_never_a_bias():
    """tkipf/gcn adds weight_decay · l2_loss(W1) = weight_decay/2 · ‖W1‖² to the loss (models.py);
    Adam's weight_decay on W1's parameter group takes the same steps."""
    x, _, y = planted_partition()
    spec = GCNSpec(lr=0.05, weight_decay=0.5)
    steps = []
    for tkipf in (False, True):
        torch.manual_seed(0)
        model = ReferenceMLP(16, 8, 3, dropout=0.0)
        groups = ([{"params": list(model.parameters()), "weight_decay": 0.0}] if tkipf
                  else gcn._decay_groups(model.layers, spec))
        optimiser = torch.optim.Adam(groups, lr=spec.lr)
        for _ in range(5):
            loss = F.cross_entropy(model(x), y)
            if tkipf:
                loss = loss + spec.weight_decay * model.layer1.weight.square().sum() / 2
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        steps.append([p.detach().clone() for p in model.parameters()])
    for ours, theirs in zip(*steps):
        torch.testing.assert_close(ours, theirs)

    target = GCN(16, 8, 3, dropout=0.5)
    for layers, decayed in (("first", [target.conv1.lin.weight]),
                            ("all", [target.conv1.lin.weight, target.conv2.lin.weight])):
        with_decay, without = gcn._decay_groups(target.layers, replace(spec, weight_decay_layers=layers))
        assert [id(p) for p in with_decay["params"]] == [id(p) for p in decayed]
        assert with_decay["weight_decay"] == 0.5 and without["weight_decay"] == 0.0
        assert sorted(map(id, with_decay["params"] + without["params"])) == sorted(map(id, target.parameters()))
        assert {id(target.conv1.bias), id(target.conv2.bias)} <= set(map(id, without["params"]))


def test_an_unknown_weight_decay_layers_is_refused():
    with pytest.raises(ValueError, match="weight_decay_layers must be one of first, all, got 'second'"):
        GCNSpec(weight_decay_layers="second")
    assert GCNSpec.from_config({"weight_decay_layers": "all", "normalize_features": True}) == GCNSpec(
        weight_decay_layers="all", normalize_features=True)
