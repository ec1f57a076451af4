"""Node splits of the graph track, and the node counts that bound them.

As in the image track: `finetune` (the private labelled nodes d, the victim's members),
`nonmember`, `shadow` (the attacker's nodes), `test` and `reference` (the public labelled
pool of the sensitivity sampler), pairwise disjoint. There is no
`pretrain` split: the DGI encoder trains without labels on the whole graph.

Free of torch on purpose: the Snakefile imports it to validate the config before any job.
"""

from __future__ import annotations

import numpy as np

NODE_SPLITS = ("finetune", "nonmember", "shadow", "test", "reference")
GRAPH_NODES = {"cora": 2708, "citeseer": 3327, "pubmed": 19717, "cox2": 19252}


def graph_nodes(name: str, entry: dict) -> int:
    """Number of nodes of graph `name` (generated graphs: the sum of their block sizes)."""
    if name in GRAPH_NODES:
        return GRAPH_NODES[name]
    return sum(entry["generator"]["block_sizes"])


def check_node_split_sizes(name: str, entry: dict) -> None:
    """Raise ValueError naming the sizes if the node splits cannot be drawn from graph `name`."""
    sizes, nodes = entry["splits"], graph_nodes(name, entry)
    if sum(sizes[s] for s in NODE_SPLITS) > nodes:
        detail = ", ".join(f"{s}={sizes[s]}" for s in NODE_SPLITS)
        raise ValueError(f"node splits of {name!r} ({detail}) need {sum(sizes[s] for s in NODE_SPLITS)} nodes, "
                         f"but {name} has {nodes}")


def make_node_splits(num_nodes: int, sizes: dict[str, int], seed: int) -> dict[str, list[int]]:
    """Disjoint random node sets of the given sizes (seeded)."""
    needed = sum(sizes[s] for s in NODE_SPLITS)
    if needed > num_nodes:
        raise ValueError(f"node splits need {needed} nodes, the graph has {num_nodes}")
    order = np.random.default_rng(seed).permutation(num_nodes)
    splits, offset = {}, 0
    for name in NODE_SPLITS:
        splits[name] = sorted(order[offset:offset + sizes[name]].tolist())
        offset += sizes[name]
    return splits
