#!/usr/bin/env python
"""Rule `link_steal`: the link-stealing attacks on one graph's target GCN that need no shadow
dataset: Attack-0 (posteriors only) and Attack-2 (+ attributes), unsupervised, and Attack-3
(+ partial graph) and Attack-6 (+ both), supervised. Tidy CSV, one row per (run, attack, feature
set, distance), and each row's per-pair scores and calls on the run's attack-test pairs (Parquet)."""

import argparse

import pandas as pd
import torch

from privssl.artefacts.graphs import GRAPH, LINK_KEY, link_score_lines, load_link_target
from privssl.artefacts.tables import load_tensor_file
from privssl.cli import json_object, thread_count
from privssl.graphs.link_attacks import AttackMLPSpec, supervised_attacks, unsupervised_attacks
from privssl.graphs.observations import run_observation
from privssl.io import atomic_write_csv, atomic_write_parquet, script_logger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--graph", required=True)
    parser.add_argument("--target", required=True, help="output of the link_target rule")
    parser.add_argument("--attack-mlp", type=json_object, default={}, help="JSON object of AttackMLPSpec fields")
    parser.add_argument("--out", required=True)
    parser.add_argument("--scores", required=True,
                        help="output: every row's per-pair scores (artefacts.graphs.LINK_SCORES)")
    parser.add_argument("--threads", type=thread_count, default=None)
    args = parser.parse_args()
    log = script_logger("link_steal")
    if args.threads:
        torch.set_num_threads(args.threads)
    graph = load_tensor_file(args.graph, GRAPH)
    target = load_link_target(args.target, len(graph["x"]))
    spec = AttackMLPSpec.from_config(args.attack_mlp)
    rows, lines = [], []
    for run in range(len(target["posteriors"])):
        observation = run_observation(graph, target, run)
        found = []
        for row in unsupervised_attacks(observation) + supervised_attacks(observation, spec, seed=run):
            row.pop("release")  # one release: the target GCN itself
            found.append({"dataset": args.dataset, "shadow": "", "run": run, **row})
        pairs = observation.pairs
        lines.append(link_score_lines(found, LINK_KEY, pairs.pairs[pairs.test], pairs.is_edge[pairs.test]))
        rows += found
    frame = pd.DataFrame(rows)
    log.info("mean AUC: %s", frame.groupby(["attack", "feature_set", "distance"], dropna=False).auc.mean()
             .round(3).to_dict())
    atomic_write_csv(frame, args.out)
    atomic_write_parquet(pd.concat(lines, ignore_index=True), args.scores)


if __name__ == "__main__":
    main()
