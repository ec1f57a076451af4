#!/usr/bin/env python
"""Rule `semileak_train`: one target kind of the semi-supervised branch (thesis Ch. 3) for one
role, the victim's target or the attacker's shadow, on that role's train part: FixMatch,
FlexMatch or UDA (its labelled images with their labels, the rest unlabelled), the supervised
reference (every image of the part with its label), or FixMatch by DP-SGD at every ε of
`defences.dpsgd.eps` (σ calibrated by the accountant). The EMA model is kept at every
checkpoint step; the training state is saved there too, so a restarted job resumes."""

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Callable

import pandas as pd
import torch

from privssl.artefacts.semileak import load_semileak_splits
from privssl.cli import device_argument, json_object, thread_count
from privssl.data.images import load_pool
from privssl.io import InputError, atomic_torch_save, atomic_write_csv, pick_device, script_logger
from privssl.training import checkpoints
from privssl.training.augment import AugmentSpec
from privssl.training.encoders import unit_float
from privssl.training.semi_supervised import TrainingSet, TrainSpec, checkpoint_fingerprint, train
from privssl.training.semi_supervised_private import PrivateSpec, sampling_rate, train_private
from privssl.training.semi_supervised_spec import DPSGD_TARGET, SUPERVISED, TARGETS
from privssl.training.simclr import state_digest
from privssl.training.wide_resnet import seeded_network

# the history's statistics are means over the training batches, DP-SGD's before its noise
NOT_PRIVATE = "not private: computed on the training set without noise; covered by no privacy claim"


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", required=True, help="splits.json of the semileak_data rule")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--role", required=True, choices=("target", "shadow"))
    parser.add_argument("--target", required=True, choices=TARGETS)
    parser.add_argument("--semileak", type=json_object, required=True,
                        help="the `semileak` section's network, augmentation, train and defences (JSON)")
    parser.add_argument("--delta", type=float, required=True, help="δ of the DP-SGD target (protect.delta)")
    parser.add_argument("--accountant", required=True, help="DP-SGD accountant (dpsgd.accountant)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--checkpoints", required=True,
                        help="folder of the resumable training states, deleted once the outputs are written")
    parser.add_argument("--models", required=True, help="output: the EMA models at every checkpoint step (.pt)")
    parser.add_argument("--history", required=True,
                        help="output: losses and mask rate per checkpoint; not private (computed on the training "
                             "set without noise)")
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    return parser.parse_args()


def training_set(splits: dict, pool, role: str, target: str) -> TrainingSet:
    """The role's train part as the target kind trains on it: its labelled images with their labels
    and the rest unlabelled, or, for the supervised reference, every image with its label."""
    part = torch.tensor(splits["splits"][f"{role}_train"])
    if target == SUPERVISED:
        labelled, unlabelled = part, part[:0]
    else:
        labelled = torch.tensor(splits["labelled"][f"{role}_train"])
        unlabelled = part[~torch.isin(part, labelled)]
    images = unit_float(pool.images)
    # each record's identity is its index in the pool, which no other record's presence changes:
    # DP-SGD keys its sampling and augmentation to it
    return TrainingSet(images[labelled], pool.labels[labelled], images[unlabelled], splits["n_classes"], labelled,
                       unlabelled)


def canonical(states: dict) -> dict:
    """The states with one set of key objects: pickle stores a string once per object, so states
    read back from a checkpoint (new key objects) would otherwise give other file bytes than
    states trained in this process."""
    names = {name: name for name in next(iter(states.values()))}
    return {int(step): {names[k]: v for k, v in state.items()} for step, state in sorted(states.items())}


def train_dpsgd(args: argparse.Namespace, dp: dict, network: dict, data: TrainingSet, spec: TrainSpec,
                augment: AugmentSpec, device: torch.device, checkpoint_dir: Path, fingerprint: Callable[..., dict],
                log: Callable[[str], None]) -> tuple[TrainSpec, list, list]:
    """FixMatch by DP-SGD at every ε of `defences.dpsgd.eps`, σ calibrated by the accountant: (the
    training's spec, of the released model only; the models; the history rows)."""
    from privssl.accounting.dpsgd import calibrate_grid  # here only: Opacus' import takes a second

    spec = replace(spec, steps=dp["steps"], checkpoint_every=dp["steps"])  # the released (last) model only
    labelled, unlabelled = data.labelled_ids, data.unlabelled_ids
    rate = sampling_rate(spec, len(labelled), len(unlabelled))
    ids = state_digest({"labelled": labelled, "unlabelled": unlabelled})  # they key the batches and views
    found, unreachable = calibrate_grid(dp["eps"], args.delta, rate, spec.steps, args.accountant)
    if unreachable:  # before any training: a grid with a hole would be refused by the attack rule anyway
        raise InputError("; ".join(f"ε = {miss.eps:g} cannot be reached: {miss.reason}" for miss in unreachable)
                         + " (allowed: the ε of semileak.defences.dpsgd.eps the accountant reaches)")
    models, history = [], []
    for calibration in found:
        private = PrivateSpec(calibration.noise_multiplier, dp["clip_norm"])
        net = seeded_network(args.seed, network["architecture"], data.labelled.shape[1], data.n_classes,
                             network["width"], private=True)
        # the clip norm is in `private`: a checkpoint trained under another C is not resumed
        kept, rows = train_private(net, data, spec, private, augment, args.seed, device,
                                   checkpoint_dir / f"eps{calibration.eps:g}.pt",
                                   fingerprint(spec, calibration=calibration, private=private, ids=ids), log)
        models.append({"eps": calibration.eps, "noise_multiplier": calibration.noise_multiplier,
                       "eps_spent": calibration.eps_at_sigma, "delta": args.delta, "sample_rate": rate,
                       "accountant": args.accountant, "clip_norm": dp["clip_norm"], "states": canonical(kept)})
        history += [{"eps": calibration.eps, **row} for row in rows]
    return spec, models, history


def train_non_private(args: argparse.Namespace, network: dict, data: TrainingSet, spec: TrainSpec,
                      augment: AugmentSpec, device: torch.device, checkpoint_dir: Path,
                      fingerprint: Callable[..., dict], log: Callable[[str], None]) -> tuple[list, list]:
    """FixMatch, FlexMatch, UDA or the supervised reference, once: (the models, the history rows)."""
    net = seeded_network(args.seed, network["architecture"], data.labelled.shape[1], data.n_classes, network["width"])
    kept, rows = train(args.target, net, data, spec, augment, args.seed, device, checkpoint_dir / "run.pt",
                       fingerprint(spec), log)
    return [{"eps": None, "states": canonical(kept)}], [{"eps": float("nan"), **row} for row in rows]


def write_outputs(args: argparse.Namespace, dataset: str, network: dict, data: TrainingSet, steps: int, models: list,
                  history: list) -> None:
    """The history (not private) and the EMA models of every ε at every checkpoint step."""
    atomic_write_csv(pd.DataFrame([{"role": args.role, "target": args.target, **row, "privacy": NOT_PRIVATE}
                                   for row in history]), args.history)
    atomic_torch_save({"role": args.role, "target": args.target, "dataset": dataset,
                       "architecture": network["architecture"], "width": network["width"],
                       "in_channels": data.labelled.shape[1], "n_classes": data.n_classes, "steps": steps,
                       "models": models}, args.models)


def main() -> None:
    args = parse_arguments()
    log = script_logger("semileak_train")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    cfg = args.semileak
    spec, augment = TrainSpec.from_config(cfg["train"]), AugmentSpec.from_config(cfg["augmentation"])
    network = cfg["network"]
    splits = load_semileak_splits(args.splits)
    pool = load_pool(splits["dataset"], args.data_root, recorded=splits["pool"])
    data = training_set(splits, pool, args.role, args.target)
    digest = state_digest({"labelled": data.labelled, "unlabelled": data.unlabelled, "labels": data.labels.float()})
    checkpoint_dir = Path(args.checkpoints)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    log.info("device %s, %s %s: %d labelled, %d unlabelled, %s", device, args.role, args.target,
             len(data.labelled_ids), len(data.unlabelled_ids), spec)
    code = checkpoints.script_code(__file__)

    def fingerprint(spec: TrainSpec, **private) -> dict[str, str]:
        return checkpoint_fingerprint(args.target, spec, augment, network, args.seed, device, digest, code, **private)

    if args.target == DPSGD_TARGET:
        spec, models, history = train_dpsgd(args, cfg["defences"]["dpsgd"], network, data, spec, augment, device,
                                            checkpoint_dir, fingerprint, log.info)
    else:
        models, history = train_non_private(args, network, data, spec, augment, device, checkpoint_dir, fingerprint,
                                            log.info)
    write_outputs(args, splits["dataset"], network, data, spec.steps, models, history)
    checkpoints.discard(checkpoint_dir)  # done: a later run (--forcerun) trains from scratch


if __name__ == "__main__":
    main()
