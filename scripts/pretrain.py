#!/usr/bin/env python
"""Rule `pretrain`: SimCLR on the public split D. Checkpoints after every epoch and resumes
from the checkpoint when restarted; writes the encoder and the per-epoch history, then deletes
the checkpoint."""

import argparse
from pathlib import Path

import pandas as pd
import torch

from privssl.artefacts.image import load_image_splits
from privssl.cli import device_argument, json_object, thread_count
from privssl.data.images import load_pool
from privssl.io import atomic_torch_save, atomic_write_csv, pick_device, script_logger
from privssl.training import checkpoints
from privssl.training.simclr import SimCLRSpec, pretrain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", required=True, help="splits JSON of the data rule")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--simclr", type=json_object, default={}, help="JSON object of SimCLRSpec fields")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", required=True,
                        help="resumable checkpoint, deleted once the outputs are written")
    parser.add_argument("--encoder", required=True, help="output: encoder state and its spec")
    parser.add_argument("--history", required=True, help="output: CSV of loss and contrastive accuracy")
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parser.parse_args()
    log = script_logger("pretrain")
    spec = SimCLRSpec.from_config(args.simclr)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    log.info("device %s, spec %s", device, spec)
    splits = load_image_splits(args.splits)
    pool = load_pool(splits["dataset"], args.data_root, recorded=splits["pool"])
    images = pool.images[torch.tensor(splits["splits"]["pretrain"])]
    model, history = pretrain(spec, images, args.seed, device, Path(args.checkpoint), log.info,
                              code=checkpoints.script_code(__file__))
    atomic_write_csv(pd.DataFrame(history), args.history)
    atomic_torch_save({"state": model.encoder.state_dict(), "encoder": spec.encoder, "width": spec.width,
                       "in_channels": images.shape[1], "image_size": images.shape[-1]}, args.encoder)
    checkpoints.discard(args.checkpoint)  # done: a later run (--forcerun) trains from scratch


if __name__ == "__main__":
    main()
