#!/usr/bin/env python
"""Benchmark: the batched sensitivity sampler against a sequential loop of 2m trainings.

Default: m = 50 on the default workflow's features (results/digits/finetune/features.pt, made
by `snakemake results/digits/finetune/features.pt`) with the head of config.yaml.
--paper: m = 500 on 10000 × 128 synthetic features (10 classes), the paper's |d| and m.

The sequential baseline trains one head at a time, as a plain implementation of Algorithm 2
would. At paper scale it is timed on --sequential-pairs pairs and scaled to m (every pair costs
the same two trainings); the output says so. Times are medians of --repeats runs, and the
result is the ratio sequential / batched measured in this one process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from privssl.heads import HeadSpec, flatten, train_head  # noqa: E402
from privssl.io import pick_device  # noqa: E402
from privssl.sensitivity import leave_one_out_masks, pair_distances, sample_pairs  # noqa: E402


def sequential_distances(spec, features, labels, n_classes, pairs):
    """Algorithm 2 as a loop: two separate trainings per sampled pair."""
    l1 = []
    for i, j in pairs.tolist():
        heads = []
        for removed in (i, j):
            keep = leave_one_out_masks(len(labels), torch.tensor([removed]))[0].bool().to(features.device)
            heads.append(flatten(train_head(spec, features[keep], labels[keep], n_classes)))
        l1.append(float((heads[0] - heads[1]).abs().sum()))
    return torch.tensor(l1)


def timed(fn, repeats, device):
    times, result = [], None
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        result = fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paper", action="store_true", help="m = 500 on 10000 x 128 synthetic features")
    parser.add_argument("--features", default=str(REPO / "results/digits/finetune/features.pt"))
    parser.add_argument("--config", default=str(REPO / "config.yaml"), help="head and sensitivity settings")
    parser.add_argument("--m", type=int, default=None, help="override the number of pairs")
    parser.add_argument("--head-epochs", type=int, default=None, help="override the head's epochs")
    parser.add_argument("--sequential-pairs", type=int, default=None,
                        help="pairs the sequential loop is timed on (default: all at default scale, 5 with --paper)")
    parser.add_argument("--chunk-size", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    config = yaml.safe_load(Path(args.config).read_text())
    head_cfg = dict(config["head"])
    if args.head_epochs:
        head_cfg["epochs"] = args.head_epochs
    spec = HeadSpec.from_config(head_cfg)
    chunk = args.chunk_size or config["sensitivity"]["chunk_size"]

    if args.paper:
        generator = torch.Generator().manual_seed(0)
        n, dim, n_classes = 10000, 128, 10
        labels = torch.randint(0, n_classes, (n,), generator=generator)
        centres = torch.randn(n_classes, dim, generator=generator)
        features = centres[labels] + 2.0 * torch.randn(n, dim, generator=generator)
        m = args.m or 500
        seq_pairs = args.sequential_pairs or 5
        what = "paper scale: 10000 x 128 synthetic features"
    else:
        if not Path(args.features).exists():
            sys.exit(f"{args.features} is missing: run `snakemake results/digits/finetune/features.pt` first")
        saved = torch.load(args.features, weights_only=True)
        features, labels, n_classes = saved["finetune"], saved["finetune_labels"], saved["n_classes"]
        m = args.m or config["sensitivity"]["m"]
        seq_pairs = args.sequential_pairs or m
        what = f"default features {tuple(features.shape)}"
    features, labels = features.to(device), labels.to(device)
    pairs = sample_pairs(len(labels), m, seed=0)
    seq_pairs = min(seq_pairs, m)

    print(f"device {device}; {what}; head {spec.architecture} ({spec.epochs} epochs, "
          f"{'full batch' if spec.batch_size is None else spec.batch_size}); m = {m}, chunk {chunk} pairs; "
          f"median of {args.repeats} runs")
    batched_t, batched_all, (l1, _) = timed(
        lambda: pair_distances(spec, features, labels, n_classes, pairs, chunk), args.repeats, device)
    seq_t, seq_all, seq_l1 = timed(
        lambda: sequential_distances(spec, features, labels, n_classes, pairs[:seq_pairs]), args.repeats, device)
    seq_scaled = seq_t * m / seq_pairs
    diff = float((l1[:seq_pairs] - seq_l1).abs().max())
    print(f"batched:    {batched_t:9.3f} s  (runs {', '.join(f'{t:.3f}' for t in batched_all)})")
    print(f"sequential: {seq_scaled:9.3f} s  (runs on {seq_pairs} pairs: {', '.join(f'{t:.3f}' for t in seq_all)}"
          f"{'' if seq_pairs == m else f'; scaled by {m}/{seq_pairs}'})")
    print(f"speed-up sequential / batched: {seq_scaled / batched_t:.2f}x")
    print(f"max |Δ1 batched - Δ1 sequential| over the common pairs: {diff:.3g}")


if __name__ == "__main__":
    main()
