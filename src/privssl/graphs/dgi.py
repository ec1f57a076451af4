"""Deep Graph Infomax (Veličković et al. 2019): the self-supervised GNN encoder of the graph track.

The encoder is one GCN layer with a PReLU, as in DGI's transductive experiments; the negative
graph keeps the edges and shuffles the rows of the feature matrix (DGI's corruption); the
summary is the sigmoid of the mean node embedding. `torch_geometric.nn.DeepGraphInfomax` holds
the bilinear discriminator and the loss.

Training uses no labels and sees the whole graph (features and edges of every node): what the
noisy head later protects is membership of a node in the labelled fine-tuning set d, not the
node's features nor its edges, which reach every embedding through message passing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch_geometric.nn import DeepGraphInfomax, GCNConv


@dataclass(frozen=True)
class DGISpec:
    hidden: int = 128
    epochs: int = 200
    lr: float = 1e-3

    @classmethod
    def from_config(cls, cfg: dict) -> "DGISpec":
        return cls(**{k: cfg[k] for k in cls.__dataclass_fields__ if k in cfg})


class GCNEncoder(nn.Module):
    def __init__(self, in_dim: int, hidden: int):
        super().__init__()
        self.conv = GCNConv(in_dim, hidden, cached=True)
        self.act = nn.PReLU(hidden)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x, edge_index))


def build_dgi(in_dim: int, hidden: int, generator: torch.Generator) -> DeepGraphInfomax:
    def corruption(x, edge_index):  # a seeded row shuffle, so training is reproducible
        return x[torch.randperm(x.shape[0], generator=generator).to(x.device)], edge_index

    return DeepGraphInfomax(hidden, GCNEncoder(in_dim, hidden), summary=lambda z, *a, **k: torch.sigmoid(z.mean(0)),
                            corruption=corruption)


def pretrain_dgi(spec: DGISpec, x: torch.Tensor, edge_index: torch.Tensor, seed: int,
                 log: Callable[[str], None] = print) -> tuple[DeepGraphInfomax, list[dict]]:
    """Train DGI on the whole graph; returns the model and the per-epoch history (epoch, loss)."""
    with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
        torch.manual_seed(seed)  # parameter initialisation
        model = build_dgi(x.shape[1], spec.hidden, torch.Generator().manual_seed(seed + 1)).to(x.device)
    optimiser = torch.optim.Adam(model.parameters(), lr=spec.lr)
    history = []
    for epoch in range(1, spec.epochs + 1):
        model.train()
        pos, neg, summary = model(x, edge_index)
        loss = model.loss(pos, neg, summary)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        history.append({"epoch": epoch, "loss": loss.item()})
        if epoch == 1 or epoch % max(1, spec.epochs // 10) == 0:
            log(f"epoch {epoch}: DGI loss {loss.item():.4f}")
    return model, history


@torch.no_grad()
def embed(model: DeepGraphInfomax, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """Frozen-encoder node embeddings of every node, on the CPU."""
    model.eval()
    return model.encoder(x, edge_index).cpu()
