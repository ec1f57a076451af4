"""Graph datasets as one node-classification graph each, through PyTorch Geometric's loaders.

- `cora`, `citeseer`, `pubmed`: `torch_geometric.datasets.Planetoid` under `<root>/planetoid`;
- `cox2`: `torch_geometric.datasets.TUDataset` under `<root>/tu` with `use_node_attr=True`; its
  467 molecules are joined as one disjoint union, the node labels (the 8 atom types present) are the classes
  and the continuous node attributes the features (the one-hot labels PyG appends are dropped:
  they *are* the class);
- `sbm*`: a generated stochastic block model (blocks = classes) with class-dependent Gaussian
  features: offline, any size, for the embedded default.

PyG writes a `processed/` folder beside `raw/`. A root that already holds the raw files may be
a shared read-only copy, so the raw files are copied into a scratch folder and processed there;
only when they are missing (and `download` is on) does PyG download into the root itself.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch_geometric.utils import coalesce, remove_self_loops, stochastic_blockmodel_graph, to_undirected

# name: (PyG family folder, PyG dataset name)
PYG_GRAPHS = {"cora": ("planetoid", "Cora"), "citeseer": ("planetoid", "CiteSeer"),
              "pubmed": ("planetoid", "PubMed"), "cox2": ("tu", "COX2")}
SBM_NAME = re.compile(r"^sbm[a-z0-9_]*$")


def is_graph_dataset(name: str) -> bool:
    return name in PYG_GRAPHS or bool(SBM_NAME.match(name))


@dataclass
class Graph:
    """One undirected graph: features x (N, F) float32, edge_index (2, E) with both directions
    and no self loops, node classes y (N,)."""

    name: str
    x: torch.Tensor
    edge_index: torch.Tensor
    y: torch.Tensor
    n_classes: int

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    def to_dict(self) -> dict:
        return {"name": self.name, "x": self.x, "edge_index": self.edge_index, "y": self.y,
                "n_classes": self.n_classes}

    @classmethod
    def from_dict(cls, d: dict) -> "Graph":
        return cls(d["name"], d["x"], d["edge_index"], d["y"], int(d["n_classes"]))


def _clean_edges(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    edge_index, _ = remove_self_loops(edge_index)
    return coalesce(to_undirected(edge_index, num_nodes=num_nodes), num_nodes=num_nodes)


def stochastic_block_graph(name: str, block_sizes: list[int], p_in: float, p_out: float, features: int,
                           separation: float, seed: int) -> Graph:
    """Planted partition: edges inside a block with probability p_in, across with p_out;
    features N(separation · μ_class, I) with class means μ drawn from N(0, I / features)."""
    n_classes = len(block_sizes)
    probs = torch.full((n_classes, n_classes), p_out)
    probs.fill_diagonal_(p_in)
    with torch.random.fork_rng(devices=[]):  # PyG's generator draws from the global RNG
        torch.manual_seed(seed)
        edge_index = stochastic_blockmodel_graph(block_sizes, probs, directed=False)
    generator = torch.Generator().manual_seed(seed + 1)
    y = torch.repeat_interleave(torch.arange(n_classes), torch.tensor(block_sizes))
    means = torch.randn(n_classes, features, generator=generator) / features ** 0.5
    x = separation * features ** 0.5 * means[y] + torch.randn(len(y), features, generator=generator)
    return Graph(name, x.float(), _clean_edges(edge_index, len(y)), y, n_classes)


def _pyg_dataset(name: str, root: Path, download: bool):
    from torch_geometric.datasets import Planetoid, TUDataset

    family, pyg_name = PYG_GRAPHS[name]
    raw = root / family / pyg_name / "raw"
    if raw.is_dir() and any(raw.iterdir()):
        scratch = Path(tempfile.mkdtemp(prefix=f"privssl-{name}-"))
        shutil.copytree(raw, scratch / family / pyg_name / "raw")
        base = scratch / family
    elif download:
        scratch, base = None, root / family
    else:
        raise FileNotFoundError(f"graph dataset {name!r}: no raw files under {raw} and download is off "
                                f"(set graph_download: true on a machine with internet, or point graph_data_root "
                                f"at a copy in PyG's layout)")
    try:
        if family == "planetoid":
            return Planetoid(str(base), pyg_name)
        return TUDataset(str(base), pyg_name, use_node_attr=True)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def load_graph(name: str, root: str | Path = "data", download: bool = False, generator: dict | None = None,
               seed: int = 0) -> Graph:
    """The graph `name`: from PyG's dataset classes under `root`, or generated (`sbm*`)."""
    if not is_graph_dataset(name):
        raise ValueError(f"unknown graph dataset {name!r}; allowed: {', '.join(PYG_GRAPHS)}, or sbm[_suffix]")
    if SBM_NAME.match(name):
        if generator is None:
            raise ValueError(f"graph {name!r} is generated: it needs its generator parameters")
        return stochastic_block_graph(name, seed=seed, **generator)
    dataset = _pyg_dataset(name, Path(root), download)
    if PYG_GRAPHS[name][0] == "planetoid":
        data = dataset[0]
        return Graph(name, data.x.float(), _clean_edges(data.edge_index, data.num_nodes), data.y.long(),
                     int(dataset.num_classes))
    from torch_geometric.data import Batch

    union = Batch.from_data_list(list(dataset))  # disjoint union: node ids offset per molecule
    n_attributes = dataset.num_node_attributes
    # one-hot atom type -> class; ids absent from COX2 (35 declared, 8 present) are dropped
    present, y = torch.unique(union.x[:, n_attributes:].argmax(1), return_inverse=True)
    return Graph(name, union.x[:, :n_attributes].float(), _clean_edges(union.edge_index, union.num_nodes), y,
                 len(present))
