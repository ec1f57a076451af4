#!/usr/bin/env python
"""Ablation: which part of the head's training makes its sampled sensitivity large (issue 31).

The ALM paper's Table 1 reports Δ1 = 0.017, Δ2 = 0.014 for its CIFAR-10 head (|d| = 10,000,
Algorithm 2 inside d); the workflow samples Δ1 in the hundreds (digits) to thousands
(Fashion-MNIST). This script retrains the head of one preset under one change at a time and
writes, per setting, what the sensitivity sampler and the release see:

- delta1_max, delta2_max: the largest 1- and 2-norm distance between the heads of m neighbouring
  pairs (the paper's statistic, Algorithm 2); delta1_median, delta2_median: their medians;
- coordinates: (delta1_max / delta2_max)², the number of weights a difference of that shape
  spreads over (1 for a difference in one weight, P for one spread evenly over P weights);
- rounding_distance: ‖ω₃₂ − ω₆₄‖₂, the head on d trained in float32 against float64, and
  rounding_relative, the same over ‖ω₆₄‖₂: how far rounding alone moves the trained head. A recipe
  where it is as large as delta2 is chaotic: Δ then measures the optimiser's amplification of
  any perturbation, not one record's influence;
- accuracy: the head on d, without noise, on the test split (test_size records);
  alm_accuracy_eps<E>: its mean test accuracy over --draws ALM releases at ε = E with
  s = delta1_max / E (Theorem 4.1): the draws are repeated measurements of the same test_size
  records, so the interval of either is at least a binomial one on test_size.

Samplers: `population` (the workflow's default: pairs of data sets of size |d| drawn from the
public reference pool, one record substituted) and `paper` (Algorithm 2: d∖{d_i} against
d∖{d_j}). Unless a setting names it, the population sampler is used, with --m pairs.

Features: results/<dataset>/finetune/features.pt of the preset (`snakemake
results/digits/finetune/features.pt`; for Fashion-MNIST with --configfile configs/fashion.yaml).
The preset's head (config `head`) is the base setting; every other row changes what its name
says. `--out` gets the rows of this dataset (rows of other datasets already there are kept).

    python benchmarks/sensitivity_ablation.py --config config.yaml --dataset digits
    python benchmarks/sensitivity_ablation.py --config configs/fashion.yaml --dataset fashion_mnist --m 12
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

import pandas as pd
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from privssl.release.mechanisms import Logistic  # noqa: E402
from privssl.release.sensitivity import pair_distances, population_pairs, sample_pairs  # noqa: E402
from privssl.training.heads import HeadSpec, accuracy, flatten, train_head, train_heads_on_sets, unflatten  # noqa: E402
from privssl.training.heads import parameter_shapes  # noqa: E402

EPS = (1.0, 10.0, 100.0, 1000.0, 10000.0)


def settings(base: HeadSpec) -> dict[str, tuple[HeadSpec, str, str]]:
    """name -> (head spec, feature scaling, sampler): the base and one change at a time, then the
    changes that make a training stable, together."""
    full = base.batch_size is None
    stable = dataclasses.replace(base, architecture="linear", optimizer="sgd", lr=0.1, momentum=0.0,
                                 weight_decay=1e-2, batch_size=None)
    rows = {
        "base (the preset's head)": (base, "none", "population"),
        "sampler: paper's Algorithm 2 inside d": (base, "none", "paper"),
        "precision: float32": (dataclasses.replace(base, precision="float32"), "none", "population"),
        "optimizer: sgd, lr 0.1": (dataclasses.replace(base, optimizer="sgd", lr=0.1, momentum=0.0), "none",
                                   "population"),
        "optimizer: sgd + momentum 0.9, lr 0.01": (dataclasses.replace(base, optimizer="sgd", lr=0.01, momentum=0.9),
                                                   "none", "population"),
        "adam lr 1e-3": (dataclasses.replace(base, lr=1e-3), "none", "population"),
        "adam lr 1e-4": (dataclasses.replace(base, lr=1e-4), "none", "population"),
        f"epochs: {max(1, base.epochs // 10)}": (dataclasses.replace(base, epochs=max(1, base.epochs // 10)), "none",
                                                 "population"),
        "weight decay 1e-2": (dataclasses.replace(base, weight_decay=1e-2), "none", "population"),
        ("batch: 50 (minibatch)" if full else "batch: full"): (
            dataclasses.replace(base, batch_size=50 if full else None), "none", "population"),
        "architecture: linear": (dataclasses.replace(base, architecture="linear"), "none", "population"),
        "features: standardised": (base, "standardise", "population"),
        "features: unit norm": (base, "unit_norm", "population"),
        "stable: linear, full-batch sgd lr 0.1, weight decay 1e-2, unit-norm features": (stable, "unit_norm",
                                                                                         "population"),
        "stable, paper's sampler": (stable, "unit_norm", "paper"),
        "stable, weight decay 1e-1": (dataclasses.replace(stable, weight_decay=0.1), "unit_norm", "population"),
        "stable, lr 1": (dataclasses.replace(stable, lr=1.0), "unit_norm", "population"),
        "stable, standardised features": (stable, "standardise", "population"),
        # the workflow's candidates (tuning.head): the features as the encoder gives them
        "stable, raw features": (stable, "none", "population"),
        "stable, raw features, lr 1": (dataclasses.replace(stable, lr=1.0), "none", "population"),
    }
    return rows


def scale(features: dict, how: str) -> dict:
    """The feature splits under `how`; standardisation uses the public reference pool's statistics."""
    keys = [k for k in features if isinstance(features[k], torch.Tensor) and features[k].ndim == 2]
    out = dict(features)
    if how == "standardise":
        mean, sd = features["reference"].mean(0), features["reference"].std(0).clamp(min=1e-6)
        for k in keys:
            out[k] = (features[k] - mean) / sd
    elif how == "unit_norm":
        for k in keys:
            out[k] = features[k] / features[k].norm(dim=1, keepdim=True).clamp(min=1e-12)
    return out


def distances(spec: HeadSpec, feats: dict, sampler: str, m: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The m pairs' 1- and 2-norm head distances under `sampler`."""
    n_classes = int(feats["n_classes"])
    d, d_labels = feats["finetune"], feats["finetune_labels"]
    if sampler == "paper":
        return pair_distances(spec, d, d_labels, n_classes, sample_pairs(d.shape[0], m, seed))
    pool, pool_labels = feats["reference"], feats["reference_labels"]
    sets, _ = population_pairs(pool.shape[0], d.shape[0], m, seed)
    heads = flatten(train_heads_on_sets(spec, pool, pool_labels, sets.reshape(-1, d.shape[0]), n_classes))
    diff = (heads[0::2] - heads[1::2]).double()
    return diff.abs().sum(1), diff.norm(dim=1)


def alm_accuracy(head: dict, spec: HeadSpec, feats: dict, delta1: float, eps: float, draws: int, seed: int) -> float:
    """Mean test accuracy of `draws` ALM releases of `head` at ε with s = delta1 / ε."""
    flat = flatten(head).double()
    noise = Logistic(None).sample((draws, flat.shape[1]), torch.Generator().manual_seed(seed))
    released = unflatten((flat + delta1 / eps * noise).to(spec.dtype),
                         parameter_shapes(spec, feats["test"].shape[1], int(feats["n_classes"])))
    return float(accuracy(released, feats["test"], feats["test_labels"]).mean())


def measure(name: str, spec: HeadSpec, how: str, sampler: str, features: dict, m: int, draws: int,
            seed: int) -> dict:
    feats = scale(features, how)
    start = time.perf_counter()
    l1, l2 = distances(spec, feats, sampler, m, seed)
    n_classes = int(feats["n_classes"])
    head = train_head(spec, feats["finetune"], feats["finetune_labels"], n_classes)
    other = dataclasses.replace(spec, precision="float32" if spec.precision == "float64" else "float64")
    twin = train_head(other, feats["finetune"], feats["finetune_labels"], n_classes)
    ours, theirs = flatten(head).double(), flatten(twin).double()
    rounding = float((ours - theirs).norm())
    delta1, delta2 = float(l1.max()), float(l2.max())
    row = {
        "setting": name, "sampler": sampler, "features": how, "m": m, "finetune_size": int(feats["finetune"].shape[0]),
        **{f"head_{k}": v for k, v in dataclasses.asdict(spec).items()},
        "parameters": int(ours.shape[1]),
        "delta1_max": delta1, "delta2_max": delta2,
        "delta1_median": float(l1.median()), "delta2_median": float(l2.median()),
        "coordinates": (delta1 / delta2) ** 2 if delta2 > 0 else math.nan,
        "weight_norm": float(ours.norm()),
        "rounding_distance": rounding, "rounding_relative": rounding / float(ours.norm()),
        "accuracy": float(accuracy(head, feats["test"], feats["test_labels"])[0]),
        "test_size": int(feats["test"].shape[0]),
    }
    for eps in EPS:
        row[f"alm_accuracy_eps{eps:g}"] = alm_accuracy(head, spec, feats, delta1, eps, draws, seed + 1)
    row["seconds"] = time.perf_counter() - start
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "config.yaml", help="the preset whose head is the base")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--features", type=Path, help="default: results/<dataset>/finetune/features.pt")
    parser.add_argument("--m", type=int, default=30, help="neighbouring pairs per setting")
    parser.add_argument("--draws", type=int, default=5, help="ALM releases per ε")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", nargs="*",
                        help="settings whose name starts with one of these (printed only: a full run writes the CSV)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "sensitivity_ablation.csv")
    args = parser.parse_args(argv)
    if args.m < 2:
        parser.error(f"--m {args.m}: needs at least 2 pairs")
    torch.set_num_threads(args.threads)
    config = yaml.safe_load(args.config.read_text())
    path = args.features or REPO / "results" / args.dataset / "finetune" / "features.pt"
    if not path.is_file():
        parser.error(f"{path}: no features; run `snakemake {path.relative_to(REPO)}` with --configfile {args.config}")
    features = torch.load(path)
    base = HeadSpec.from_config(config["head"])
    rows = []
    for name, (spec, how, sampler) in settings(base).items():
        if args.only and not any(name.startswith(prefix) for prefix in args.only):
            continue
        row = {"dataset": args.dataset, **measure(name, spec, how, sampler, features, args.m, args.draws, args.seed)}
        rows.append(row)
        print(f"{name:80s} Δ1 {row['delta1_max']:10.4g} Δ2 {row['delta2_max']:9.4g} coords {row['coordinates']:8.3g} "
              f"rounding {row['rounding_relative']:8.2g} acc {row['accuracy']:.3f} ALM@10 {row['alm_accuracy_eps10']:.3f} "
              f"@1000 {row['alm_accuracy_eps1000']:.3f} ({row['seconds']:.0f} s)", flush=True)
    table = pd.DataFrame(rows)
    if args.out.is_file() and not args.only:
        kept = pd.read_csv(args.out)
        table = pd.concat([kept[kept["dataset"] != args.dataset], table], ignore_index=True)
    if not args.only:
        table.to_csv(args.out, index=False, float_format="%.6g")
        print(f"wrote {args.out} ({statistics.median(t for t in table['seconds']):.0f} s per setting, median)")


if __name__ == "__main__":
    main()
