#!/usr/bin/env python
"""Inference on the CPU at each batch size: the networks that the attacks query most, at the
Fashion-MNIST preset's shapes, one torch thread, the malloc settings every job starts with
(privssl.job_env). Prints the median time per image of each (network, batch size), its ratio
against the largest batch, and whether every batch size gives the same outputs bit for bit.

Why: a batch's activations above glibc's mmap threshold (32 MiB, privssl.job_env) are mapped and
unmapped on every call, and they leave the caches; the attacks query the same networks hundreds of
times (the label-only attacks, A_DA's views, the robust accuracy's noisy networks).

    python benchmarks/inference_batch.py [--images 8192] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from privssl.job_env import MALLOC_SETTINGS  # noqa: E402

BATCHES = (64, 128, 256, 512, 1024, 2048)


def measure(images: int, rounds: int) -> None:
    import torch

    from privssl.training.encoders import ConvEncoder
    from privssl.training.wide_resnet import SmallCNN

    torch.set_num_threads(1)
    torch.manual_seed(0)
    networks = {"ConvEncoder width 128 (contrastive, DPCL, DPAdapter)": ConvEncoder(1, 28, 128).eval(),
                "SmallCNN width 16 (Semi-Leak)": SmallCNN(1, 10, 16).eval()}
    x = torch.rand(images, 1, 28, 28)
    for name, net in networks.items():
        times = {b: [] for b in BATCHES}
        outputs = {}
        with torch.no_grad():
            for _ in range(rounds):  # the batch sizes interleaved, so drift hits each alike
                for b in BATCHES:
                    start = time.perf_counter()
                    out = torch.cat([net(x[i:i + b]) for i in range(0, images, b)])
                    times[b].append(time.perf_counter() - start)
                    outputs[b] = out
        base = statistics.median(times[BATCHES[-1]])
        same = all(torch.equal(outputs[b], outputs[BATCHES[-1]]) for b in BATCHES)
        print(f"{name}: outputs bit-identical across batch sizes: {same}")
        for b in BATCHES:
            median = statistics.median(times[b])
            print(f"  batch {b:5d}: {median / images * 1e6:7.1f} us per image, "
                  f"{median / base:.2f}x batch {BATCHES[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        measure(args.images, args.rounds)
        return
    # glibc reads the malloc settings at start-up: measure in a process that starts with them
    env = {**os.environ, **MALLOC_SETTINGS, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, __file__, "--child", "--images", str(args.images), "--rounds", str(args.rounds)],
                   env=env, check=True)


if __name__ == "__main__":
    main()
