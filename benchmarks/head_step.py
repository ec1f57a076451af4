#!/usr/bin/env python
"""Benchmark: the two ways `train_heads_on_sets` gets a batch's logits (privssl.training.heads).

- gathered rows (the baseline): each head's batch rows copied out of the pool, B × batch × F, then
  one batched product per head;
- pool logits (`logits_from_pool`): every pool row's logits for every head as one product of the
  shared features, then each head's rows picked.

Both train the same A_S (tests/test_heads.py); this measures which is faster, per training step,
at the default's sampler shapes (config.yaml: B = 2 × chunk_size = 128 heads, data sets of
|d| = 150 drawn from a reference pool of 300, features of width 128, 10 classes, full batch) and
at larger pools (--pool-ratios, in batches), for the linear head and the MLP (hidden 128), in
float32 (the tuning's sampler, `tuning.head_precision`) and float64. Each figure is the median
over --repeats timed trainings of --epochs steps, the two ways alternating so that drifting load
weighs on both; the ratio is gathered / pool. Run on one thread, as the rule `tune` runs:

    python benchmarks/head_step.py [--repeats 5] [--epochs 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from privssl.training import heads
from privssl.training.heads import HeadSpec, train_heads_on_sets

N_HEADS, SET_SIZE, WIDTH, CLASSES, HIDDEN = 128, 150, 128, 10, 128


def timed_training(spec: HeadSpec, features: torch.Tensor, labels: torch.Tensor, sets: torch.Tensor,
                   from_pool: bool) -> float:
    heads.logits_from_pool = lambda *_: from_pool  # one way for this training, whatever the rule would choose
    start = time.perf_counter()
    train_heads_on_sets(spec, features, labels, sets, CLASSES)
    return (time.perf_counter() - start) / spec.epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pool-ratios", type=float, nargs="+", default=[2, 4, 8])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rule = heads.logits_from_pool
    print(f"{N_HEADS} heads, |d| = {SET_SIZE}, width {WIDTH}, {CLASSES} classes, full batch, {args.epochs} steps "
          f"per training, median of {args.repeats}, {args.threads} thread(s); the code takes the pool's logits "
          f"for a linear head up to POOL_LOGITS_RATIO = {heads.POOL_LOGITS_RATIO} batches")
    print("architecture precision pool/batch  gathered ms/step  pool ms/step  gathered/pool")
    try:
        generator = torch.Generator().manual_seed(0)
        for architecture in ("linear", "mlp"):
            for precision in ("float32", "float64"):
                spec = HeadSpec(architecture=architecture, hidden=HIDDEN, epochs=args.epochs, precision=precision)
                for ratio in args.pool_ratios:
                    pool = int(ratio * SET_SIZE)
                    features = torch.randn(pool, WIDTH, generator=generator, dtype=torch.float64)
                    labels = torch.randint(0, CLASSES, (pool,), generator=generator)
                    sets = torch.randint(0, pool, (N_HEADS, SET_SIZE), generator=generator)
                    times = {True: [], False: []}
                    for _ in range(args.repeats):
                        for from_pool in (False, True):
                            times[from_pool].append(timed_training(spec, features, labels, sets, from_pool))
                    gathered, from_pool = statistics.median(times[False]), statistics.median(times[True])
                    print(f"{architecture:12s} {precision:9s} {ratio:10g}  {1e3 * gathered:16.2f}  {1e3 * from_pool:12.2f}"
                          f"  {gathered / from_pool:13.2f}")
    finally:
        heads.logits_from_pool = rule


if __name__ == "__main__":
    main()
