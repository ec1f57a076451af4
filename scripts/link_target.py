#!/usr/bin/env python
"""Rule `link_target`: for each run, the thesis's target GCN trained on a random 10 % of the
nodes (its posteriors of every node are what the adversary queries), the adversary's reference
MLP on the same labelled nodes (attributes only), and the attack dataset (all edges plus as
many random non-edges, split 50/50 into attack-train, the partial graph A*, and attack-test)."""

import argparse

import torch

from privssl.artefacts.graphs import GRAPH
from privssl.artefacts.tables import load_tensor_file
from privssl.cli import device_argument, json_object, thread_count
from privssl.graphs.data import Graph
from privssl.graphs.gcn import GCNSpec, labelled_nodes, train_gcn, train_reference_mlp
from privssl.graphs.link_pairs import attack_dataset
from privssl.io import atomic_torch_save, pick_device, script_logger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graph", required=True)
    parser.add_argument("--gcn", type=json_object, default={}, help="JSON object of GCNSpec fields")
    parser.add_argument("--runs", type=int, default=5, help="independent (target, attack dataset) runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parser.parse_args()
    log = script_logger("link_target")
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    spec = GCNSpec.from_config(args.gcn)
    graph = Graph.from_dict(load_tensor_file(args.graph, GRAPH))
    x, edge_index = graph.x.to(device), graph.edge_index.to(device)
    runs = {key: [] for key in ("labelled", "posteriors", "reference", "pairs", "is_edge", "train")}
    for run in range(args.runs):
        seed = args.seed * 1000 + run
        labelled = labelled_nodes(graph.num_nodes, spec.label_rate, seed)
        posteriors = train_gcn(x, edge_index, graph.y, labelled, spec, seed, graph.n_classes)
        reference = train_reference_mlp(x, graph.y, labelled, spec, seed, graph.n_classes)
        pairs = attack_dataset(graph.edge_index, graph.num_nodes, seed)
        accuracy = lambda p: float((p.argmax(1) == graph.y)[~labelled].double().mean())  # noqa: E731
        log.info("device %s, run %d: GCN accuracy %.4f, reference MLP accuracy %.4f on the unlabelled nodes; "
                 "%d attack pairs", device, run, accuracy(posteriors), accuracy(reference), len(pairs.pairs))
        for key, value in (("labelled", labelled), ("posteriors", posteriors), ("reference", reference),
                           ("pairs", pairs.pairs), ("is_edge", pairs.is_edge), ("train", pairs.train)):
            runs[key].append(value)
    atomic_torch_save({key: torch.stack(values) for key, values in runs.items()}, args.out)


if __name__ == "__main__":
    main()
