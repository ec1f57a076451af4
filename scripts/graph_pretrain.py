#!/usr/bin/env python
"""Rule `graph_pretrain`: Deep Graph Infomax on the whole graph, without labels; writes the
encoder, the per-epoch loss, and the frozen encoder's embedding of every node."""

import argparse

import pandas as pd
import torch

from privssl.artefacts.graphs import GRAPH
from privssl.artefacts.tables import load_tensor_file
from privssl.cli import device_argument, json_object, thread_count
from privssl.graphs.data import Graph
from privssl.graphs.dgi import DGISpec, embed, pretrain_dgi
from privssl.io import atomic_torch_save, atomic_write_csv, pick_device, script_logger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--graph", required=True)
    parser.add_argument("--dgi", type=json_object, default={}, help="JSON object of DGISpec fields")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--encoder", required=True, help="output encoder (.pt)")
    parser.add_argument("--history", required=True, help="output per-epoch loss (.csv)")
    parser.add_argument("--embeddings", required=True, help="output node embeddings (.pt)")
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parser.parse_args()
    log = script_logger("graph_pretrain")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    spec = DGISpec.from_config(args.dgi)
    graph = Graph.from_dict(load_tensor_file(args.graph, GRAPH))
    log.info("device %s, spec %s, graph %s with %d nodes", device, spec, graph.name, graph.num_nodes)
    x, edge_index = graph.x.to(device), graph.edge_index.to(device)
    model, history = pretrain_dgi(spec, x, edge_index, args.seed, log.info)
    atomic_write_csv(pd.DataFrame(history), args.history)
    atomic_torch_save({"state": model.state_dict(), "spec": spec.__dict__, "in_dim": graph.x.shape[1]},
                      args.encoder)
    atomic_torch_save({"embeddings": embed(model, x, edge_index), "labels": graph.y, "n_classes": graph.n_classes},
                      args.embeddings)


if __name__ == "__main__":
    main()
