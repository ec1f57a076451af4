#!/usr/bin/env python
"""Where a semi-supervised training step's time goes on this machine, and how far it is from the
machine's float32 convolution throughput (issue 32: is speed a lever for Thesis Ch. 3's regime?).

One step of the Fashion-MNIST preset's FixMatch/FlexMatch/UDA targets (`semileak.network`: the
SmallCNN of privssl.training.wide_resnet at the preset's width; B = 16 labelled and μB = 112
unlabelled images seen twice: 240 images of 28 × 28 per forward pass), in parts:

- weak and strong augmentation of the batch (privssl.training.augment, whole batches);
- forward + backward + SGD step of the network on all 240 images;
- the step as `semi_supervised.train` runs it (`_forward_views`): the three views in one forward
  (a network with batch statistics or dropout), or the weak views without a graph, the loss on the
  labelled and strong images only, as the weak views give detached targets; and the latter with
  the weak views in the channels_last strides a permuted single-channel gather has (what `weak`
  returned before 2026-12-04: GroupNorm is slow in that layout);
- the same with the weights and images in channels_last layout, and with oneDNN (mkldnn) off
  (PyTorch's native convolutions): the two layouts/kernels a CPU run could choose;
- the forward pass alone, whose FLOPs are counted from the layers (2 · k² · C_in · C_out · H_out · W_out
  per convolution, 2 · in · out per linear layer; backward ≈ 2 × forward).

Beside them, the machine's float32 convolution throughput: a 64 → 64 channel 3 × 3 convolution on
64 images of 32 × 32 (large enough for oneDNN's best kernels), and a 2048² matrix product. Each
figure is the median of `--repeats` timings, in the same process, at `--threads` intra-op threads.

    python benchmarks/training_throughput.py --threads 2 --widths 16 32
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from privssl.training.augment import AugmentSpec, strong, weak  # noqa: E402
from privssl.training.semi_supervised import _forward_views  # noqa: E402
from privssl.training.wide_resnet import seeded_network  # noqa: E402

PRESET_AUGMENT = {"padding": 2, "horizontal_flip": True, "randaugment": {"ops": 2, "magnitude": 10, "images_per_draw": 8}}


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: oneDNN picks its kernels on the first call
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def forward_flops(net: nn.Module, images: torch.Tensor) -> float:
    """FLOPs of one forward pass, counted from the convolution and linear layers' shapes."""
    total = 0.0

    def conv_hook(module, inputs, output):
        nonlocal total
        k = module.kernel_size[0] * module.kernel_size[1]
        total += 2 * k * module.in_channels // module.groups * output.numel()

    def linear_hook(module, inputs, output):
        nonlocal total
        total += 2 * module.in_features * output.numel()

    hooks = [m.register_forward_hook(conv_hook) for m in net.modules() if isinstance(m, nn.Conv2d)]
    hooks += [m.register_forward_hook(linear_hook) for m in net.modules() if isinstance(m, nn.Linear)]
    with torch.no_grad():
        net(images)
    for hook in hooks:
        hook.remove()
    return total


def step_parts(width: int, repeats: int) -> dict:
    augment = AugmentSpec.from_config(PRESET_AUGMENT)
    generator = torch.Generator().manual_seed(0)
    labelled, unlabelled = torch.rand(16, 1, 28, 28), torch.rand(112, 1, 28, 28)
    batch = torch.cat([weak(labelled, augment, generator), weak(unlabelled, augment, generator),
                       strong(unlabelled, augment, generator)])
    targets = torch.zeros(len(batch), dtype=torch.long)
    net = seeded_network(0, "cnn", 1, 10, width)
    optimiser = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)

    def train_step(model, images):
        loss = F.cross_entropy(model(images), targets)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()

    views = batch.split([16, 112, 112])

    # the weak views as `augment._crop_and_flip` returned them before 2026-12-04: a single-channel
    # batch gathered through a permute, whose channels_last strides pass `.contiguous()`
    permuted = (views[0], views[1].reshape(len(views[1]), 28, 28, 1).permute(0, 3, 1, 2), views[2])
    assert permuted[1].is_contiguous() and permuted[1].stride() != views[1].stride()

    def views_step(joint: bool, views=views) -> None:
        logits_l, _, logits_s = _forward_views(net, *views, joint, torch.device("cpu"))
        loss = F.cross_entropy(logits_l, targets[:16]) + F.cross_entropy(logits_s, targets[:112])
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()

    out = {"width": width, "images_per_step": len(batch)}
    out["views_joint_s"] = median_seconds(lambda: views_step(True), repeats)
    out["views_split_s"] = median_seconds(lambda: views_step(False), repeats)
    out["views_split_permuted_s"] = median_seconds(lambda: views_step(False, permuted), repeats)
    out["weak_s"] = median_seconds(lambda: (weak(labelled, augment, generator), weak(unlabelled, augment, generator)),
                                   repeats)
    out["strong_s"] = median_seconds(lambda: strong(unlabelled, augment, generator), repeats)
    out["train_s"] = median_seconds(lambda: train_step(net, batch), repeats)
    with torch.no_grad():
        out["forward_s"] = median_seconds(lambda: net(batch), repeats)
    torch.backends.mkldnn.enabled = False
    out["train_native_s"] = median_seconds(lambda: train_step(net, batch), repeats)
    torch.backends.mkldnn.enabled = True
    last = net.to(memory_format=torch.channels_last)
    batch_last = batch.contiguous(memory_format=torch.channels_last)
    out["train_channels_last_s"] = median_seconds(lambda: train_step(last, batch_last), repeats)
    flops = forward_flops(net, batch)
    out["forward_gflops"] = flops / out["forward_s"] / 1e9
    out["train_gflops"] = 3 * flops / out["train_s"] / 1e9  # backward ≈ twice the forward
    out["step_s"] = out["weak_s"] + out["strong_s"] + out["train_s"]
    out["images_per_s"] = len(batch) / out["step_s"]
    return out


def machine_peaks(repeats: int) -> dict:
    conv, images = nn.Conv2d(64, 64, 3, padding=1), torch.rand(64, 64, 32, 32)
    with torch.no_grad():
        conv_s = median_seconds(lambda: conv(images), repeats)
    a = torch.rand(2048, 2048)
    matmul_s = median_seconds(lambda: a @ a, repeats)
    return {"conv_gflops": 2 * 9 * 64 * 64 * 64 * 32 * 32 / conv_s / 1e9, "matmul_gflops": 2 * 2048 ** 3 / matmul_s / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--widths", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    peaks = machine_peaks(args.repeats)
    print(f"threads {args.threads}: float32 conv {peaks['conv_gflops']:.0f} GFLOP/s, matmul "
          f"{peaks['matmul_gflops']:.0f} GFLOP/s (medians of {args.repeats})")
    for width in args.widths:
        r = step_parts(width, args.repeats)
        print(f"width {width}: step {1e3 * r['step_s']:.1f} ms = weak {1e3 * r['weak_s']:.1f} + strong "
              f"{1e3 * r['strong_s']:.1f} + train {1e3 * r['train_s']:.1f} ms; {r['images_per_s']:.0f} images/s; "
              f"train {r['train_gflops']:.0f} GFLOP/s = {r['train_gflops'] / peaks['conv_gflops']:.2f} of the conv "
              f"peak; channels_last {r['train_channels_last_s'] / r['train_s']:.2f}×, oneDNN off "
              f"{r['train_native_s'] / r['train_s']:.2f}× the train time; the train step's views: one forward "
              f"{1e3 * r['views_joint_s']:.1f} ms, weak views without a graph {1e3 * r['views_split_s']:.1f} ms "
              f"({r['views_split_s'] / r['views_joint_s']:.2f}×), the weak views in the permuted layout "
              f"{1e3 * r['views_split_permuted_s']:.1f} ms ({r['views_split_permuted_s'] / r['views_split_s']:.2f}× "
              "the standard layout's)")


if __name__ == "__main__":
    main()
