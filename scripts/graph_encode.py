#!/usr/bin/env python
"""Rule `graph_encode`: the frozen DGI embeddings of each node split, in the features file the
shared finetune, sensitivity, protect and attack rules read (the image track's format)."""

import argparse

import torch

from privssl.artefacts.graphs import EMBEDDINGS, load_graph_splits
from privssl.artefacts.tables import load_tensor_file
from privssl.graphs.splits import NODE_SPLITS
from privssl.io import atomic_torch_save, script_logger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", required=True)
    parser.add_argument("--embeddings", required=True)
    parser.add_argument("--out", required=True, help="features file (.pt)")
    args = parser.parse_args()
    log = script_logger("graph_encode")
    record = load_graph_splits(args.splits)
    splits = record["splits"]
    nodes = load_tensor_file(args.embeddings, EMBEDDINGS, {"N": record["num_nodes"]})  # one row per node
    out = {"n_classes": nodes["n_classes"]}
    for name in NODE_SPLITS:
        index = torch.tensor(splits[name], dtype=torch.long)
        out[name], out[f"{name}_labels"] = nodes["embeddings"][index], nodes["labels"][index]
        log.info("%s features %s", name, tuple(out[name].shape))
    atomic_torch_save(out, args.out)


if __name__ == "__main__":
    main()
