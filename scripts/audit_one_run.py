#!/usr/bin/env python
"""Rule `audit_one_run`: the one-run privacy audit (Steinke, Nasr & Jagielski, NeurIPS 2023) of
every release method at every ε, and of the clean head (`none`), in one job (each method's work
is a few trainings; one process spares the interpreter start-up per method).

For each canary kind, one training set of |d| records with m canary slots (privssl.audit.canaries) is
trained by the method's algorithm and released by the method at each ε — one run per ε. The
auditor scores every canary by its white-box loss log p(label) under the released head (the
release *is* the parameter vector), guesses "in" on its k highest and "out" on its k lowest
scores, and the number of right guesses gives an ε lower bound at the configured confidence."""

import argparse
from pathlib import Path

import pandas as pd
import torch

from privssl.artefacts.image import FEATURES, UTILITY, load_release
from privssl.artefacts.tables import expected_of, load_csv_file, load_tensor_file
from privssl.artefacts.tuning import parse_checking_choices
from privssl.attacks.adaptive import head_kind, release_like_victim
from privssl.attacks.lira import candidate_pool
from privssl.attacks.mia import metric_scores
from privssl.audit.audit_names import BLACK_BOX
from privssl.audit.bounds import one_run_ceiling, one_run_epsilon_lower_bound, one_run_guesses
from privssl.audit.canaries import CANARY_KINDS, canary_design
from privssl.audit.one_run_spec import check_guesses, guesses_per_side, one_run_audit_name
from privssl.cli import expect_argument, json_object, thread_count
from privssl.data.splits import LABELLED_SPLITS
from privssl.io import Progress, atomic_write_csv, script_logger
from privssl.release.certified import CertifiedSpec
from privssl.release.methods import METHODS, substitution_claim
from privssl.release.protection import head_inputs
from privssl.training.heads import HeadSpec, head_logits, parameter_shapes, unflatten


def released_heads(method: str, design, release: dict | None, n_classes: int, args) -> torch.Tensor:
    """(E, P): the canary training set trained and released by `method` at each ε (`none`: E = 1, clean)."""
    certified = CertifiedSpec.from_config(args.certified) if head_kind(method) == "certified" else None
    return release_like_victim(method, release, design.features, design.labels, design.training_set[None], n_classes,
                               HeadSpec.from_config(args.head_spec), args.seed, certified)[:, 0]


def parse_arguments() -> argparse.Namespace:
    """The command line, every option checked that needs no file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--methods", nargs="+", required=True, choices=("none", *METHODS))
    parser.add_argument("--features", required=True)
    parser.add_argument("--pool", nargs="+", required=True, choices=LABELLED_SPLITS)
    parser.add_argument("--protect-dir", required=True, help="folder of the protect rules' {method}.pt and .csv")
    parser.add_argument("--head-spec", type=json_object, default={})
    parser.add_argument("--certified", type=json_object, default={})
    parser.add_argument("--canaries", type=int, required=True, help="m: canary slots in the training set")
    parser.add_argument("--guess-fraction", type=float, required=True, help="r/m: share of canaries guessed")
    parser.add_argument("--kinds", nargs="+", choices=CANARY_KINDS, required=True)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--delta", type=float, required=True, help="δ of the (ε, δ) methods")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    expect_argument(parser)
    args = parse_checking_choices(parser)
    if not 0 < args.guess_fraction <= 1 or not 0 < args.confidence < 1:
        parser.error(f"--guess-fraction must lie in (0, 1] and --confidence in (0, 1), got {args.guess_fraction}, "
                     f"{args.confidence}")
    if check_guesses(args.guess_fraction, args.canaries):
        parser.error(f"--guess-fraction: {check_guesses(args.guess_fraction, args.canaries)}")
    return args


def read_releases(args: argparse.Namespace) -> tuple[dict, dict]:
    """Each release method's release file and its guarantee kind per ε (none for `none`)."""
    releases, kinds = {}, {}
    for method in args.methods:
        if method == "none":
            continue
        path = Path(args.protect_dir) / f"{method}.pt"
        releases[method] = load_release(path, method, expected_of(args.expect, path))
        path = Path(args.protect_dir) / f"{method}.csv"
        utility = load_csv_file(path, UTILITY, expected_of(args.expect, path))
        kinds[method] = dict(zip(utility.eps, utility.guarantee_kind))
    return releases, kinds


def canary_scores(method: str, design, release: dict | None, n_classes: int, shapes: dict,
                  args: argparse.Namespace) -> torch.Tensor:
    """(E, m): the auditor's white-box score of every canary, its loss log p(label) under the head
    released at each ε."""
    flat = released_heads(method, design, release, n_classes, args)
    queries = head_inputs(design.features[design.canary_rows].double(), release.get("clip_norm") if release else None)
    logits = head_logits(unflatten(flat, shapes), queries)
    return metric_scores(torch.softmax(logits, -1), design.labels[design.canary_rows])["loss"]


def audit_rows(args: argparse.Namespace, method: str, kind: str, design, scores: torch.Tensor, eps_grid: list,
               per_side: int, guarantee_kinds: dict) -> list[dict]:
    """One row per ε: the auditor's k "in" and k "out" guesses, how many are right, and the ε lower
    bound they give against the method's claim (its guarantee kind per ε: `guarantee_kinds`)."""
    truth = design.included.numpy() * 2 - 1
    rows = []
    for e, eps in enumerate(eps_grid):
        guesses = one_run_guesses(scores[e].numpy(), per_side, per_side)
        correct, made = int(((guesses * truth) > 0).sum()), int((guesses != 0).sum())
        claim = (float("inf"), 0.0) if method == "none" else substitution_claim(method, eps, args.delta)
        rows.append({"dataset": args.dataset, "method": method, "eps": eps, "attack": "loss",
                     "adaptive": True, "delta": claim[1], "claimed_eps": claim[0],
                     "guarantee_kind": guarantee_kinds.get(eps, "none"),
                     "audit": one_run_audit_name(kind), "threat_model": BLACK_BOX,
                     "eps_lower_bound": one_run_epsilon_lower_bound(correct, made, args.canaries, claim[1],
                                                                    args.confidence),
                     "eps_ceiling": one_run_ceiling(made, args.canaries, claim[1], args.confidence),
                     "n": made, "canaries": args.canaries, "correct": correct})
    return rows


def main() -> None:
    args = parse_arguments()
    log = script_logger("audit_one_run")
    if args.threads:
        torch.set_num_threads(args.threads)
    # ---- every input checked before any training
    releases, kinds = read_releases(args)
    feats = load_tensor_file(args.features, FEATURES)
    x, y = candidate_pool(feats, args.pool)
    n_classes, set_size = int(feats["n_classes"]), len(feats["finetune_labels"])
    per_side = guesses_per_side(args.guess_fraction, args.canaries)
    designs = {kind: canary_design(x, y, n_classes, set_size, args.canaries, kind, args.seed + k)
               for k, kind in enumerate(args.kinds)}

    rows = []
    # a few methods of unequal cost (DP-SGD's trainings dominate): the unit is one canary kind's release
    progress = Progress(log.info, "canary releases (method × kind)", len(args.methods) * len(designs))
    for method in args.methods:
        release = releases.get(method)
        shapes = release["shapes"] if release else parameter_shapes(HeadSpec.from_config(args.head_spec), x.shape[1],
                                                                    n_classes)
        eps_grid = release["eps"].tolist() if release else [float("nan")]
        for kind, design in designs.items():
            scores = canary_scores(method, design, release, n_classes, shapes, args)
            rows += audit_rows(args, method, kind, design, scores, eps_grid, per_side, kinds.get(method, {}))
            log.info("%s, %s canaries: right guesses per eps %s of %d", method, kind,
                     [r["correct"] for r in rows[-len(eps_grid):]], 2 * per_side)
            progress.advance()
    atomic_write_csv(pd.DataFrame(rows), args.out)


if __name__ == "__main__":
    main()
