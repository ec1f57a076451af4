"""The adversary's view of a graph for the link-stealing attacks, rebuilt from the files of
the `graph_data` and `link_target` rules."""

from __future__ import annotations

import torch

from privssl.graphs.link_attacks import Observation
from privssl.graphs.link_pairs import AttackPairs


def run_observation(graph: dict, target: dict, run: int, as_shadow: bool = False) -> Observation:
    """Run `run` of a graph, as target (attack-train / attack-test split) or as shadow dataset
    (every pair trains: "the shadow attack dataset is not split")."""
    train = torch.ones_like(target["train"][run]) if as_shadow else target["train"][run]
    pairs = AttackPairs(target["pairs"][run], target["is_edge"][run], train)
    return Observation(pairs, target["posteriors"][run], graph["x"], target["reference"][run])
