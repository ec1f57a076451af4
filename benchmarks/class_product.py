#!/usr/bin/env python
"""Benchmark: a head's few-class products, plain (torch.bmm's autograd) against
`privssl.training.heads.class_product` (the same products computed transposed).

A GEMM whose output has C = 10 columns (the classes) runs far below the speed of its transpose;
`class_product` computes x @ w as (w^T @ x^T)^T and the weight's gradient as (dy^T @ x)^T. This
times one training step's products of each kind of head the sampler and the tuning train, forward
and backward, the two ways alternating, medians of --rounds, one thread (as the rules run):

- the MLP's second layer at the Fashion-MNIST preset's shapes: 80 heads (2 × chunk_size 40),
  batches of 100, hidden 256, then the ReLU's backward it feeds (the layout of x's gradient
  matters to it);
- a linear head on its own gathered rows (the preset's linear head by Adam in batches of 100:
  80 heads × 100 rows × 128 features);
- the default's MLP (hidden 128, full batch of |d| = 150, 128 heads), in float32 and float64.

It also checks that both ways give the same outputs and gradients up to rounding.

    python benchmarks/class_product.py [--rounds 15] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from privssl.training.heads import class_product

SHAPES = {  # name: (heads, rows, inner width, classes, the inner activations come from a ReLU)
    "preset MLP, 2nd layer": (80, 100, 256, 10, True),
    "preset linear, gathered rows": (80, 100, 128, 10, False),
    "default MLP, 2nd layer": (128, 150, 128, 10, True),
}


def step(product, x_leaf: torch.Tensor, w: torch.Tensor, upstream: torch.Tensor, relu: bool):
    """One forward and backward through the product (after a ReLU where the MLP has one). The
    gradient reaches the product as in training: the cross-entropy reads the logits as (B, C, N),
    so `upstream` is (B, C, N) and the product's gradient its transposed view."""
    x = torch.relu(x_leaf) if relu else x_leaf
    out = product(x, w)
    return torch.autograd.grad((out.transpose(1, 2) * upstream).sum(), (x_leaf, w) if relu else (w,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"median of {args.rounds} rounds, {args.threads} thread(s); ms per forward + backward")
    print(f"{'shape':30s} {'precision':9s} {'plain bmm':>10s} {'class_product':>14s} {'ratio':>6s}  max rel. diff")
    generator = torch.Generator().manual_seed(0)
    for name, (heads, rows, width, classes, relu) in SHAPES.items():
        for dtype in (torch.float32, torch.float64):
            x = torch.randn(heads, rows, width, generator=generator, dtype=dtype).requires_grad_(relu)
            w = torch.randn(heads, width, classes, generator=generator, dtype=dtype).requires_grad_()
            upstream = torch.randn(heads, classes, rows, generator=generator, dtype=dtype)
            ways = {"plain": torch.bmm, "class_product": class_product}
            results = {k: step(f, x, w, upstream, relu) for k, f in ways.items()}
            diff = max(float((a - b).abs().max() / a.abs().max()) for a, b in zip(*results.values()))
            times = {k: [] for k in ways}
            for _ in range(args.rounds):
                for k, f in ways.items():
                    start = time.perf_counter()
                    step(f, x, w, upstream, relu)
                    times[k].append(time.perf_counter() - start)
            plain, ours = statistics.median(times["plain"]), statistics.median(times["class_product"])
            print(f"{name:30s} {str(dtype).removeprefix('torch.'):9s} {1e3 * plain:10.2f} {1e3 * ours:14.2f} "
                  f"{plain / ours:6.2f}  {diff:.1e}")


if __name__ == "__main__":
    main()
