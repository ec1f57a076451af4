#!/usr/bin/env python
"""Rule `attack`: membership inference against the released head, unprotected (`none`) or
every noisy head of one mechanism, on balanced members (from d) and non-members. All heads
are queried in one batched computation. Writes tidy CSV, one row per (head, attack)."""

import argparse

import numpy as np
import pandas as pd
import torch

from privssl.heads import predict_proba, unflatten
from privssl.io import atomic_write_csv, load_tensors, script_logger
from privssl.protection import head_inputs, released_heads
from privssl.mia import AttackSpec, attack_mlp, attack_mlp_scores, evaluate, metric_scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True)
    parser.add_argument("--head", required=True, help="released head (.pt)")
    parser.add_argument("--attacker", required=True, help="output of the shadow rule")
    parser.add_argument("--protected", default=None, help="noisy heads of one mechanism; omit for the clean head")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    log = script_logger("attack")
    feats, head, attacker = load_tensors(args.features), load_tensors(args.head), load_tensors(args.attacker)

    # Balanced evaluation set: as many members of d as there are non-members (or vice versa).
    n = min(len(feats["finetune_labels"]), len(feats["nonmember_labels"]))
    generator = torch.Generator().manual_seed(args.seed)
    pick = lambda size: torch.randperm(size, generator=generator)[:n]  # noqa: E731
    members, nonmembers = pick(len(feats["finetune_labels"])), pick(len(feats["nonmember_labels"]))
    x = torch.cat([feats["finetune"][members], feats["nonmember"][nonmembers]])
    y = torch.cat([feats["finetune_labels"][members], feats["nonmember_labels"][nonmembers]])
    is_member = np.r_[np.ones(n, bool), np.zeros(n, bool)]

    releases = released_heads(head, args.protected)
    probs = predict_proba(unflatten(releases.flat, releases.shapes), head_inputs(x, releases.clip_norm))  # (H, 2n, C)

    model = attack_mlp(attacker["in_dim"], AttackSpec(**attacker["spec"]))
    model.load_state_dict(attacker["mlp"])
    scores = {"shadow_mlp": attack_mlp_scores(model.eval(), probs, y)}
    scores.update(metric_scores(probs, y))
    thresholds = {"shadow_mlp": 0.5, **attacker["thresholds"]}
    rows = []
    for h in range(releases.flat.shape[0]):
        for attack, s in scores.items():
            rows.append({"dataset": args.dataset, "mechanism": releases.method, "eps": releases.eps[h // releases.repeats],
                         "repeat": h % releases.repeats, "attack": attack, "n_members": n, "n_nonmembers": n,
                         **evaluate(s[h].numpy(), is_member, thresholds[attack])})
    frame = pd.DataFrame(rows)
    log.info("%s: shadow_mlp accuracy by eps %s", releases.method,
             frame[frame.attack == "shadow_mlp"].groupby("eps", dropna=False).accuracy.mean().round(4).to_dict())
    atomic_write_csv(frame, args.out)


if __name__ == "__main__":
    main()
