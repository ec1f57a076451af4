"""Graph data: the generated SBM, PyG's offline Planetoid / TU copies, node splits, config checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from privssl.config import ConfigError, validate_config
from privssl.graphs.data import load_graph, stochastic_block_graph
from privssl.graphs.splits import GRAPH_NODES, NODE_SPLITS, make_node_splits

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(),
                                  reason=f"offline graph copies not found at {SHARED_DATA}")
SBM = dict(block_sizes=[60, 60, 60], p_in=0.1, p_out=0.01, features=16, separation=1.0)


def test_sbm_is_deterministic_undirected_and_planted():
    a = stochastic_block_graph("sbm", seed=3, **SBM)
    b = stochastic_block_graph("sbm", seed=3, **SBM)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert not torch.equal(a.edge_index, stochastic_block_graph("sbm", seed=4, **SBM).edge_index)
    src, dst = a.edge_index
    assert (src != dst).all(), "self loops"
    assert set(zip(src.tolist(), dst.tolist())) == set(zip(dst.tolist(), src.tolist())), "not undirected"
    # planted partition: p_in = 10 p_out, so most edges stay inside a block
    same = (a.y[src] == a.y[dst]).double().mean()
    expected = 0.1 * 3 * 59 * 60 / (0.1 * 3 * 59 * 60 + 0.01 * 2 * 3 * 60 * 60)  # E[within] / E[all]
    assert same == pytest.approx(expected, abs=0.06)
    # class-dependent features: the class means differ far more than their standard error
    means = torch.stack([a.x[a.y == c].mean(0) for c in range(3)])
    assert (means[0] - means[1]).norm() > 5 * (2 / 60) ** 0.5


def test_node_splits_are_disjoint_sized_and_seeded():
    sizes = {"finetune": 10, "nonmember": 20, "shadow": 30, "test": 25, "reference": 15}
    splits = make_node_splits(100, sizes, seed=1)
    assert {k: len(v) for k, v in splits.items()} == sizes
    flat = [i for s in splits.values() for i in s]
    assert len(flat) == len(set(flat)) == 100
    assert splits == make_node_splits(100, sizes, seed=1)
    with pytest.raises(ValueError, match="need 101 nodes, the graph has 100"):
        make_node_splits(100, {**sizes, "test": 26}, seed=1)


def test_unknown_graph_is_rejected():
    with pytest.raises(ValueError, match="unknown graph dataset 'reddit'"):
        load_graph("reddit")


def test_missing_raw_files_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no raw files under .*planetoid/Cora/raw and download is off"):
        load_graph("cora", tmp_path)


@needs_shared
@pytest.mark.parametrize("name, nodes, undirected_edges, features, classes", [
    ("cora", 2708, 5278, 1433, 7), ("citeseer", 3327, 4552, 3703, 6)])
def test_planetoid_offline_copy(tmp_path, name, nodes, undirected_edges, features, classes):
    before = sorted(p.name for p in SHARED_DATA.joinpath("planetoid").rglob("*"))
    graph = load_graph(name, SHARED_DATA)
    # Kipf & Welling's Planetoid statistics (self loops and duplicate edges removed)
    assert (graph.num_nodes, graph.x.shape[1], graph.n_classes) == (nodes, features, classes) == \
           (GRAPH_NODES[name], features, classes)
    assert graph.edge_index.shape[1] // 2 == undirected_edges
    after = sorted(p.name for p in SHARED_DATA.joinpath("planetoid").rglob("*"))
    assert before == after, "loading wrote into the shared read-only copy"


@needs_shared
def test_cox2_is_one_disjoint_union_with_atom_types_as_classes(tmp_path):
    graph = load_graph("cox2", SHARED_DATA)
    raw = SHARED_DATA / "tu" / "COX2" / "raw"
    n_nodes = len((raw / "COX2_node_labels.txt").read_text().split())
    atom_types = sorted(set(int(v) for v in (raw / "COX2_node_labels.txt").read_text().split()))
    assert graph.num_nodes == n_nodes == GRAPH_NODES["cox2"]
    assert graph.n_classes == len(atom_types)
    assert graph.x.shape[1] == 3  # the continuous node attributes only, not the one-hot class
    assert graph.y.bincount().min() > 0
    indicator = torch.tensor([int(v) for v in (raw / "COX2_graph_indicator.txt").read_text().split()])
    src, dst = graph.edge_index
    assert (indicator[src] == indicator[dst]).all(), "an edge joins two molecules"


def test_config_checks_graph_splits_and_generators():
    import yaml

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    schema = REPO / "schemas" / "config.schema.yaml"
    validate_config(config, schema)
    oversized = {**config, "graphs": {"cora": {"splits": dict.fromkeys(NODE_SPLITS, 1000)}}}
    with pytest.raises(ConfigError, match=r"graphs\.cora\.splits.*need 5000 nodes, but cora has 2708"):
        validate_config(oversized, schema)
    generated_without_generator = {**config, "graphs": {"sbm": {"splits": dict.fromkeys(NODE_SPLITS, 5)}}}
    with pytest.raises(ConfigError, match="graph 'sbm' needs 'generator'"):
        validate_config(generated_without_generator, schema)
    unknown = {**config, "graphs": {"reddit": {"splits": dict.fromkeys(NODE_SPLITS, 5)}}}
    with pytest.raises(ConfigError, match="graphs"):
        validate_config(unknown, schema)
