#!/usr/bin/env python
"""Rule `contrastive_attack`: membership inference (NN, metric, label-only) and attribute
inference against every target model of thesis Ch. 4, each fitted on the shadow model trained
the same way (adaptive for Talos); every metric with its 95 % interval and sample size."""

import argparse

import pandas as pd
import torch

from privssl.artefacts.contrastive import (
    contrastive_guess_table,
    contrastive_score_table,
    load_contrastive_models,
    load_contrastive_splits,
)
from privssl.attacks.contrastive_privacy import AttackSettings, Split, evaluate, pair_models
from privssl.cli import device_argument, json_object, thread_count
from privssl.data.images import load_pool
from privssl.io import atomic_write_csv, atomic_write_parquet, pick_device, script_logger
from privssl.training.contrastive_targets import load_models
from privssl.training.encoders import unit_float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", required=True, help="splits.json of the contrastive_data rule")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--targets", required=True, help="the target models (contrastive_train, role target)")
    parser.add_argument("--shadows", required=True, help="the shadow models (contrastive_train, role shadow)")
    parser.add_argument("--contrastive", type=json_object, required=True, help="the `contrastive` section's `attacks` (JSON)")
    parser.add_argument("--fpr", type=float, nargs="+", required=True, help="FPR levels of the TPR columns")
    parser.add_argument("--bootstrap", type=int, required=True, help="resamples of the AUC interval")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True, help="output: metrics.csv")
    parser.add_argument("--scores", required=True,
                        help="output: scores.parquet, every membership row's per-record scores "
                             "(artefacts.contrastive.CONTRASTIVE_SCORES)")
    parser.add_argument("--guesses", required=True,
                        help="output: attribute_guesses.parquet, every attribute row's per-record guesses "
                             "(artefacts.contrastive.CONTRASTIVE_GUESSES)")
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parser.parse_args()
    log = script_logger("contrastive_attack")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    splits = load_contrastive_splits(args.splits)
    targets, shadows = (load_contrastive_models(path, role, splits["dataset"])
                        for path, role in ((args.targets, "target"), (args.shadows, "shadow")))
    settings = AttackSettings.from_config(args.contrastive["attacks"], args.fpr, args.bootstrap)
    log.info("device %s, %s", device, settings)
    pool = load_pool(splits["dataset"], args.data_root, recorded=splits["pool"])
    data = {name: Split(unit_float(pool.images[torch.tensor(index)]), torch.tensor(splits["task"][name]),
                        torch.tensor(splits["attribute"][name]), torch.tensor(splits["membership_task"][name]))
            for name, index in splits["splits"].items()}
    pairs = pair_models(load_models(targets, device), load_models(shadows, device))
    rows, scored, guessed = evaluate(splits["dataset"], pairs, data, splits["n_attribute"], settings, args.seed,
                                     log.info, membership_task=splits["membership_task_map"] != splits["task_map"])
    atomic_write_csv(pd.DataFrame(rows), args.out)
    atomic_write_parquet(contrastive_score_table(scored, splits["splits"]), args.scores)
    atomic_write_parquet(contrastive_guess_table(guessed, splits["splits"], splits["attribute"]["target_train"]),
                         args.guesses)


if __name__ == "__main__":
    main()
