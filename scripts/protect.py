#!/usr/bin/env python
"""Rule `protect`: release the head with noise of one mechanism at every ε of the grid,
R draws each, and measure test accuracy and utility loss (Definition 6.1). All noisy heads
are evaluated as one batched computation. Writes tidy CSV rows and the noisy heads."""

import argparse
import json
from pathlib import Path

import pandas as pd
import torch

from privssl.cli import device_argument, positive_float
from privssl.heads import accuracy, flatten, unflatten
from privssl.io import atomic_torch_save, atomic_write_csv, load_tensors, pick_device, script_logger
from privssl.mechanisms import MECHANISMS
from privssl.protection import protected_heads, utility_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True)
    parser.add_argument("--head", required=True, help="released head (.pt) of the finetune rule")
    parser.add_argument("--sensitivity", required=True, help="sensitivity JSON")
    parser.add_argument("--mechanism", required=True, choices=MECHANISMS)
    parser.add_argument("--eps", required=True, type=positive_float, nargs="+")
    parser.add_argument("--delta", type=float, default=1e-5, help="δ of the Gaussian mechanisms")
    parser.add_argument("--repeats", type=int, default=10, help="noise draws per ε")
    parser.add_argument("--seed", type=int, default=0)
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
    sens = json.loads(Path(args.sensitivity).read_text())
    head = load_tensors(args.head)
    feats = load_tensors(args.features)
    x, y = feats["test"].to(device), feats["test_labels"].to(device)
    released = {k: v.to(device) for k, v in head["params"].items()}
    clean = float(accuracy(released, x, y)[0])
    noisy, calibrations = protected_heads(flatten(released)[0].cpu(), args.mechanism, args.eps, args.repeats,
                                          sens["delta1"], sens["delta2"], args.delta, args.seed)
    n_eps, n_rep, n_par = noisy.shape
    acc = accuracy(unflatten(noisy.reshape(-1, n_par).to(device), head["shapes"]), x, y).cpu().reshape(n_eps, n_rep)
    loss = utility_loss(acc, clean)
    rows = [{"dataset": args.dataset, "mechanism": args.mechanism, "eps": c.eps, "delta": c.delta, "repeat": r,
             "noise_scale": c.noise_scale, "sensitivity_norm": c.sensitivity_norm, "sensitivity": c.sensitivity,
             "guarantee": c.guarantee, "clean_accuracy": clean, "accuracy": float(acc[e, r]),
             "utility_loss": float(loss[e, r])}
            for e, c in enumerate(calibrations) for r in range(n_rep)]
    log.info("device %s, %s: clean accuracy %.4f; mean utility loss per eps %s", device, args.mechanism, clean,
             dict(zip(args.eps, loss.mean(1).round(decimals=4).tolist())))
    atomic_torch_save({"mechanism": args.mechanism, "flat": noisy, "eps": torch.tensor(args.eps),
                       "noise_scale": torch.tensor([c.noise_scale for c in calibrations])}, args.out_heads)
    atomic_write_csv(pd.DataFrame(rows), args.out_csv)


if __name__ == "__main__":
    main()
