#!/usr/bin/env python
"""Rule `protect_dpsgd`: the DP-SGD head (Opacus). Every ε of the grid trains with the settings
the `tune` rule chose for it on public data; σ is calibrated by the accountant for that
training's Poisson rate and step count, and `repeats` independent private trainings on the
private split d are released as they are (the heads file records each ε's settings, so that the
attacks train their shadows the same way). The noise-free limit (σ = 0 with the settings tuned
for it, clipping kept) adds utility rows at ε = ∞, not a release. Writes the same CSV rows and heads
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

from privssl.accounting.dpsgd import calibrate_grid
from privssl.artefacts.image import HEAD, features
from privssl.artefacts.tables import load_tensor_file
from privssl.artefacts.tuning import parse_checking_choices
from privssl.cli import device_argument, json_object, positive_float, thread_count
from privssl.io import Progress, atomic_torch_save, atomic_write_csv, pack_decisions, pick_device, script_logger
from privssl.release.dpsgd import DPSGDRun, DPSGDSpec, sampling_plan, train_dpsgd_head
from privssl.release.methods import NOISE_FREE, dpsgd_guarantee
from privssl.release.protection import utility_loss
from privssl.release.tuning_spec import TUNABLE
from privssl.training.heads import DTYPE, HeadSpec, correct, parameter_shapes, unflatten

FEATURE_KEYS = ("finetune", "finetune_labels", "test", "test_labels", "n_classes")


def draw_seed(seed: int, repeat: int) -> int:
    """The seed of draw `repeat` (its Poisson batches and noise), derived from --seed. Draw r uses
    the same seed at every ε (common random numbers, as in the `protect` rule)."""
    return int(np.random.SeedSequence([seed, repeat]).generate_state(1)[0])


def parse_arguments() -> tuple[argparse.ArgumentParser, argparse.Namespace, dict[float, DPSGDSpec], DPSGDSpec,
                                 HeadSpec]:
    """The parser (the file checks refuse through it too), the command line with every option
    checked, and the tuned settings it carries: each ε's DP-SGD settings, the noise-free limit's
    and the head's."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True, help=f"features (.pt) with keys {', '.join(FEATURE_KEYS)}")
    parser.add_argument("--head", required=True, help="the non-private released head (.pt) of the finetune rule")
    parser.add_argument("--best-clean-head", required=True,
                        help="the tuning grid's best noise-free head (finetune rule): the second baseline")
    parser.add_argument("--head-spec", type=json_object, default={}, help="JSON object of HeadSpec fields")
    parser.add_argument("--dpsgd", type=json_object, required=True,
                        help="the tuned settings (@tuning/dpsgd.json): per_eps [{eps, spec}] and noise_free, "
                             "each a JSON object of DPSGDSpec fields")
    parser.add_argument("--eps", required=True, type=positive_float, nargs="+", help="target ε grid")
    parser.add_argument("--delta", type=float, default=1e-5, help="δ of the (ε, δ) guarantee")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-csv", required=True)
    parser.add_argument("--out-heads", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    parser.add_argument("--graph", action="store_true", help="the head is on a graph's node embeddings")
    device_argument(parser)
    args = parse_checking_choices(parser)
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
        per_eps = {float(entry["eps"]): DPSGDSpec.from_config(entry["spec"]) for entry in args.dpsgd["per_eps"]}
        noise_free = DPSGDSpec.from_config(args.dpsgd["noise_free"])
        head_spec = HeadSpec.from_config(args.head_spec)
    except (KeyError, TypeError, ValueError) as err:
        parser.error(f"--dpsgd / --head-spec: {type(err).__name__}: {err}")
    extra = sorted(set(per_eps) - set(args.eps))
    if extra:
        parser.error(f"--dpsgd has settings for ε = {extra}, outside the --eps grid {args.eps}: from another config?")
    if len({spec.repeats for spec in [*per_eps.values(), noise_free]}) > 1:
        parser.error("--dpsgd: every ε's settings must have the same repeats (draws per ε)")
    return parser, args, per_eps, noise_free, head_spec


def checked_inputs(parser: argparse.ArgumentParser, args, head_spec: HeadSpec) -> tuple[dict, dict, dict]:
    """The features, the non-private head and its parameter shapes, each checked against the others."""
    feats = load_tensor_file(args.features, features("finetune", "test"))
    n_classes = int(feats["n_classes"])
    x = feats["finetune"]
    for name in ("finetune", "test"):
        xs, ys = feats[name], feats[f"{name}_labels"]
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
    return feats, head, shapes


def calibrated(args, per_eps: dict[float, DPSGDSpec], n: int, log) -> list[tuple]:
    """(calibration, settings) of every ε the accountant reaches at the Poisson rate and step count
    Opacus will run with that ε's settings; the others are logged, and none reached ends the job."""
    start = time.perf_counter()
    reached, unreachable = [], []
    for eps in args.eps:
        if eps not in per_eps:
            unreachable.append(f"ε = {eps:g}: no point of the tuning grid reaches it (tuning/dpsgd.csv)")
            continue
        spec = per_eps[eps]
        sample_rate, steps = sampling_plan(n, spec)
        found, missed = calibrate_grid([eps], args.delta, sample_rate, steps, spec.accountant)
        reached += [(cal, spec) for cal in found]
        unreachable += [f"ε = {u.eps:g}: {u.reason}" for u in missed]
    log.info("n = %d: σ per ε %s (search %.1f s)", n, {c.eps: (round(c.noise_multiplier, 6), c.sample_rate, c.steps,
             c.accountant) for c, _ in reached}, time.perf_counter() - start)
    for reason in unreachable:
        log.warning("left out: %s", reason)
    if not reached:
        sys.exit(f"protect_dpsgd: no ε of {args.eps} is reachable (δ = {args.delta:g}): " + "; ".join(unreachable))
    return reached


def private_trainings(args, feats: dict, head_spec: HeadSpec, reached: list[tuple], noise_free: DPSGDSpec,
                       device: torch.device, log) -> tuple[list[list[DPSGDRun]], list[DPSGDRun]]:
    """One private training per (ε, draw), each with its ε's settings; then the noise-free limit's
    draws. Each ε's runs must have taken the planned steps and spent no more than their ε."""
    n_classes = int(feats["n_classes"])
    x, y = feats["finetune"].to(device=device, dtype=DTYPE), feats["finetune_labels"].to(device)
    start = time.perf_counter()
    # tens of trainings of similar cost, seconds each: the progress counts them
    progress = Progress(log.info, "DP-SGD trainings", sum(spec.repeats for _, spec in reached) + noise_free.repeats)

    def train(spec: DPSGDSpec, noise_multiplier: float, repeat: int) -> DPSGDRun:
        run = train_dpsgd_head(x, y, n_classes, head_spec, spec, noise_multiplier, args.delta,
                               draw_seed(args.seed, repeat))
        progress.advance()
        return run

    runs = [[train(spec, cal.noise_multiplier, r) for r in range(spec.repeats)] for cal, spec in reached]
    limit = [train(noise_free, 0.0, r) for r in range(noise_free.repeats)]
    seconds = time.perf_counter() - start
    log.info("%d trainings in %.1f s", sum(map(len, runs)) + len(limit), seconds)
    for (cal, _), row in zip(reached, runs):
        for run in row:
            if run.steps != cal.steps or not run.eps_spent <= cal.eps * (1 + 1e-9):
                raise RuntimeError(f"ε = {cal.eps:g}: the run took {run.steps} steps (planned {cal.steps}) and spent "
                                   f"ε = {run.eps_spent:g}")
    return runs, limit


def decisions_on_test(args, feats: dict, head: dict, shapes: dict, flat: torch.Tensor, limit: list[DPSGDRun],
                      device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each head's decision on every test record: the non-private head's, the tuning grid's best
    noise-free head's, every release's (E, R, n) and the noise-free limit's (R, n)."""
    n_eps, n_rep, n_par = flat.shape
    x_test, y_test = feats["test"].to(device), feats["test_labels"].to(device)
    clean_right = correct({k: v.to(device) for k, v in head["params"].items()}, x_test, y_test)[0].cpu()
    best_head = load_tensor_file(args.best_clean_head, HEAD)
    best_right = correct({k: v.to(device) for k, v in best_head["params"].items()}, x_test, y_test)[0].cpu()
    right = correct(unflatten(flat.reshape(-1, n_par).to(device), shapes), x_test, y_test).cpu()
    right = right.reshape(n_eps, n_rep, -1)
    limit_right = correct(unflatten(torch.stack([run.flat for run in limit]).to(device), shapes), x_test, y_test).cpu()
    return clean_right, best_right, right, limit_right


def utility_rows(args, reached: list[tuple], runs: list[list[DPSGDRun]], limit: list[DPSGDRun],
                 noise_free: DPSGDSpec, decisions: tuple, device: torch.device, log) -> list[dict]:
    """The utility rows of every (ε, draw) with its ε's guarantee, then the noise-free limit's at
    ε = ∞, each beside the non-private head's and the best noise-free head's test decisions."""
    clean_right, best_right, right, limit_right = decisions
    clean, clean_decisions = float(clean_right.to(torch.float64).mean()), pack_decisions(clean_right.numpy())
    rows = []
    for e, ((cal, spec), row) in enumerate(zip(reached, runs)):
        claim = dpsgd_guarantee(cal.eps, args.delta, cal.noise_multiplier, cal.sample_rate, cal.steps, spec.clip_norm,
                                spec.accountant, args.graph)
        rows += [result_row(args, spec, r, run, cal.eps, claim.kind, claim.statement, clean, right[e, r])
                 for r, run in enumerate(row)]
    rows += [result_row(args, noise_free, r, run, math.inf, "none", NOISE_FREE, clean, limit_right[r])
             for r, run in enumerate(limit)]
    for row in rows:
        row["clean_decisions"], row["best_clean_decisions"] = clean_decisions, pack_decisions(best_right.numpy())
    acc, limit_acc = right.to(torch.float64).mean(-1), limit_right.to(torch.float64).mean(-1)
    log.info("device %s, dpsgd: non-private accuracy %.4f; mean accuracy per eps %s; noise-free limit %.4f", device,
             clean, dict(zip([c.eps for c, _ in reached], acc.mean(1).round(decimals=4).tolist())),
             float(limit_acc.mean()))
    return rows


def heads_record(reached: list[tuple], flat: torch.Tensor, shapes: dict) -> dict:
    """The heads file, as the `protect` rule's: every release's parameters (E, R, P) with its ε, σ
    and settings."""
    return {"method": "dpsgd", "flat": flat.to(DTYPE),
            "eps": torch.tensor([c.eps for c, _ in reached], dtype=torch.float64),
            "noise_scale": torch.tensor([c.noise_multiplier for c, _ in reached], dtype=torch.float64),
            "specs": [spec.__dict__ for _, spec in reached],  # each ε's training, for the attacks' shadows
            "shapes": shapes, "clip_norm": None}


def main() -> None:
    parser, args, per_eps, noise_free, head_spec = parse_arguments()
    # Opacus calls logging.basicConfig (level WARNING) when imported, which would make
    # script_logger's basicConfig a no-op and hide every INFO line: drop its handler first.
    for handler in list(logging.root.handlers):
        logging.root.removeHandler(handler)
    log = script_logger("protect_dpsgd")
    feats, head, shapes = checked_inputs(parser, args, head_spec)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    reached = calibrated(args, per_eps, len(feats["finetune_labels"]), log)
    runs, limit = private_trainings(args, feats, head_spec, reached, noise_free, device, log)
    flat = torch.stack([torch.stack([run.flat for run in row]) for row in runs])  # (E, R, P)
    decisions = decisions_on_test(args, feats, head, shapes, flat, limit, device)
    rows = utility_rows(args, reached, runs, limit, noise_free, decisions, device, log)
    atomic_torch_save(heads_record(reached, flat, shapes), args.out_heads)
    atomic_write_csv(pd.DataFrame(rows), args.out_csv)


def result_row(args, spec: DPSGDSpec, repeat: int, run, eps: float, kind: str, claim: str, clean: float,
               right: torch.Tensor) -> dict:
    """A utility row of draw `repeat`'s training (`right`: its decision on each test record), with
    the settings it trained with."""
    noise_multiplier = run.noise_multiplier
    acc = float(right.to(torch.float64).mean())
    return {"dataset": args.dataset, "mechanism": "dpsgd", "eps": eps, "delta": args.delta, "repeat": repeat,
            "noise_scale": noise_multiplier, "sensitivity_norm": "l2", "sensitivity": spec.clip_norm,
            "guarantee_kind": kind, "guarantee": claim, "clean_accuracy": clean, "accuracy": acc,
            "utility_loss": float(utility_loss(torch.tensor(acc, dtype=torch.float64), clean)),
            "n_test": len(right), "decisions": pack_decisions(right.numpy()), "noise_multiplier": noise_multiplier,
            "sample_rate": run.sample_rate, "steps": run.steps, "eps_spent": run.eps_spent,
            **{f"dpsgd_{field}": getattr(spec, field) for field in TUNABLE["dpsgd"]}}


if __name__ == "__main__":
    main()
