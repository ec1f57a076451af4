#!/usr/bin/env python
"""Benchmark: per-example gradients of the SimCLR network, vectorised against a loop.

The network is the default config's SimCLR (encoder `convnet` of width 128 plus its projection
head), float32, on random images of the digits shape (1×8×8) and of the CIFAR shape (3×32×32).
A batch of B images gives 2B views (the config's augmentation); each view's gradient is the VJP
of its projection with the NT-Xent cotangent dL/dz_b of the whole batch (the config's
temperature and negatives), the per-view piece that DPCL clips.

- vectorised: `privssl.training.per_example.per_example_vjp` (torch.func vmap over grad), --chunk-size
  rows at a time (default: all);
- loop: one forward and `torch.autograd.grad` per view, the direct implementation.

After one untimed warm-up of each, vectorised and loop runs alternate, --repeats times each
(medians reported; "batched" is vectorised and "sequential" the loop in the progress lines), in
one process with --threads threads; the ratio is loop / vectorised. Both must agree: the largest absolute
difference of any per-view gradient entry is printed, and relative to the largest entry it must
be below --tolerance. OMP_WAIT_POLICY=PASSIVE is advisable on a shared machine (see
benchmarks/sensitivity.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

import torch
import yaml
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from sensitivity import timed_alternating  # noqa: E402

from privssl.io import pick_device  # noqa: E402
from privssl.training.per_example import per_example_vjp  # noqa: E402
from privssl.training.simclr import SimCLR, SimCLRSpec, nt_xent  # noqa: E402

SHAPES = {"digits": (1, 8), "cifar": (3, 32)}  # (channels, side)


def views_and_cotangent(spec: SimCLRSpec, network: nn.Module, channels: int, side: int, batch: int,
                        seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """2B augmented views of B random images and G = dL/dZ of the batch's NT-Xent loss."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(batch, channels, side, side, generator=generator)
    views = torch.cat([spec.augmentation(images, generator), spec.augmentation(images, generator)]).to(device)
    z = network(views)
    loss, _ = nt_xent(z[:batch], z[batch:], spec.temperature, spec.negatives)
    return views, torch.autograd.grad(loss, z)[0]


def loop_vjp(network: nn.Module, views: torch.Tensor, cotangent: torch.Tensor) -> dict[str, torch.Tensor]:
    params = dict(network.named_parameters())
    rows = [torch.autograd.grad((network(v[None])[0] * c).sum(), list(params.values()))
            for v, c in zip(views, cotangent, strict=True)]
    return {k: torch.stack([row[i] for row in rows]) for i, k in enumerate(params)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="digits,cifar", help=f"comma-separated: {', '.join(SHAPES)}")
    parser.add_argument("--batch-sizes", default="32,128", help="images per batch (2 views each)")
    parser.add_argument("--chunk-size", type=int, default=None, help="vmap rows at a time (default: all)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=1e-4, help="max |difference| / max |gradient|")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    spec = SimCLRSpec.from_config(yaml.safe_load((REPO / "config.yaml").read_text())["simclr"])
    print(f"device {device}, {args.threads} threads, torch {torch.__version__}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}, load average {os.getloadavg()[0]:.2f}")
    print(f"SimCLR {spec.encoder} width {spec.width} + projection head, float32; NT-Xent cotangent "
          f"(temperature {spec.temperature:g}, {spec.negatives}); medians of {args.repeats} runs, "
          f"chunk size {args.chunk_size or 'all'}")

    rows = []
    for name in args.datasets.split(","):
        channels, side = SHAPES[name]
        torch.manual_seed(args.seed)
        simclr = SimCLR(spec, channels, side)
        network = nn.Sequential(simclr.encoder, simclr.projector).to(device)
        n_params = sum(p.numel() for p in network.parameters())
        for batch in map(int, args.batch_sizes.split(",")):
            views, cotangent = views_and_cotangent(spec, network, channels, side, batch, args.seed, device)
            vectorised = partial(per_example_vjp, network, views, cotangent, args.chunk_size)
            loop = partial(loop_vjp, network, views, cotangent)
            vectorised(), loop()  # warm-up, untimed: the first vmap call of a shape costs ~1 s more
            (v_med, _, v_grads), (l_med, _, l_grads) = timed_alternating(vectorised, loop, args.repeats, device,
                                                                         f"{name} B={batch}")
            diff = max(float((v_grads[k] - l_grads[k]).abs().max()) for k in l_grads)
            scale = max(float(g.abs().max()) for g in l_grads.values())
            rows.append((name, f"{channels}x{side}x{side}", n_params, batch, 2 * batch, v_med, l_med, diff,
                         diff / scale))

    print()
    header = (f"{'data':<7} {'image':<8} {'params':>7} {'B':>4} {'views':>5} {'vectorised s':>12} {'loop s':>8} "
              f"{'loop/vec':>8} {'max|diff|':>10} {'rel diff':>9}")
    print(header)
    print("-" * len(header))
    for name, image, n_params, batch, views, v_med, l_med, diff, rel in rows:
        print(f"{name:<7} {image:<8} {n_params:>7} {batch:>4} {views:>5} {v_med:>12.3f} {l_med:>8.3f} "
              f"{l_med / v_med:>7.2f}x {diff:>10.2e} {rel:>9.2e}")
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end; other processes on the machine inflate the times")
    worst = max(row[-1] for row in rows)
    if not worst <= args.tolerance:
        sys.exit(f"vectorised and loop per-example gradients differ by {worst:.2e} (relative) > {args.tolerance:g}")


if __name__ == "__main__":
    main()
