#!/usr/bin/env python
"""Rule `protect`: release a trained head with the noise of each output-perturbation method at
every ε of the grid, R draws each, and measure test accuracy and utility loss (Definition 6.1)
against the non-private released head. A method's noisy heads are evaluated as one batched
computation; all methods run in one process (the per-method work is well under the cost of
starting Python and torch). Writes, per method, tidy CSV rows (with the exact guarantee of each
row) and the noisy heads, and each method's noise-free limit (ε = ∞: its head without noise, a
row of the CSV only). The list arguments are parallel: the i-th of each belongs to the i-th
method."""

import argparse
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd
import torch

from privssl.artefacts.image import HEAD, features, load_sensitivity
from privssl.artefacts.tables import expected_of, load_tensor_file
from privssl.cli import device_argument, expect_argument, positive_float, thread_count
from privssl.io import atomic_torch_save, atomic_write_csv, pack_decisions, pick_device, script_logger
from privssl.release.methods import NOISE_FREE, OUTPUT_PERTURBATION_METHODS
from privssl.release.protection import head_inputs, protected_heads, utility_loss
from privssl.training.heads import correct, flatten, unflatten


class MethodFiles(NamedTuple):
    """One method's paths and seed (the i-th of each parallel list argument)."""

    head: str
    sensitivity: str
    seed: int
    out_csv: str
    out_heads: str


@dataclass(frozen=True)
class TestSet:
    """What every release is measured on: the test features `x` and labels `y` on `device`, the
    non-private head's accuracy `clean`, and the packed test decisions of the two non-private
    heads (`baselines`), on every row."""

    x: torch.Tensor
    y: torch.Tensor
    device: torch.device
    clean: float
    baselines: dict[str, str]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True)
    parser.add_argument("--clean-head", required=True, help="the non-private released head (finetune rule)")
    parser.add_argument("--best-clean-head", required=True,
                        help="the tuning grid's best noise-free head (finetune rule): the second baseline")
    parser.add_argument("--mechanism", required=True, nargs="+", choices=OUTPUT_PERTURBATION_METHODS)
    parser.add_argument("--head", required=True, nargs="+", help="the head each method perturbs (.pt)")
    parser.add_argument("--sensitivity", required=True, nargs="+", help="that head's sensitivity record (JSON)")
    parser.add_argument("--eps", required=True, type=positive_float, nargs="+")
    parser.add_argument("--delta", type=float, required=True, help="δ of the (ε, δ) methods")
    parser.add_argument("--repeats", type=int, required=True, help="noise draws per ε")
    parser.add_argument("--seed", type=int, required=True, nargs="+", help="one per method")
    parser.add_argument("--out-csv", required=True, nargs="+")
    parser.add_argument("--out-heads", required=True, nargs="+")
    parser.add_argument("--threads", type=thread_count, default=None)
    parser.add_argument("--graph", action="store_true", help="the head is on a graph's node embeddings")
    device_argument(parser)
    expect_argument(parser)
    args = parser.parse_args()
    log = script_logger("protect")
    if args.threads:
        torch.set_num_threads(args.threads)
    if not 0 < args.delta < 1:
        parser.error(f"--delta must lie in (0, 1), got {args.delta}")
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    per_method = (args.head, args.sensitivity, args.seed, args.out_csv, args.out_heads)
    if any(len(values) != len(args.mechanism) for values in per_method):
        parser.error(f"--head, --sensitivity, --seed, --out-csv and --out-heads need one value per --mechanism "
                     f"({len(args.mechanism)}), got {[len(values) for values in per_method]}")
    device = pick_device(args.device)
    feats = load_tensor_file(args.features, features("test"))
    x, y = feats["test"].to(device), feats["test_labels"].to(device)
    clean_head = load_tensor_file(args.clean_head, HEAD)
    # the non-private head on the same test records: each row carries its decisions, so that a
    # release's utility loss pairs with it record by record
    clean_right = correct({k: v.to(device) for k, v in clean_head["params"].items()}, x, y)[0].cpu()
    clean = float(clean_right.to(torch.float64).mean())
    best_head = load_tensor_file(args.best_clean_head, HEAD)
    best_right = correct({k: v.to(device) for k, v in best_head["params"].items()}, x, y)[0].cpu()
    baselines = {"clean_decisions": pack_decisions(clean_right.numpy()),
                 "best_clean_decisions": pack_decisions(best_right.numpy())}
    test = TestSet(x, y, device, clean, baselines)
    for mechanism, *paths in zip(args.mechanism, *per_method):
        release(mechanism, MethodFiles(*paths), test, args, log)


def release(mechanism: str, files: MethodFiles, test: TestSet, args, log) -> None:
    """Every ε × draw of one method's release of its head: accuracy, utility loss, the claim."""
    x, y, device, clean, baselines = test.x, test.y, test.device, test.clean, test.baselines
    head_path, sensitivity_path, seed, out_csv, out_heads = files
    sensitivity = load_sensitivity(sensitivity_path, expected_of(args.expect, sensitivity_path))
    head = load_tensor_file(head_path, HEAD)
    released = {k: v.to(device) for k, v in head["params"].items()}
    noisy, calibrations = protected_heads(flatten(released)[0].cpu(), mechanism, args.eps, args.repeats, args.delta,
                                          sensitivity, seed, args.graph)
    n_eps, n_rep, n_par = noisy.shape
    queries = head_inputs(x, head.get("clip_norm"))
    # per test record and draw: the reports cluster the draws by record and pair the methods
    right = correct(unflatten(noisy.reshape(-1, n_par).to(device), head["shapes"]), queries, y).cpu()
    right = right.reshape(n_eps, n_rep, -1)
    acc = right.to(torch.float64).mean(-1)
    loss = utility_loss(acc, clean)
    rows = [{"dataset": args.dataset, "mechanism": mechanism, "eps": c.eps, "delta": c.delta, "repeat": r,
             "noise_scale": c.noise_scale, "sensitivity_norm": c.sensitivity_norm, "sensitivity": c.sensitivity,
             "guarantee_kind": c.guarantee_kind, "guarantee": c.guarantee, "clean_accuracy": clean,
             "accuracy": float(acc[e, r]), "utility_loss": float(loss[e, r]), "n_test": len(y),
             "decisions": pack_decisions(right[e, r].numpy()), **baselines}
            for e, c in enumerate(calibrations) for r in range(n_rep)]
    # The noise-free limit: the same head without noise (the same in every draw), so that a
    # reader sees what the method loses to its training and what to its noise.
    limit_right = correct(released, queries, y)[0].cpu()
    limit = float(limit_right.to(torch.float64).mean())
    c = calibrations[0]
    rows += [{"dataset": args.dataset, "mechanism": mechanism, "eps": float("inf"), "delta": c.delta, "repeat": r,
              "noise_scale": 0.0, "sensitivity_norm": c.sensitivity_norm, "sensitivity": c.sensitivity,
              "guarantee_kind": "none", "guarantee": NOISE_FREE, "clean_accuracy": clean, "accuracy": limit,
              "utility_loss": float(utility_loss(torch.tensor(limit, dtype=torch.float64), clean)),
              "n_test": len(y), "decisions": pack_decisions(limit_right.numpy()), **baselines}
             for r in range(n_rep)]
    log.info("device %s, %s: non-private accuracy %.4f; mean accuracy per eps %s", device, mechanism, clean,
             dict(zip(args.eps, acc.mean(1).round(decimals=4).tolist())))
    atomic_torch_save({"method": mechanism, "flat": noisy, "eps": torch.tensor(args.eps, dtype=torch.float64),
                       "noise_scale": torch.tensor([c.noise_scale for c in calibrations]),
                       "shapes": head["shapes"], "clip_norm": head.get("clip_norm")}, out_heads)
    atomic_write_csv(pd.DataFrame(rows), out_csv)


if __name__ == "__main__":
    main()
