#!/usr/bin/env python
"""Rule `protect_dpsgd`: the DP-SGD head (Opacus). For every ε of the grid, σ is calibrated by
the accountant for the run's Poisson rate and step count, and `repeats` independent private
trainings on the private split d are released as they are. Writes the same CSV rows and heads
file as the `protect` rule, so the attack rules read them unchanged. An ε that the accountant
cannot reach is logged and left out of both outputs; if none is reachable nothing is written."""

import argparse
import logging
import math
import sys
import time

import numpy as np
import pandas as pd
import torch

from privssl.accounting.dpsgd import SEARCH_SECONDS, calibrate_grid
from privssl.artefacts import HEAD, features, load_tensor_file
from privssl.cli import device_argument, json_object, positive_float
from privssl.io import atomic_torch_save, atomic_write_csv, pick_device, script_logger
from privssl.release.dpsgd import DPSGDSpec, sampling_plan, train_dpsgd_head
from privssl.release.methods import dpsgd_guarantee
from privssl.release.protection import utility_loss
from privssl.training.heads import DTYPE, HeadSpec, accuracy, parameter_shapes, unflatten

FEATURE_KEYS = ("finetune", "finetune_labels", "test", "test_labels", "n_classes")


def draw_seed(seed: int, repeat: int) -> int:
    """The seed of draw `repeat` (its Poisson batches and noise), derived from --seed. Draw r uses
    the same seed at every ε (common random numbers, as in the `protect` rule)."""
    return int(np.random.SeedSequence([seed, repeat]).generate_state(1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True, help=f"features (.pt) with keys {', '.join(FEATURE_KEYS)}")
    parser.add_argument("--head", required=True, help="the non-private released head (.pt) of the finetune rule")
    parser.add_argument("--head-spec", type=json_object, default={}, help="JSON object of HeadSpec fields")
    parser.add_argument("--dpsgd", type=json_object, default={}, help="JSON object of DPSGDSpec fields")
    parser.add_argument("--eps", required=True, type=positive_float, nargs="+", help="target ε grid")
    parser.add_argument("--delta", type=float, default=1e-5, help="δ of the (ε, δ) guarantee")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-csv", required=True)
    parser.add_argument("--out-heads", required=True)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--search-seconds", type=positive_float, default=SEARCH_SECONDS,
                        help="time limit of the σ search per ε; slower means unreachable")
    device_argument(parser)
    args = parser.parse_args()
    # Opacus calls logging.basicConfig (level WARNING) when imported, which would make
    # script_logger's basicConfig a no-op and hide every INFO line: drop its handler first.
    for handler in list(logging.root.handlers):
        logging.root.removeHandler(handler)
    log = script_logger("protect_dpsgd")

    # ---- validate everything before any training
    if not 0 < args.delta < 1:
        parser.error(f"--delta must lie in (0, 1), got {args.delta}")
    if not all(math.isfinite(e) for e in args.eps):
        parser.error(f"--eps must be finite, got {args.eps}")
    if len(set(args.eps)) != len(args.eps):
        parser.error(f"--eps has duplicates: {args.eps}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    try:
        spec = DPSGDSpec.from_config(args.dpsgd)
        head_spec = HeadSpec.from_config(args.head_spec)
    except (TypeError, ValueError) as err:
        parser.error(str(err))
    feats = load_tensor_file(args.features, features("finetune", "test"))
    n_classes = int(feats["n_classes"])
    x, y = feats["finetune"], feats["finetune_labels"]
    x_test, y_test = feats["test"], feats["test_labels"]
    for name, (xs, ys) in {"finetune": (x, y), "test": (x_test, y_test)}.items():
        if xs.ndim != 2 or ys.ndim != 1 or len(xs) != len(ys) or len(ys) == 0 or xs.shape[1] != x.shape[1]:
            parser.error(f"--features: {name} must be (n, {x.shape[1]}) with n labels, got {tuple(xs.shape)} "
                         f"and {tuple(ys.shape)}")
        if ys.min() < 0 or ys.max() >= n_classes:
            parser.error(f"--features: {name} labels must lie in [0, {n_classes}), got [{ys.min()}, {ys.max()}]")
    shapes = parameter_shapes(head_spec, x.shape[1], n_classes)
    head = load_tensor_file(args.head, HEAD)
    head_shapes = {k: tuple(v) for k, v in head["shapes"].items()}
    if head_shapes != shapes:
        parser.error(f"--head-spec gives parameter shapes {shapes}, the --head file has {head_shapes}")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)

    # ---- σ per ε for the rate and step count Opacus will run
    n = len(y)
    sample_rate, steps = sampling_plan(n, spec)
    start = time.perf_counter()
    reached, unreachable = calibrate_grid(args.eps, args.delta, sample_rate, steps, spec.accountant,
                                          args.search_seconds)
    log.info("n = %d, q = %.6g, %d steps, %s accountant: σ per ε %s (search %.1f s)", n, sample_rate, steps,
             spec.accountant, {c.eps: round(c.noise_multiplier, 6) for c in reached}, time.perf_counter() - start)
    for u in unreachable:
        log.warning("ε = %g (δ = %g) left out: %s", u.eps, u.delta, u.reason)
    if not reached:
        sys.exit(f"protect_dpsgd: no ε of {args.eps} is reachable by the {spec.accountant} accountant "
                 f"(q = {sample_rate:.6g}, {steps} steps, δ = {args.delta:g}): "
                 + "; ".join(f"ε = {u.eps:g}: {u.reason}" for u in unreachable))

    # ---- one private training per (ε, draw)
    x, y = x.to(device=device, dtype=DTYPE), y.to(device)
    runs = []
    start = time.perf_counter()
    for cal in reached:
        runs.append([train_dpsgd_head(x, y, n_classes, head_spec, spec, cal.noise_multiplier, args.delta,
                                      draw_seed(args.seed, r)) for r in range(spec.repeats)])
    seconds = time.perf_counter() - start
    log.info("%d trainings in %.1f s (%.3f s each)", len(reached) * spec.repeats, seconds,
             seconds / (len(reached) * spec.repeats))
    for cal, row in zip(reached, runs):
        for run in row:
            if run.steps != steps or not run.eps_spent <= cal.eps * (1 + 1e-9):
                raise RuntimeError(f"ε = {cal.eps:g}: the run took {run.steps} steps (planned {steps}) and spent "
                                   f"ε = {run.eps_spent:g}")

    # ---- evaluate against the non-private head's test accuracy
    flat = torch.stack([torch.stack([run.flat for run in row]) for row in runs])  # (E, R, P)
    n_eps, n_rep, n_par = flat.shape
    x_test, y_test = x_test.to(device), y_test.to(device)
    clean = float(accuracy({k: v.to(device) for k, v in head["params"].items()}, x_test, y_test)[0])
    acc = accuracy(unflatten(flat.reshape(-1, n_par).to(device), shapes), x_test, y_test).cpu().reshape(n_eps, n_rep)
    loss = utility_loss(acc, clean)
    rows = []
    for e, (cal, row) in enumerate(zip(reached, runs)):
        claim = dpsgd_guarantee(cal.eps, args.delta, cal.noise_multiplier, sample_rate, steps, spec.clip_norm,
                                spec.accountant)
        for r, run in enumerate(row):
            rows.append({"dataset": args.dataset, "mechanism": "dpsgd", "eps": cal.eps, "delta": args.delta,
                         "repeat": r, "noise_scale": cal.noise_multiplier, "sensitivity_norm": "l2",
                         "sensitivity": spec.clip_norm, "guarantee_kind": claim.kind, "guarantee": claim.statement,
                         "clean_accuracy": clean, "accuracy": float(acc[e, r]), "utility_loss": float(loss[e, r]),
                         "noise_multiplier": cal.noise_multiplier, "sample_rate": run.sample_rate,
                         "steps": run.steps, "eps_spent": run.eps_spent})
    log.info("device %s, dpsgd: non-private accuracy %.4f; mean accuracy per eps %s", device, clean,
             dict(zip([c.eps for c in reached], acc.mean(1).round(decimals=4).tolist())))
    atomic_torch_save({"method": "dpsgd", "flat": flat.to(DTYPE),
                       "eps": torch.tensor([c.eps for c in reached], dtype=torch.float64),
                       "noise_scale": torch.tensor([c.noise_multiplier for c in reached], dtype=torch.float64),
                       "shapes": shapes, "clip_norm": None}, args.out_heads)
    atomic_write_csv(pd.DataFrame(rows), args.out_csv)


if __name__ == "__main__":
    main()
