#!/usr/bin/env python
"""Rule `protect`: release a trained head with the noise of one output-perturbation method at
every ε of the grid, R draws each, and measure test accuracy and utility loss (Definition 6.1)
against the non-private released head. All noisy heads are evaluated as one batched computation.
Writes tidy CSV rows (with the exact guarantee of each row) and the noisy heads."""

import argparse
import json
from pathlib import Path

import pandas as pd
import torch

from privssl.cli import device_argument, positive_float
from privssl.heads import accuracy, flatten, unflatten
from privssl.io import atomic_torch_save, atomic_write_csv, load_tensors, pick_device, script_logger
from privssl.protection import head_inputs, protected_heads, utility_loss
from privssl.release_methods import OUTPUT_PERTURBATION_METHODS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True)
    parser.add_argument("--clean-head", required=True, help="the non-private released head (finetune rule)")
    parser.add_argument("--head", required=True, help="the head this method perturbs (.pt)")
    parser.add_argument("--sensitivity", required=True, help="that head's sensitivity record (JSON)")
    parser.add_argument("--mechanism", required=True, choices=OUTPUT_PERTURBATION_METHODS)
    parser.add_argument("--eps", required=True, type=positive_float, nargs="+")
    parser.add_argument("--delta", type=float, required=True, help="δ of the (ε, δ) methods")
    parser.add_argument("--repeats", type=int, required=True, help="noise draws per ε")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out-csv", required=True)
    parser.add_argument("--out-heads", required=True)
    device_argument(parser)
    args = parser.parse_args()
    log = script_logger("protect")
    if not 0 < args.delta < 1:
        parser.error(f"--delta must lie in (0, 1), got {args.delta}")
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    device = pick_device(args.device)
    sensitivity = json.loads(Path(args.sensitivity).read_text())
    clean_head, head = load_tensors(args.clean_head), load_tensors(args.head)
    feats = load_tensors(args.features)
    x, y = feats["test"].to(device), feats["test_labels"].to(device)
    clean = float(accuracy({k: v.to(device) for k, v in clean_head["params"].items()}, x, y)[0])
    released = {k: v.to(device) for k, v in head["params"].items()}
    noisy, calibrations = protected_heads(flatten(released)[0].cpu(), args.mechanism, args.eps, args.repeats,
                                          args.delta, sensitivity, args.seed)
    n_eps, n_rep, n_par = noisy.shape
    x = head_inputs(x, head.get("clip_norm"))
    acc = accuracy(unflatten(noisy.reshape(-1, n_par).to(device), head["shapes"]), x, y).cpu().reshape(n_eps, n_rep)
    loss = utility_loss(acc, clean)
    rows = [{"dataset": args.dataset, "mechanism": args.mechanism, "eps": c.eps, "delta": c.delta, "repeat": r,
             "noise_scale": c.noise_scale, "sensitivity_norm": c.sensitivity_norm, "sensitivity": c.sensitivity,
             "guarantee_kind": c.guarantee_kind, "guarantee": c.guarantee, "clean_accuracy": clean,
             "accuracy": float(acc[e, r]), "utility_loss": float(loss[e, r])}
            for e, c in enumerate(calibrations) for r in range(n_rep)]
    log.info("device %s, %s: non-private accuracy %.4f; mean accuracy per eps %s", device, args.mechanism, clean,
             dict(zip(args.eps, acc.mean(1).round(decimals=4).tolist())))
    atomic_torch_save({"method": args.mechanism, "flat": noisy, "eps": torch.tensor(args.eps, dtype=torch.float64),
                       "noise_scale": torch.tensor([c.noise_scale for c in calibrations]),
                       "shapes": head["shapes"], "clip_norm": head.get("clip_norm")}, args.out_heads)
    atomic_write_csv(pd.DataFrame(rows), args.out_csv)


if __name__ == "__main__":
    main()
