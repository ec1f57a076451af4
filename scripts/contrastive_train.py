#!/usr/bin/env python
"""Rule `contrastive_train`: every model of one role (the victim's targets or the attacker's
shadows) on that role's training set: per repeat the supervised model and the Talos models at
every λ (λ = 0: the contrastive model), each a base encoder and a classification layer. Each
contrastive training checkpoints every epoch and each finished supervised model is kept, under
--checkpoints, so a restarted job resumes; the folder is deleted once the outputs are written."""

import argparse
from pathlib import Path

import pandas as pd
import torch

from privssl.artefacts.contrastive import load_contrastive_splits
from privssl.artefacts.image import ENCODER
from privssl.artefacts.tables import load_tensor_file
from privssl.cli import device_argument, json_object, thread_count
from privssl.data.images import load_pool
from privssl.io import atomic_torch_save, atomic_write_csv, pick_device, script_logger
from privssl.training import checkpoints
from privssl.training.contrastive_targets import RoleJob, RoleSet, TargetSpec, train_targets
from privssl.training.simclr import SimCLRSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", required=True, help="splits.json of the contrastive_data rule")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--role", required=True, choices=("target", "shadow"))
    parser.add_argument("--public-encoder", required=True, help="the pretrain rule's encoder (public SimCLR)")
    parser.add_argument("--simclr", type=json_object, required=True, help="the `simclr` config section (JSON)")
    parser.add_argument("--contrastive", type=json_object, required=True, help="the `contrastive` section's repeats, fine_tune, supervised, classifier, talos (JSON)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--checkpoints", required=True,
                        help="folder of per-model checkpoints, kept until the job's outputs are written")
    parser.add_argument("--models", required=True, help="output: the models (.pt)")
    parser.add_argument("--history", required=True, help="output: per-epoch history of the contrastive trainings")
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parser.parse_args()
    log = script_logger("contrastive_train")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    spec = TargetSpec.from_config(args.contrastive)
    log.info("device %s, role %s, %s", device, args.role, spec)
    splits = load_contrastive_splits(args.splits)
    public = load_tensor_file(args.public_encoder, ENCODER)
    pool = load_pool(splits["dataset"], args.data_root, recorded=splits["pool"])
    train = f"{args.role}_train"
    images = pool.images[torch.tensor(splits["splits"][train])]
    task, attribute = torch.tensor(splits["task"][train]), torch.tensor(splits["attribute"][train])
    separate = splits["membership_task_map"] != splits["task_map"]  # else the task's models serve membership too
    membership = torch.tensor(splits["membership_task"][train]) if separate else None
    data = RoleSet(images, task, splits["n_task"], attribute, splits["n_attribute"], membership,
                   splits["n_membership_task"] if separate else None)
    models, history = train_targets(data, public, SimCLRSpec.from_config(args.simclr), spec,
                                    args.contrastive["repeats"],
                                    RoleJob(args.seed, device, Path(args.checkpoints), log.info,
                                            checkpoints.script_code(__file__)))
    atomic_write_csv(pd.DataFrame(history), args.history)
    atomic_torch_save({"role": args.role, "dataset": splits["dataset"], "encoder": public["encoder"],
                       "width": public["width"], "in_channels": public["in_channels"],
                       "image_size": public["image_size"], "n_task": splits["n_task"],
                       "membership_task": splits["membership_task_map"],
                       "n_membership_task": splits["n_membership_task"], "models": models}, args.models)
    checkpoints.discard(args.checkpoints)  # done: a later run (--forcerun) trains from scratch


if __name__ == "__main__":
    main()
