#!/usr/bin/env python
"""Rule `encode`: r = NN_θ(x) for every labelled split, once, with the frozen encoder.
Writes one file of features and labels per split; every later stage reads only this file."""

import argparse

import torch

from privssl.artefacts.image import load_encoder, load_image_splits
from privssl.cli import device_argument, thread_count
from privssl.data.images import load_pool
from privssl.data.splits import LABELLED_SPLITS
from privssl.io import atomic_torch_save, pick_device, script_logger
from privssl.training.encoders import encode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", required=True)
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--encoder", required=True)
    parser.add_argument("--out", required=True, help="features file (.pt)")
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parser.parse_args()
    log = script_logger("encode")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    splits = load_image_splits(args.splits)
    pool = load_pool(splits["dataset"], args.data_root, recorded=splits["pool"])
    encoder = load_encoder(args.encoder, device)
    out = {"n_classes": pool.n_classes}
    for name in LABELLED_SPLITS:
        index = torch.tensor(splits["splits"][name], dtype=torch.long)
        out[name] = encode(encoder, pool.images[index], device)
        out[f"{name}_labels"] = pool.labels[index]
        log.info("device %s: %s features %s", device, name, tuple(out[name].shape))
    atomic_torch_save(out, args.out)


if __name__ == "__main__":
    main()
