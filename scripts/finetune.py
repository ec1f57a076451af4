#!/usr/bin/env python
"""Rule `finetune`: the released head ω = A_S(r) on the private split d, with train and test
accuracy. A_S is the deterministic batched trainer that the sensitivity sampler also uses.

Beside it, the tuning grid's best noise-free head, trained on d the same way (the same head
where the grid's choice for noise is also its best without noise): the baseline of the utility
loss that the paper reports, whose non-private head is its best one, not its most stable one."""

import argparse

import torch

from privssl.artefacts.image import features
from privssl.artefacts.tables import load_tensor_file
from privssl.artefacts.tuning import best_noise_free_point, parse_checking_choices
from privssl.cli import FileObject, device_argument, json_object, thread_count
from privssl.io import atomic_torch_save, atomic_write_json, pick_device, script_logger
from privssl.training.heads import HeadSpec, accuracy, parameter_shapes, train_head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--features", required=True)
    parser.add_argument("--head", type=json_object, default={}, help="JSON object of HeadSpec fields")
    parser.add_argument("--out", required=True, help="released head (.pt)")
    parser.add_argument("--metrics", required=True, help="train/test accuracy (.json)")
    parser.add_argument("--best-out", required=True, help="the tuning grid's best noise-free head (.pt)")
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parse_checking_choices(parser)
    log = script_logger("finetune")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    spec = HeadSpec.from_config(args.head)
    best_point, best_spec = None, spec  # untuned (no grid, or a head given by hand): the head is the best
    if isinstance(args.head, FileObject):
        if args.choice_config is None:
            parser.error(f"--head {args.head.path}: a tuned head needs --choice-config, to find the grid's best "
                         "noise-free point beside it")
        best_point, best = best_noise_free_point(args.head.path, args.choice_config["head"])
        best_spec = HeadSpec.from_config(best)
    feats = load_tensor_file(args.features, features("finetune", "test"))
    x, y = feats["finetune"].to(device), feats["finetune_labels"].to(device)
    test_x, test_y = feats["test"].to(device), feats["test_labels"].to(device)
    params = train_head(spec, x, y, feats["n_classes"])
    best_params = params if best_spec == spec else train_head(best_spec, x, y, feats["n_classes"])
    metrics = {
        "train_accuracy": float(accuracy(params, x, y)[0]),
        "test_accuracy": float(accuracy(params, test_x, test_y)[0]),
        "best_point": best_point,
        "best_test_accuracy": float(accuracy(best_params, test_x, test_y)[0]),
        "finetune_size": len(y),
        "device": str(device),
    }
    log.info("device %s, %s: %s", device, spec, metrics)
    for head, head_spec, path in ((params, spec, args.out), (best_params, best_spec, args.best_out)):
        atomic_torch_save({"params": {k: v.cpu() for k, v in head.items()},
                           "shapes": parameter_shapes(head_spec, x.shape[1], feats["n_classes"]),
                           "spec": head_spec.__dict__, "n_classes": feats["n_classes"]}, path)
    atomic_write_json(metrics, args.metrics)


if __name__ == "__main__":
    main()
