#!/usr/bin/env python
"""Rule `sensitivity`: the sampled sensitivity Δ1, Δ2 of the head's weights.

`--sampling population` (default): Rubinstein & Aldà's sampler over the public `reference`
pool; m pairs of neighbouring data sets of size |d|, Δ̂ the k-th order statistic for ρ, γ. The
private split d is not read (only its size, which is public).
`--sampling paper`: the seed paper's Algorithm 2 inside d (no DP guarantee follows).
Either way all 2m head trainings run batched over shared features."""

import argparse

import torch

from privssl.artefacts.image import features
from privssl.artefacts.tables import load_tensor_file
from privssl.artefacts.tuning import parse_checking_choices
from privssl.cli import device_argument, json_object, thread_count
from privssl.io import atomic_write_json, pick_device, script_logger
from privssl.release.sensitivity import (
    SAMPLINGS,
    PopulationSampler,
    order_statistic_index,
    paper_sensitivity,
    population_sensitivity,
)
from privssl.training.heads import HeadSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--features", required=True)
    parser.add_argument("--head", type=json_object, required=True, help="JSON object of HeadSpec fields")
    parser.add_argument("--sampling", choices=SAMPLINGS, required=True)
    parser.add_argument("--m", type=int, required=True, help="number of sampled neighbour pairs")
    parser.add_argument("--rho", type=float, required=True, help="random DP: mass of pairs above Δ̂ allowed")
    parser.add_argument("--gamma", type=float, required=True, help="random DP: total failure probability")
    parser.add_argument("--chunk-size", type=int, required=True, help="pairs trained per batched computation")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--pretrain-size", type=int, default=None, help="|D|, recorded for Table 1")
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parse_checking_choices(parser)
    log = script_logger("sensitivity")
    if args.m < 1:
        parser.error(f"--m must be >= 1, got {args.m}")
    if args.chunk_size < 1:
        parser.error(f"--chunk-size must be >= 1, got {args.chunk_size}")
    if args.sampling == "population":
        try:
            order_statistic_index(args.m, args.rho, args.gamma)  # fail before any training
        except ValueError as err:
            parser.error(str(err))
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    spec = HeadSpec.from_config(args.head)
    feats = load_tensor_file(args.features, features("finetune", "reference"))
    n = len(feats["finetune_labels"])
    log.info("device %s: %s sampling, %d pairs, %d heads, chunks of %d pairs", device, args.sampling, args.m,
             2 * args.m, args.chunk_size)
    if args.sampling == "population":
        pool, pool_labels = feats["reference"], feats["reference_labels"]
        if len(pool_labels) < n:
            parser.error(f"the reference pool has {len(pool_labels)} records; population sampling needs >= |d| = {n}")
        sampler = PopulationSampler(args.m, args.rho, args.gamma, args.seed, args.chunk_size)
        record = population_sensitivity(spec, pool.to(device), pool_labels.to(device), feats["n_classes"], n, sampler,
                                        log.info)
    else:
        record = paper_sensitivity(spec, feats["finetune"].to(device), feats["finetune_labels"].to(device),
                                   feats["n_classes"], args.m, args.seed, args.chunk_size, log.info)
    record["pretrain_size"] = args.pretrain_size
    log.info("delta1 %.6g delta2 %.6g; %s", record["delta1"], record["delta2"], record["statement"])
    atomic_write_json(record, args.out)


if __name__ == "__main__":
    main()
