#!/usr/bin/env python
"""Rule `graph_data`: load one graph through PyG's dataset classes (or generate it) and draw the
disjoint node splits. Writes the graph as tensors (every later graph rule reads only this file)
and the split file."""

import argparse

from privssl.cli import json_object
from privssl.graphs.data import load_graph
from privssl.graphs.splits import NODE_SPLITS, make_node_splits
from privssl.io import atomic_torch_save, atomic_write_json, script_logger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True, help="cora, citeseer, pubmed, cox2 or sbm[_suffix]")
    parser.add_argument("--data-root", required=True, help="PyG layout: planetoid/<Name>/raw, tu/<NAME>/raw")
    parser.add_argument("--download", action="store_true", help="let PyG download missing raw files")
    parser.add_argument("--generator", type=json_object, default=None, help="SBM parameters (sbm* graphs)")
    parser.add_argument("--sizes", type=json_object, required=True, help=f"JSON sizes of {', '.join(NODE_SPLITS)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--graph", required=True, help="output graph (.pt)")
    parser.add_argument("--splits", required=True, help="output split file (.json)")
    args = parser.parse_args()
    log = script_logger("graph_data")
    missing = [s for s in NODE_SPLITS if s not in args.sizes]
    if missing:
        parser.error(f"--sizes lacks {missing}; needs {list(NODE_SPLITS)}")
    graph = load_graph(args.dataset, args.data_root, args.download, args.generator, args.seed)
    splits = make_node_splits(graph.num_nodes, args.sizes, args.seed)
    log.info("%s: %d nodes, %d undirected edges, %d features, %d classes; splits %s", args.dataset,
             graph.num_nodes, graph.edge_index.shape[1] // 2, graph.x.shape[1], graph.n_classes,
             {k: len(v) for k, v in splits.items()})
    atomic_torch_save(graph.to_dict(), args.graph)
    atomic_write_json({"dataset": args.dataset, "num_nodes": graph.num_nodes, "splits": splits}, args.splits)


if __name__ == "__main__":
    main()
