#!/usr/bin/env python
"""What one DPAdapter fine-tuning's robust accuracy costs, per network, on the Fashion-MNIST
preset's sizes: `robust_accuracy` (every draw runs the whole noisy network) against
`SharedTrunkRobustness` (the noisy frozen trunk of each draw once per pre-trained network, then
only the top per fine-tuning). The preset measures it on 5000 test images with 10 draws for
3 kinds × 4 ε × 3 repeats = 36 fine-tunings.

    python benchmarks/shared_trunk_robustness.py --images 5000 --draws 10 --networks 12 --rounds 3

prints the medians over rounds (alternating the two) and checks the accuracies agree exactly.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from privssl.training.dpadapter import Classifier, downstream_model
from privssl.training.encoders import ConvEncoder, split_for_training
from privssl.training.sam import SharedTrunkRobustness, robust_accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--networks", type=int, default=12, help="fine-tunings of one pre-trained network")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    pretrained = Classifier(ConvEncoder(1, 28, width=128), 10).eval()
    x, y = torch.rand(args.images, 1, 28, 28), torch.randint(0, 10, (args.images,))
    models = [downstream_model(pretrained, 10, seed) for seed in range(args.networks)]
    times = {"robust_accuracy": [], "SharedTrunkRobustness": []}
    for _ in range(args.rounds):
        start = time.perf_counter()
        plain = [robust_accuracy(m, x, y, 0.05, args.draws, torch.Generator().manual_seed(1)) for m in models]
        times["robust_accuracy"].append(time.perf_counter() - start)
        start = time.perf_counter()
        shared = SharedTrunkRobustness(x, 0.05, args.draws, seed=1)
        tops = [split_for_training(m.encoder, "top") for m in models]
        cached = [shared.accuracy(trunk, torch.nn.Sequential(top, m.classifier), y)
                  for (trunk, top), m in zip(tops, models)]
        times["SharedTrunkRobustness"].append(time.perf_counter() - start)
        assert cached == plain, "the shared trunk's accuracies differ from robust_accuracy's"
    base, new = (statistics.median(times[k]) for k in times)
    print(f"{args.networks} networks, {args.images} images, {args.draws} draws, {args.rounds} rounds (medians): "
          f"robust_accuracy {base:.1f} s, SharedTrunkRobustness {new:.1f} s, ratio {new / base:.3f}; "
          f"accuracies identical")


if __name__ == "__main__":
    main()
