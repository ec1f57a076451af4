"""The target GCN of the link-stealing attacks and the adversary's reference MLP (seed 003 §5.4.1).

Target model f: "a graph convolutional network with 2 hidden layers [...] The number of neurons
in the hidden layer is set to 16. We adopt [...] ReLU and softmax as activation functions for the
first hidden layer and the second hidden layer [...] Dropout (the rate is 0.5) [on] the output of
the hidden layer [...] 100 epochs with a learning rate of 0.01. Cross-entropy [...] Adam",
trained on the labels of "10% nodes" sampled at random. The thesis names no weight decay and
no feature preprocessing, so by default there is neither. The code the thesis says its GNNs are
"implemented based on" (tkipf/gcn, footnote 3 of §5.4.1) has both, and `configs/graphs-shared.yaml`
turns them on:

- `weight_decay_layers: first` (tkipf/gcn `models.py`, `GCN._loss`): the L2 term
  `weight_decay · l2_loss(W)` = `weight_decay / 2 · ‖W‖²` is added to the loss for the variables of
  `self.layers[0]` only, the first layer's weight matrix (tkipf's layers have no bias). Its
  gradient `weight_decay · W` is what Adam's coupled `weight_decay` adds, so the first layer's
  weight sits in a parameter group with the decay and everything else in one without. Biases
  (which PyG's GCNConv and nn.Linear have) are never decayed; `all` decays the weight matrices of
  both layers.
- `normalize_features: true` (tkipf/gcn `utils.py`, `preprocess_features`): each node's
  attributes divided by their sum, x_i / Σ_j x_ij, a row that sums to 0 set to zero. Only
  the inputs of f and g are normalised; the attacks' attribute distances use the attributes as
  given (`link_features.py`), as the authors' attack code does.

tkipf/gcn also drops out the input features and has no biases; neither is an option here (the
thesis names dropout on the hidden layer's output only).

Reference model g: "an MLP with 2 hidden layers [...] Hyperparameters [...] are the same as
those of the target model", trained on the same labelled nodes from the attributes alone. "2
hidden layers" counts layers as for the GCN: Linear(16) -> ReLU -> Dropout -> Linear -> softmax.

Training is full batch (one step per epoch, as tkipf/gcn) and seeded: initialisation and dropout
draw from the global RNG inside `torch.random.fork_rng`, so the result depends only on `seed`
and the caller's RNG state is left untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GCNConv

WEIGHT_DECAY_LAYERS = ("first", "all")


def row_normalize(x: torch.Tensor) -> torch.Tensor:
    """tkipf/gcn's `preprocess_features`: x_i / Σ_j x_ij per row; a row summing to 0 becomes zero."""
    inverse = x.sum(1, keepdim=True).reciprocal()
    return x * torch.where(torch.isinf(inverse), torch.zeros_like(inverse), inverse)


@dataclass(frozen=True)
class GCNSpec:
    """Hyper-parameters of the target GCN, shared by the reference MLP."""

    hidden: int = 16
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 0.0
    weight_decay_layers: str = "first"  # whose weight matrices the decay applies to: first | all
    normalize_features: bool = False  # row-normalise the model inputs (tkipf/gcn's preprocess_features)
    epochs: int = 100
    label_rate: float = 0.1

    def __post_init__(self):
        if self.weight_decay_layers not in WEIGHT_DECAY_LAYERS:
            raise ValueError(f"weight_decay_layers must be one of {', '.join(WEIGHT_DECAY_LAYERS)}, "
                             f"got {self.weight_decay_layers!r}")

    @classmethod
    def from_config(cls, cfg: dict) -> "GCNSpec":
        return cls(**{k: cfg[k] for k in cls.__dataclass_fields__ if k in cfg})


def _decay_groups(layers: list[nn.Module], spec: GCNSpec) -> list[dict]:
    """Adam parameter groups: the weight matrices of the layers `spec.weight_decay_layers` names
    with `spec.weight_decay`, every other parameter (biases, the other layer) without."""
    decayed_layers = layers[:1] if spec.weight_decay_layers == "first" else layers
    decayed = [p for layer in decayed_layers for name, p in layer.named_parameters() if not name.endswith("bias")]
    rest = [p for layer in layers for p in layer.parameters() if all(p is not q for q in decayed)]
    return [{"params": decayed, "weight_decay": spec.weight_decay}, {"params": rest, "weight_decay": 0.0}]


class GCN(nn.Module):
    """Two graph convolutions; returns logits (softmax gives the posteriors)."""

    def __init__(self, in_dim: int, hidden: int, n_classes: int, dropout: float):
        super().__init__()
        self.conv1 = GCNConv(in_dim, hidden, cached=True)  # one graph per model: normalise it once
        self.conv2 = GCNConv(hidden, n_classes, cached=True)
        self.layers = [self.conv1, self.conv2]
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = F.dropout(torch.relu(self.conv1(x, edge_index)), self.dropout, self.training)
        return self.conv2(h, edge_index)


class ReferenceMLP(nn.Module):
    """The GCN with its graph convolutions replaced by dense layers: sees attributes only."""

    def __init__(self, in_dim: int, hidden: int, n_classes: int, dropout: float):
        super().__init__()
        self.layer1 = nn.Linear(in_dim, hidden)
        self.layer2 = nn.Linear(hidden, n_classes)
        self.layers = [self.layer1, self.layer2]
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer2(F.dropout(torch.relu(self.layer1(x)), self.dropout, self.training))


def labelled_nodes(num_nodes: int, label_rate: float, seed: int) -> torch.Tensor:
    """Mask (N,) of a uniformly random `label_rate` share of the nodes: the labelled training nodes."""
    chosen = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed))
    mask = torch.zeros(num_nodes, dtype=torch.bool)
    mask[chosen[:round(label_rate * num_nodes)]] = True
    return mask


def _fit(build, forward, y: torch.Tensor, labelled_mask: torch.Tensor, spec: GCNSpec, seed: int,
         device: torch.device) -> torch.Tensor:
    """Seeded full-batch Adam on the labelled nodes; posteriors (N, C) of every node, on the CPU."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        model = build().to(device)
        optimiser = torch.optim.Adam(_decay_groups(model.layers, spec), lr=spec.lr)
        y, labelled_mask = y.to(device), labelled_mask.to(device)
        model.train()
        for _ in range(spec.epochs):
            loss = F.cross_entropy(forward(model)[labelled_mask], y[labelled_mask])
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
        model.eval()
        with torch.no_grad():
            return torch.softmax(forward(model), -1).cpu()


def train_gcn(x: torch.Tensor, edge_index: torch.Tensor, y: torch.Tensor, labelled_mask: torch.Tensor,
              spec: GCNSpec, seed: int, n_classes: int | None = None) -> torch.Tensor:
    """Train the target GCN f on the labelled nodes; its posteriors f(u) of all nodes, (N, C)."""
    n_classes = n_classes or int(y.max()) + 1
    edge_index = edge_index.to(x.device)
    x = row_normalize(x) if spec.normalize_features else x
    return _fit(lambda: GCN(x.shape[1], spec.hidden, n_classes, spec.dropout), lambda m: m(x, edge_index),
                y, labelled_mask, spec, seed, x.device)


def train_reference_mlp(x: torch.Tensor, y: torch.Tensor, labelled_mask: torch.Tensor, spec: GCNSpec, seed: int,
                        n_classes: int | None = None) -> torch.Tensor:
    """Train the reference model g on the same labelled nodes from attributes alone; g(u) of all nodes."""
    n_classes = n_classes or int(y.max()) + 1
    x = row_normalize(x) if spec.normalize_features else x
    return _fit(lambda: ReferenceMLP(x.shape[1], spec.hidden, n_classes, spec.dropout), lambda m: m(x),
                y, labelled_mask, spec, seed, x.device)
