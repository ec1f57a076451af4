#!/usr/bin/env python
"""Rule `certified_head`: the certified head (L2-regularised logistic regression on clipped
features, Chaudhuri et al. 2011) on the private split d, its proven L2 sensitivity Δ2, and its
train/test accuracy. The solver runs a fixed number of steps derived from the spec (never from the
data), after which the gradient tolerance holds by theorem; a head whose computed gradient norm
still exceeds it (float round-off only) is not released and nothing is written."""

import argparse

import torch
from threadpoolctl import threadpool_limits

from privssl.artefacts.image import features
from privssl.artefacts.tables import load_tensor_file
from privssl.artefacts.tuning import parse_checking_choices
from privssl.cli import device_argument, json_object, thread_count
from privssl.io import atomic_torch_save, atomic_write_json, pick_device, script_logger
from privssl.release.certified import CertifiedSpec, ConvergenceError, certified_sensitivity, fit_certified_head
from privssl.release.protection import head_inputs
from privssl.training.heads import DTYPE, HeadSpec, accuracy, parameter_shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--features", required=True)
    parser.add_argument("--certified", type=json_object, required=True,
                        help="JSON object of CertifiedSpec fields: clip_norm, l2, tolerance")
    parser.add_argument("--out-head", required=True, help="certified head (.pt)")
    parser.add_argument("--out-sensitivity", required=True, help="proven sensitivity record (.json)")
    parser.add_argument("--out-metrics", required=True, help="train/test accuracy, gradient norm (.json)")
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parse_checking_choices(parser)
    try:
        spec = CertifiedSpec.from_config(args.certified)
    except ValueError as err:
        parser.error(str(err))
    log = script_logger("certified_head")
    if args.threads:
        torch.set_num_threads(args.threads)
        # The solver's BLAS too: on small heads, idle BLAS threads spinning cost more than they add.
        threadpool_limits(limits=args.threads, user_api="blas")
    # The solver is numpy accelerated gradient in float64 on the CPU whatever the device; logged for the record.
    device = pick_device(args.device)
    feats = load_tensor_file(args.features, features("finetune", "test"))
    n_classes = int(feats["n_classes"])
    x, y = feats["finetune"].to(DTYPE), feats["finetune_labels"]
    try:
        fit = fit_certified_head(x, y, n_classes, spec)
    except ConvergenceError as err:
        log.error("%s", err)
        raise SystemExit(f"certified_head: {err}") from err
    test_x = head_inputs(feats["test"].to(DTYPE), spec.clip_norm)
    metrics = {
        "train_accuracy": float(accuracy(fit.params, head_inputs(x, spec.clip_norm), y)[0]),
        "test_accuracy": float(accuracy(fit.params, test_x, feats["test_labels"])[0]),
        "gradient_norm": fit.gradient_norm,
        "iterations": fit.iterations,
        "finetune_size": len(y),
        "device": "cpu",
    }
    sensitivity = certified_sensitivity(len(y), n_classes, spec)
    log.info("device %s (solver on cpu), %s: %s; Δ2 = %.6g", device, spec, metrics, sensitivity["delta2"])
    shapes = parameter_shapes(HeadSpec(architecture="linear"), x.shape[1], n_classes)
    atomic_torch_save({"params": fit.params, "shapes": shapes,
                       "spec": {"architecture": "linear", "certified": spec.__dict__},
                       "n_classes": n_classes, "clip_norm": spec.clip_norm}, args.out_head)
    atomic_write_json(sensitivity, args.out_sensitivity)
    atomic_write_json(metrics, args.out_metrics)


if __name__ == "__main__":
    main()
