#!/usr/bin/env python
"""Rule `attack`: the paper's membership inference (shadow MLP and metric attacks) against the
released head, unprotected (`none`), and every noisy head of each method, on balanced members
(from d) and non-members. All targets of a dataset run in one process (each takes seconds).

Non-adaptive (the paper's): the attack fitted on the clean shadow head (rule `shadow`).
Adaptive: the mechanism is public, so the attacker releases its shadow head through the same
method at the same ε (same noise scale, or DP-SGD with the same noise multiplier; the certified
methods' shadow is a certified head) and refits the MLP and thresholds on that release.
Every row carries its interval and sample size: accuracy (Clopper–Pearson), AUC (bootstrap),
TPR at low FPR (Clopper–Pearson)."""

import argparse

import numpy as np
import pandas as pd
import torch

from privssl.artefacts.image import HEAD, features, load_attacker, load_release, mia_score_table
from privssl.artefacts.record_scores import split_records
from privssl.artefacts.splits import load_labelled_splits
from privssl.artefacts.tables import expected_of, load_tensor_file
from privssl.artefacts.tuning import parse_checking_choices
from privssl.attacks.adaptive import head_kind, release_like_victim
from privssl.attacks.mia import AttackSpec, MembershipEvaluation, clean_attacks, fit_attacks
from privssl.cli import expect_argument, json_object, target_arguments, targets_and_outputs, thread_count
from privssl.io import Progress, atomic_write_csv, atomic_write_parquet, script_logger
from privssl.release.certified import CertifiedSpec
from privssl.release.protection import head_inputs, released_heads
from privssl.training.heads import HeadSpec, predict_proba, unflatten


def parse_arguments() -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True)
    parser.add_argument("--splits", required=True,
                        help="splits.json of the data rule (each record an image's pool index) or graph_data (a node)")
    parser.add_argument("--head", required=True, help="released head (.pt)")
    parser.add_argument("--attacker", required=True, help="output of the shadow rule")
    target_arguments(parser)
    parser.add_argument("--scores", required=True, nargs="+",
                        help="one scores.parquet per target, in the order of --out (artefacts.image.MIA_SCORES)")
    parser.add_argument("--head-spec", type=json_object, default={}, help="HeadSpec fields (DP-SGD shadows)")
    parser.add_argument("--certified", type=json_object, default={}, help="CertifiedSpec fields")
    parser.add_argument("--fpr", nargs="+", type=float, default=[0.01], help="FPR levels of the TPR columns")
    parser.add_argument("--bootstrap", type=int, default=1000, help="resamples of the AUC interval")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=thread_count, default=None)
    expect_argument(parser)
    args = parse_checking_choices(parser)
    bad = [f for f in args.fpr if not 0 < f < 1]
    if bad or args.bootstrap < 1:
        parser.error(f"--fpr levels must lie in (0, 1) and --bootstrap be >= 1, got {args.fpr}, {args.bootstrap}")
    if len(args.scores) != len(args.out):
        parser.error(f"--scores needs one path per --out ({len(args.out)}), got {len(args.scores)}")
    return args, parser


def released_shadows(method: str, attacker: dict, protected: dict, feats: dict, args) -> tuple[torch.Tensor, dict]:
    """(E, P) the attacker's shadow head released by `method` at each ε of the victim's release,
    and the parameter shapes of that head."""
    inside = attacker["inside"].sort().values[None]
    certified = CertifiedSpec.from_config(args.certified) if head_kind(method) == "certified" else None
    flat = release_like_victim(method, protected, feats["shadow"], feats["shadow_labels"], inside,
                               int(feats["n_classes"]), HeadSpec.from_config(args.head_spec), attacker["seed"],
                               certified, trained={"finetune": attacker["shadow_flat"][None]})
    shapes = attacker["shadow_shapes"] if head_kind(method) == "dpsgd" else protected["shapes"]
    return flat[:, 0], shapes


def attack_target(protected: dict | None, feats: dict, head: dict, attacker: dict, evaluation: MembershipEvaluation,
                  args, progress: Progress) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    """Every attack, non-adaptive and adaptive, on the clean head (`protected` None) or on every
    release of a protect rule's file, on `evaluation`'s records: each row with
    its per-record scores and calls; `progress` advances per head and attacker."""
    releases = released_heads(head, protected)
    queries = head_inputs(evaluation.evaluated(feats["finetune"], feats["nonmember"]), releases.clip_norm)
    probs = predict_proba(unflatten(releases.flat, releases.shapes), queries)  # (H, 2n, C)
    # The clean head has no mechanism to adapt to: its one attack counts as the adaptive one.
    fitted = {protected is None: [clean_attacks(attacker)] * len(releases.eps)}
    if protected is not None:  # the adaptive attacker: one fit per ε on its released shadow
        shadows, shapes = released_shadows(releases.method, attacker, protected, feats, args)
        pairs, pair_labels = feats["shadow"][attacker["pairs"]], feats["shadow_labels"][attacker["pairs"]]
        shadow_probs = predict_proba(unflatten(shadows, shapes), head_inputs(pairs, releases.clip_norm))
        spec = AttackSpec(**attacker["spec"])
        fitted[True] = fit_attacks(shadow_probs, pair_labels, attacker["pair_is_member"], spec, attacker["seed"])
    scored = []
    for adaptive, per_eps in fitted.items():
        for h in range(releases.flat.shape[0]):
            key = {"dataset": args.dataset, "mechanism": releases.method, "eps": releases.eps[h // releases.repeats],
                   "repeat": h % releases.repeats}
            scored += evaluation.scored_rows(key, per_eps[h // releases.repeats], adaptive, probs[h])
            progress.advance()
    return scored


def main() -> None:
    args, parser = parse_arguments()
    log = script_logger("attack")
    if args.threads:
        torch.set_num_threads(args.threads)
    targets = targets_and_outputs(parser, args)
    feats = load_tensor_file(args.features, features("finetune", "nonmember", "shadow"))
    evaluated = ("finetune", "nonmember")
    splits = load_labelled_splits(args.splits, args.dataset, {s: len(feats[s]) for s in evaluated})["splits"]
    head = load_tensor_file(args.head, HEAD)
    attacker = load_attacker(args.attacker, len(feats["shadow_labels"]))
    # every release file checked before any work
    loaded = [None if protected is None else load_release(protected, target, expected_of(args.expect, protected))
              for target, (protected, _) in zip(args.targets, targets)]
    evaluation = MembershipEvaluation.balanced(feats["finetune_labels"], feats["nonmember_labels"], args.fpr,
                                               args.bootstrap, args.seed)
    records = split_records(splits, {"finetune": (evaluation.members, True),
                                     "nonmember": (evaluation.nonmembers, False)})
    # a few targets of unequal cost: the unit is one released head attacked by one attacker (the
    # clean head by one, a release by the non-adaptive and the adaptive one)
    total = sum(len(released_heads(head, protected).flat) * (1 if protected is None else 2) for protected in loaded)
    progress = Progress(log.info, "released heads attacked", total)
    for protected, (_, out), scores_out in zip(loaded, targets, args.scores):
        scored = attack_target(protected, feats, head, attacker, evaluation, args, progress)
        frame = pd.DataFrame([row for row, *_ in scored])
        atomic_write_csv(frame, out)
        atomic_write_parquet(mia_score_table(scored, records), scores_out)
        log.info("%s: shadow_mlp accuracy by (adaptive, eps) %s", frame.mechanism[0],
                 frame[frame.attack == "shadow_mlp"].groupby(["adaptive", "eps"], dropna=False).accuracy.mean()
                 .round(4).to_dict())


if __name__ == "__main__":
    main()
