#!/usr/bin/env python
"""Rule `sensitivity`: Algorithm 2, the sensitivity sampler, over the head's weights.
The 2m leave-one-out trainings run batched over the shared features of d."""

import argparse

import torch

from privssl.cli import device_argument, json_object
from privssl.heads import HeadSpec
from privssl.io import atomic_write_json, load_tensors, pick_device, script_logger
from privssl.sensitivity import sample_sensitivity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--features", required=True)
    parser.add_argument("--head", type=json_object, default={}, help="JSON object of HeadSpec fields")
    parser.add_argument("--m", type=int, required=True, help="number of sampled neighbour pairs")
    parser.add_argument("--rho", type=float, default=0.01, help="random-DP: uncovered fraction of pairs")
    parser.add_argument("--chunk-size", type=int, default=128, help="pairs trained per batched computation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pretrain-size", type=int, default=None, help="|D|, recorded for Table 1")
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=None)
    device_argument(parser)
    args = parser.parse_args()
    log = script_logger("sensitivity")
    if args.m < 1:
        parser.error(f"--m must be >= 1, got {args.m}")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    spec = HeadSpec.from_config(args.head)
    feats = load_tensors(args.features)
    log.info("device %s: %d pairs, %d heads, chunks of %d pairs", device, args.m, 2 * args.m, args.chunk_size)
    record = sample_sensitivity(spec, feats["finetune"].to(device), feats["finetune_labels"].to(device),
                                feats["n_classes"], args.m, args.seed, args.rho, args.chunk_size)
    record["pretrain_size"] = args.pretrain_size
    log.info("delta1 %.6g delta2 %.6g; %s", record["delta1"], record["delta2"], record["random_dp"]["statement"])
    atomic_write_json(record, args.out)


if __name__ == "__main__":
    main()
