#!/usr/bin/env python
"""Rule `link_transfer`: the transferring link-stealing attacks on one target graph with one
shadow graph: Attack-1 (shadow), Attack-4 (+ partial graph), Attack-5 (+ attributes), Attack-7
(+ both), trained on the shadow graph's GCN and pairs with graph-independent features. Tidy CSV,
and each row's per-pair scores and calls on the target's attack-test pairs (Parquet)."""

import argparse

import pandas as pd
import torch

from privssl.artefacts.graphs import GRAPH, LINK_KEY, link_score_lines, load_link_target
from privssl.artefacts.tables import load_tensor_file
from privssl.cli import json_object, thread_count
from privssl.graphs.link_attacks import AttackMLPSpec, transfer_attacks
from privssl.graphs.observations import run_observation
from privssl.io import atomic_write_csv, atomic_write_parquet, script_logger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--shadow", required=True, help="name of the shadow graph")
    parser.add_argument("--graph", required=True)
    parser.add_argument("--target", required=True, help="link_target output of the target graph")
    parser.add_argument("--shadow-graph", required=True)
    parser.add_argument("--shadow-target", required=True, help="link_target output of the shadow graph")
    parser.add_argument("--attack-mlp", type=json_object, default={}, help="JSON object of AttackMLPSpec fields")
    parser.add_argument("--out", required=True)
    parser.add_argument("--scores", required=True,
                        help="output: every row's per-pair scores (artefacts.graphs.LINK_SCORES)")
    parser.add_argument("--threads", type=thread_count, default=None)
    args = parser.parse_args()
    log = script_logger("link_transfer")
    if args.dataset == args.shadow:
        parser.error(f"the shadow graph must differ from the target, got {args.shadow!r} twice")
    if args.threads:
        torch.set_num_threads(args.threads)
    graph, shadow_graph = load_tensor_file(args.graph, GRAPH), load_tensor_file(args.shadow_graph, GRAPH)
    target = load_link_target(args.target, len(graph["x"]))
    shadow_target = load_link_target(args.shadow_target, len(shadow_graph["x"]))
    spec = AttackMLPSpec.from_config(args.attack_mlp)
    runs = min(len(target["posteriors"]), len(shadow_target["posteriors"]))
    rows, lines = [], []
    for run in range(runs):
        observed = run_observation(graph, target, run)
        shadow = run_observation(shadow_graph, shadow_target, run, as_shadow=True)
        found = []
        for row in transfer_attacks(observed, shadow, spec, seed=run):
            row.pop("release")
            found.append({"dataset": args.dataset, "shadow": args.shadow, "run": run, **row})
        pairs = observed.pairs
        lines.append(link_score_lines(found, LINK_KEY, pairs.pairs[pairs.test], pairs.is_edge[pairs.test]))
        rows += found
    frame = pd.DataFrame(rows)
    log.info("shadow %s, mean AUC: %s", args.shadow, frame.groupby("attack").auc.mean().round(3).to_dict())
    atomic_write_csv(frame, args.out)
    atomic_write_parquet(pd.concat(lines, ignore_index=True), args.scores)


if __name__ == "__main__":
    main()
