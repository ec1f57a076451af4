#!/usr/bin/env python
"""Rule `lira_heads`: the shadow and target heads of the membership evaluation, clean.

The candidate pool is the concatenation of the configured splits (default: d and the
non-members, 2|d| records). Every one of the N shadow and T target heads trains on its own
uniform random subset of |d| pool records — the training-set size the victim's noise is
calibrated for — by the victim's algorithm for the head kind: A_S (`finetune`, one batched
computation whose heads differ only by their data sets) or the certified learner (`certified`).
The noisy releases of these heads are made per method by the `lira` rule."""

import argparse
import time

import torch

from privssl.artefacts.image import FEATURES
from privssl.artefacts.tables import load_tensor_file
from privssl.artefacts.tuning import parse_checking_choices
from privssl.attacks.adaptive import train_clean_heads
from privssl.attacks.lira import candidate_pool, draw_training_sets
from privssl.cli import json_object, thread_count
from privssl.data.splits import LABELLED_SPLITS
from privssl.io import atomic_torch_save, script_logger
from privssl.release.certified import CertifiedSpec
from privssl.training.heads import HeadSpec, parameter_shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--features", required=True)
    parser.add_argument("--pool", nargs="+", required=True, choices=LABELLED_SPLITS, help="splits of the pool")
    parser.add_argument("--head-kind", required=True, choices=("finetune", "certified"))
    parser.add_argument("--head", type=json_object, default={}, help="JSON object of HeadSpec fields")
    parser.add_argument("--certified", type=json_object, default={}, help="JSON object of CertifiedSpec fields")
    parser.add_argument("--shadows", type=int, required=True)
    parser.add_argument("--targets", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    args = parse_checking_choices(parser)
    log = script_logger("lira_heads")
    if args.shadows < 2 or args.targets < 1:
        parser.error(f"--shadows must be >= 2 and --targets >= 1, got {args.shadows} and {args.targets}")
    if len(set(args.pool)) != len(args.pool):
        parser.error(f"--pool names a split twice: {args.pool}")
    if args.threads:
        torch.set_num_threads(args.threads)
    feats = load_tensor_file(args.features, FEATURES)
    x, y = candidate_pool(feats, args.pool)
    set_size = len(feats["finetune_labels"])
    if len(y) < 2 * set_size:
        parser.error(f"the candidate pool {args.pool} has {len(y)} records; it needs at least 2|d| = {2 * set_size}")
    n_classes = int(feats["n_classes"])
    head_spec = HeadSpec.from_config(args.head)
    certified_spec = CertifiedSpec.from_config(args.certified) if args.head_kind == "certified" else None
    sets = draw_training_sets(len(y), set_size, args.shadows + args.targets, args.seed)
    start = time.perf_counter()
    flat = train_clean_heads(args.head_kind, x, y, sets, n_classes, head_spec, certified_spec, log.info)
    log.info("%d %s heads on %d of %d pool records in %.1f s", len(sets), args.head_kind, set_size, len(y),
             time.perf_counter() - start)
    if args.head_kind == "certified":
        shapes = {"weight": (x.shape[1], n_classes), "bias": (n_classes,)}
        clip_norm = certified_spec.clip_norm
    else:
        shapes, clip_norm = parameter_shapes(head_spec, x.shape[1], n_classes), None
    atomic_torch_save({"flat": flat, "sets": sets, "pool": args.pool, "pool_size": len(y), "shapes": shapes,
                       "clip_norm": clip_norm, "shadows": args.shadows, "targets": args.targets,
                       "head_kind": args.head_kind, "seed": args.seed}, args.out)


if __name__ == "__main__":
    main()
