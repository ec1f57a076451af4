#!/usr/bin/env python
"""Rule `link_protect`: link stealing against the self-supervised GNN (DGI encoder + head),
unprotected (`none`) and every noisy head of each mechanism, in one process. The adversary
queries the released model for the posteriors of every node, head(DGI(x, A)), and runs Attack-0
(posterior distances) and Attack-3 (attack MLP on the partial graph, trained on the same
release's posteriors). A target's releases are attacked as one batched computation. Tidy CSV
per target, one row per (release, attack, distance), and each row's per-pair scores and calls on
the attack-test pairs (Parquet)."""

import argparse

import pandas as pd
import torch

from privssl.artefacts.graphs import EMBEDDINGS, GRAPH, LINK_PROTECTION_KEY, link_score_lines
from privssl.artefacts.image import HEAD, load_release
from privssl.artefacts.tables import expected_of, load_tensor_file
from privssl.cli import (
    expect_argument,
    json_object,
    target_arguments,
    targets_and_outputs,
    thread_count,
)
from privssl.graphs.link_attacks import AttackMLPSpec, Observation, attack_0, attack_3
from privssl.graphs.link_pairs import attack_dataset
from privssl.io import atomic_write_csv, atomic_write_parquet, script_logger
from privssl.release.protection import head_inputs, released_heads
from privssl.training.heads import predict_proba, unflatten


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--graph", required=True)
    parser.add_argument("--embeddings", required=True, help="DGI embeddings of every node")
    parser.add_argument("--head", required=True, help="released head (.pt)")
    target_arguments(parser)
    parser.add_argument("--attack-mlp", type=json_object, default={}, help="JSON object of AttackMLPSpec fields")
    parser.add_argument("--scores", required=True, nargs="+",
                        help="one per-pair scores file per target, in the order of --out "
                             "(artefacts.graphs.LINK_PROTECTION_SCORES)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=thread_count, default=None)
    expect_argument(parser)
    args = parser.parse_args()
    log = script_logger("link_protect")
    targets = targets_and_outputs(parser, args)
    if len(args.scores) != len(args.out):
        parser.error(f"--scores needs one path per --out ({len(args.out)}), got {len(args.scores)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    graph = load_tensor_file(args.graph, GRAPH)
    nodes = load_tensor_file(args.embeddings, EMBEDDINGS, {"N": len(graph["x"])})  # one row per node
    head = load_tensor_file(args.head, HEAD)
    pairs = attack_dataset(graph["edge_index"], len(graph["x"]), args.seed)
    # every release file checked before any work
    loaded = [None if protected is None else load_release(protected, target, expected_of(args.expect, protected))
              for target, (protected, _) in zip(args.targets, targets)]
    for release, (_, out), scores_out in zip(loaded, targets, args.scores):
        releases = released_heads(head, release)
        frame, lines = attack_releases(releases, nodes, pairs, args, log)
        atomic_write_csv(frame, out)
        atomic_write_parquet(lines, scores_out)


def attack_releases(releases, nodes: dict, pairs, args, log) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Attack-0 and Attack-3 on every release of one target, as one batched computation: the
    rows, and their per-pair scores (link_score_lines)."""
    posteriors = predict_proba(unflatten(releases.flat, releases.shapes),
                               head_inputs(nodes["embeddings"], releases.clip_norm)).float()  # (releases, N, C)
    observation = Observation(pairs, posteriors)
    spec = AttackMLPSpec.from_config(args.attack_mlp)
    rows = []
    for row in attack_0(observation) + attack_3(observation, spec, args.seed):
        release = row.pop("release")
        rows.append({"dataset": args.dataset, "mechanism": releases.method,
                     "eps": releases.eps[release // releases.repeats], "repeat": release % releases.repeats, **row})
    lines = link_score_lines(rows, LINK_PROTECTION_KEY, pairs.pairs[pairs.test], pairs.is_edge[pairs.test])
    frame = pd.DataFrame(rows)
    summary = frame[(frame.attack == "attack-3") | (frame.distance == "correlation")]
    log.info("%s: mean AUC by (attack, eps) %s", releases.method,
             summary.groupby(["attack", "eps"], dropna=False).auc.mean().round(4).to_dict())
    return frame, lines


if __name__ == "__main__":
    main()
