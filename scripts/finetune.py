#!/usr/bin/env python
"""Rule `finetune`: the released head ω = A_S(r) on the private split d, with train and test
accuracy. A_S is the deterministic batched trainer that the sensitivity sampler also uses."""

import argparse

import torch

from privssl.artefacts import features, load_tensor_file, parse_checking_choices
from privssl.cli import device_argument, json_object, thread_count
from privssl.io import atomic_torch_save, atomic_write_json, pick_device, script_logger
from privssl.training.heads import HeadSpec, accuracy, parameter_shapes, train_head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--features", required=True)
    parser.add_argument("--head", type=json_object, default={}, help="JSON object of HeadSpec fields")
    parser.add_argument("--out", required=True, help="released head (.pt)")
    parser.add_argument("--metrics", required=True, help="train/test accuracy (.json)")
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parse_checking_choices(parser)
    log = script_logger("finetune")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    spec = HeadSpec.from_config(args.head)
    feats = load_tensor_file(args.features, features("finetune", "test"))
    x, y = feats["finetune"].to(device), feats["finetune_labels"].to(device)
    params = train_head(spec, x, y, feats["n_classes"])
    metrics = {
        "train_accuracy": float(accuracy(params, x, y)[0]),
        "test_accuracy": float(accuracy(params, feats["test"].to(device), feats["test_labels"].to(device))[0]),
        "finetune_size": len(y),
        "device": str(device),
    }
    log.info("device %s, %s: %s", device, spec, metrics)
    shapes = parameter_shapes(spec, x.shape[1], feats["n_classes"])
    atomic_torch_save({"params": {k: v.cpu() for k, v in params.items()}, "shapes": shapes,
                       "spec": spec.__dict__, "n_classes": feats["n_classes"]}, args.out)
    atomic_write_json(metrics, args.metrics)


if __name__ == "__main__":
    main()
