#!/usr/bin/env python
"""Rule `attack_training_time`: the paper's membership inference against the training-time
releases (DPCL, DPAdapter), non-adaptive and adaptive, with the rows of the `attack` rule.

A training-time release is a whole network, so the attacks read its posteriors (release file of
privssl.release.training_time) instead of a head on the public features. Non-adaptive: the attack fitted
on the clean shadow head (rule `shadow`). Adaptive: refitted on the attacker's shadow network,
trained by the same algorithm at the same ε on the attacker's own records, one fit per release.
The evaluation set is the `attack` rule's: the same balanced members and non-members."""

import argparse

import numpy as np
import pandas as pd
import torch

from privssl.artefacts.image import load_image_splits, load_private_sets, mia_score_table
from privssl.artefacts.record_scores import split_records
from privssl.artefacts.tables import expected_of, load_tensor_file
from privssl.artefacts.training_time import TRAINING_RELEASE
from privssl.attacks.mia import AttackSpec, MembershipEvaluation, clean_attacks, fit_attacks
from privssl.cli import expect_argument, thread_count
from privssl.io import Progress, atomic_write_csv, atomic_write_parquet, script_logger


def attack_release(release: dict, sets, attacker: dict, evaluation: MembershipEvaluation, args,
                   progress: Progress) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    """Every attack, non-adaptive and adaptive, on every network of a release file, on
    `evaluation`'s records (the attack rule's): each row with its per-record scores and calls; `progress`
    advances per network and attacker."""
    probs = evaluation.evaluated(release["finetune"], release["nonmember"], dim=2)  # (E, R, 2n, C)
    n_eps, repeats = probs.shape[:2]
    probs, shadow = probs.flatten(0, 1), release["shadow_pairs"].flatten(0, 1)  # (E·R, ·, C), ε-major
    pair_labels = sets.labels["shadow_pairs"]
    adaptive = fit_attacks(shadow, pair_labels, attacker["pair_is_member"], AttackSpec(**attacker["spec"]),
                           attacker["seed"])
    scored = []
    for is_adaptive, fitted in ((False, [clean_attacks(attacker)] * len(probs)), (True, adaptive)):
        for h, attacks in enumerate(fitted):
            key = {"dataset": args.dataset, "mechanism": release["method"], "eps": float(release["eps"][h // repeats]),
                   "repeat": h % repeats}
            scored += evaluation.scored_rows(key, attacks, is_adaptive, probs[h])
            progress.advance()
    return scored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--splits", required=True)
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--attacker", required=True, help="output of the shadow rule")
    parser.add_argument("--releases", required=True, nargs="+", help="training-time release files")
    parser.add_argument("--fpr", nargs="+", type=float, default=[0.01], help="FPR levels of the TPR columns")
    parser.add_argument("--bootstrap", type=int, default=1000, help="resamples of the AUC interval")
    parser.add_argument("--seed", type=int, default=0, help="the attack rule's seed: the same evaluation records")
    parser.add_argument("--out", required=True, nargs="+", help="one CSV per release file")
    parser.add_argument("--scores", required=True, nargs="+",
                        help="one scores.parquet per release file, in the order of --out (artefacts.image.MIA_SCORES)")
    parser.add_argument("--threads", type=thread_count, default=None)
    expect_argument(parser)
    args = parser.parse_args()
    log = script_logger("attack_training_time")
    if args.threads:
        torch.set_num_threads(args.threads)
    if not len(args.out) == len(args.scores) == len(args.releases):
        parser.error(f"--out and --scores need one path per release file ({len(args.releases)}), got "
                     f"{len(args.out)} and {len(args.scores)}")
    bad = [f for f in args.fpr if not 0 < f < 1]
    if bad or args.bootstrap < 1:
        parser.error(f"--fpr levels must lie in (0, 1) and --bootstrap be >= 1, got {args.fpr}, {args.bootstrap}")
    sets = load_private_sets(args.splits, args.data_root, args.attacker)
    splits = load_image_splits(args.splits, args.dataset)["splits"]
    attacker = sets.attacker
    sizes = {"|d|": len(sets.labels["finetune"]), "|nonmember|": len(sets.labels["nonmember"]),
             "|test|": len(sets.labels["test"]), "K": len(sets.labels["shadow_pairs"])}
    releases = [load_tensor_file(path, TRAINING_RELEASE, sizes, expected_of(args.expect, path))
                for path in args.releases]  # all checked first
    # a few files of unequal size: the unit is one released network (ε, repeat) attacked by one
    # attacker, non-adaptive or adaptive
    progress = Progress(log.info, "released networks attacked",
                        sum(2 * release["finetune"].shape[:2].numel() for release in releases))
    evaluation = MembershipEvaluation.balanced(sets.labels["finetune"], sets.labels["nonmember"], args.fpr,
                                               args.bootstrap, args.seed)
    records = split_records(splits, {"finetune": (evaluation.members, True),
                                     "nonmember": (evaluation.nonmembers, False)})
    for release, out, scores_out in zip(releases, args.out, args.scores):
        scored = attack_release(release, sets, attacker, evaluation, args, progress)
        frame = pd.DataFrame([row for row, *_ in scored])
        log.info("%s: shadow_mlp accuracy by (adaptive, eps) %s", release["method"],
                 frame[frame.attack == "shadow_mlp"].groupby(["adaptive", "eps"]).accuracy.mean().round(4).to_dict())
        atomic_write_csv(frame, out)
        atomic_write_parquet(mia_score_table(scored, records), scores_out)


if __name__ == "__main__":
    main()
