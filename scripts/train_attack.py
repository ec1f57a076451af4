#!/usr/bin/env python
"""Rule `shadow`: the attacker's side of the paper's membership inference. A shadow head is
trained the victim's way (same A_S, public encoder) on half of the attacker's own data; the
attack MLP learns in/out from (probability vector, one-hot label) on balanced pairs, and each
metric attack gets its threshold from the same shadow outputs."""

import argparse

import torch

from privssl.artefacts.image import features
from privssl.artefacts.tables import load_tensor_file
from privssl.artefacts.tuning import parse_checking_choices
from privssl.attacks.mia import AttackSpec, attack_scores, evaluate, fit_attacks
from privssl.cli import json_object, thread_count
from privssl.io import atomic_torch_save, script_logger
from privssl.training.heads import HeadSpec, flatten, parameter_shapes, predict_proba, train_head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--features", required=True)
    parser.add_argument("--head", type=json_object, default={}, help="JSON object of HeadSpec fields (the victim's)")
    parser.add_argument("--attack", type=json_object, default={}, help="JSON object of AttackSpec fields")
    parser.add_argument("--train-pairs", type=int, default=2000, help="balanced (in, out) pairs for the attack MLP")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    args = parse_checking_choices(parser)
    log = script_logger("shadow")
    if args.threads:
        torch.set_num_threads(args.threads)
    feats = load_tensor_file(args.features, features("shadow"))
    x, y = feats["shadow"], feats["shadow_labels"]
    half = len(y) // 2
    if args.train_pairs < 2 or args.train_pairs // 2 > half:
        parser.error(f"--train-pairs {args.train_pairs} needs {args.train_pairs // 2} shadow 'in' and 'out' "
                     f"records each; the shadow split has {len(y)} (allowed: 2..{2 * half})")
    generator = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(y), generator=generator)
    inside, outside = order[:half], order[half:2 * half]
    head_spec = HeadSpec.from_config(args.head)
    shadow = train_head(head_spec, x[inside], y[inside], feats["n_classes"])
    per_side = args.train_pairs // 2
    chosen = torch.cat([inside[torch.randperm(half, generator=generator)[:per_side]],
                        outside[torch.randperm(half, generator=generator)[:per_side]]])
    is_member = torch.cat([torch.ones(per_side), torch.zeros(per_side)])
    probs = predict_proba(shadow, x[chosen])[0]
    spec = AttackSpec.from_config(args.attack)
    fitted = fit_attacks(probs[None], y[chosen], is_member, spec, args.seed)[0]
    members = is_member.numpy().astype(bool)
    fit = {name: evaluate(s.numpy(), members, fitted.thresholds[name])
           for name, s in attack_scores(fitted, probs, y[chosen]).items()}
    log.info("attack fit on the shadow head (%d pairs): %s", len(chosen),
             {k: round(v["accuracy"], 4) for k, v in fit.items()})
    # The shadow head and its pairs are kept so that the attack rule can release the same shadow
    # through a victim's mechanism and refit the attack on it (adaptive attack).
    atomic_torch_save({"mlp": fitted.model.state_dict(), "spec": spec.__dict__, "in_dim": 2 * feats["n_classes"],
                       "shadow_flat": flatten(shadow)[0], "shadow_shapes": parameter_shapes(head_spec, x.shape[1],
                                                                                            feats["n_classes"]),
                       "inside": inside, "pairs": chosen, "pair_is_member": is_member, "seed": args.seed,
                       "thresholds": fitted.thresholds, "shadow_fit": fit,
                       "shadow_train_accuracy": float((probs[:per_side].argmax(-1) == y[chosen][:per_side]).double().mean())},
                      args.out)


if __name__ == "__main__":
    main()
