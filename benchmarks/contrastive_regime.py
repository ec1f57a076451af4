#!/usr/bin/env python
"""Sizing thesis Ch. 4's membership regime on the CPU (issue 32): where does the supervised target leak?

The thesis's claim "contrastive models leak membership less than supervised ones" can only be
tested on a supervised target that leaks (its NN attack 0.931 on CIFAR-100, 0.810 on STL-10). On
the Fashion-MNIST preset it does not: 0.507 [0.485, 0.530] on the binary garment/accessory task
with 1000 members (docs/claims.md, "The regime"). This script trains the preset's supervised
target (its encoder, width and `contrastive.supervised` schedule, `train_supervised` of the
workflow) and a shadow of it, per task and member count, and measures what the regime needs:

- train_accuracy, test_accuracy: the target on its members and on as many non-members, with
  Clopper–Pearson intervals; gap: their difference (the over-fitting);
- nn_accuracy: the thesis's NN attack (§4.2.2; `privssl.attacks.mia.train_attack_mlps` on the
  shadow's top-2 posteriors and correctness, the preset's `contrastive.attacks.membership`) on the
  target's members and non-members, with its exact Clopper–Pearson interval over those 2m
  decisions (one training: each record decided once);
- seconds: the wall time of one supervised training.

Tasks: a label map of the dataset (privssl.data.label_maps) or `class` (the dataset's classes).
The four parts (target in and out, shadow in and out) are disjoint draws of m from the whole
pool, seeded per (task, m) so that the two tasks see the same images.

    python benchmarks/contrastive_regime.py --config configs/fashion.yaml --dataset fashion_mnist \\
        --tasks garment_accessory class --members 250 500 1000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from privssl.attacks.contrastive_privacy import nn_inputs  # noqa: E402
from privssl.attacks.mia import AttackSpec, train_attack_mlps  # noqa: E402
from privssl.attacks.statistics import accuracy_interval  # noqa: E402
from privssl.data.images import load_pool  # noqa: E402
from privssl.data.label_maps import label_map  # noqa: E402
from privssl.training.contrastive_targets import TargetModel, TargetSpec, train_supervised  # noqa: E402
from privssl.training.encoders import unit_float  # noqa: E402

PARTS = ("target_in", "target_out", "shadow_in", "shadow_out")


def task_labels(dataset: str, task: str, classes: np.ndarray) -> tuple[np.ndarray, int]:
    if task == "class":
        return classes, int(classes.max()) + 1
    mapping = label_map(dataset, task)
    if mapping.class_to_task is None:
        raise SystemExit(f"task {task!r} reads labels per image; this script takes maps of the class only")
    return np.asarray(mapping.class_to_task)[classes], len(mapping.task_names)


def measure(pool, dataset: str, task: str, members: int, config: dict, seed: int) -> dict:
    classes = pool.labels.numpy()
    labels, n_classes = task_labels(dataset, task, classes)
    rng = np.random.default_rng([seed, members])
    draw = rng.permutation(np.flatnonzero(classes >= 0))[:4 * members].reshape(4, members)
    parts = {name: torch.tensor(index) for name, index in zip(PARTS, draw)}
    spec = TargetSpec.from_config(config["contrastive"]).supervised
    device = torch.device("cpu")
    models, seconds = {}, []
    for role in ("target", "shadow"):
        index = parts[f"{role}_in"]
        start = time.perf_counter()
        encoder, layer = train_supervised(config["simclr"]["encoder"], config["simclr"]["width"], pool.images[index],
                                          torch.tensor(labels[index.numpy()]), n_classes, spec,
                                          seed + (role == "shadow"), device)
        seconds.append(time.perf_counter() - start)
        models[role] = TargetModel("supervised", None, 0, encoder, layer)

    def scored(role: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        index = torch.cat([parts[f"{role}_in"], parts[f"{role}_out"]])
        probs = models[role].posteriors(unit_float(pool.images[index]))
        y = torch.tensor(labels[index.numpy()])
        return probs, y, torch.arange(len(index)) < members

    shadow_probs, shadow_y, shadow_member = scored("shadow")
    target_probs, target_y, target_member = scored("target")
    attack_spec = AttackSpec.from_config(config["contrastive"]["attacks"]["membership"])
    (attack,) = train_attack_mlps(nn_inputs(shadow_probs, shadow_y)[None], shadow_member, attack_spec, seed)
    with torch.no_grad():
        guess = torch.sigmoid(attack(nn_inputs(target_probs, target_y)).squeeze(-1)) > 0.5
    right = target_probs.argmax(-1) == target_y
    row = {"dataset": dataset, "task": task, "classes": n_classes, "members": members,
           "epochs": spec.epochs, "batch_size": spec.batch_size, "lr": spec.lr, "seconds": float(np.median(seconds))}
    for name, hits in (("train_accuracy", right[target_member]), ("test_accuracy", right[~target_member]),
                       ("nn_accuracy", guess == target_member)):
        value, lo, hi = accuracy_interval(int(hits.sum()), len(hits))
        row |= {name: value, f"{name}_lo": lo, f"{name}_hi": hi}
    row["gap"] = row["train_accuracy"] - row["test_accuracy"]
    row["nn_n"] = 2 * members
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--tasks", nargs="+", required=True, help="label maps of the dataset, or `class`")
    parser.add_argument("--members", type=int, nargs="+", required=True)
    parser.add_argument("--epochs", type=int, help="the supervised schedule's epochs (default: the config's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "contrastive_regime.csv"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = yaml.safe_load(Path(args.config).read_text())
    if args.epochs is not None:
        config["contrastive"]["supervised"]["epochs"] = args.epochs
    pool = load_pool(args.dataset, REPO / config.get("data_root", "data"))
    rows = []
    for members in args.members:
        for task in args.tasks:
            row = measure(pool, args.dataset, task, members, config, args.seed)
            print(f"{task:>18} m={members:5d}: train {row['train_accuracy']:.3f} test {row['test_accuracy']:.3f} "
                  f"NN {row['nn_accuracy']:.3f} [{row['nn_accuracy_lo']:.3f}, {row['nn_accuracy_hi']:.3f}] "
                  f"({row['seconds']:.0f} s per training)", flush=True)
            rows.append(row)
    out = Path(args.out)
    table = pd.DataFrame(rows)
    if out.exists():
        old = pd.read_csv(out)
        keys = ["dataset", "task", "members", "epochs"]
        table = pd.concat([old[~old.set_index(keys).index.isin(table.set_index(keys).index)], table])
    table.to_csv(out, index=False)


if __name__ == "__main__":
    main()
