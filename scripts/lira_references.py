#!/usr/bin/env python
"""Rule `lira_references`: LiRA and RMIA against the unprotected target heads with 1, 2, 4, … of
the shadow (reference) heads, up to all of them (RMIA's claim: it keeps its power with few
reference models, where LiRA falls towards chance).

The heads are the `lira_heads` rule's clean finetune heads: at k references every attack uses the
first k shadows, the same heads for every attack. RMIA's a is chosen once on all the shadows (the
attacker's heads; Privacy Meter likewise keeps one a per dataset and architecture), its population
is the configured split in no head. Per (attack, k): the metrics of `clustered_membership_metrics`
(intervals with the candidate record as the unit) over the T × pool decisions."""

import argparse
from typing import Callable

import pandas as pd
import torch

from privssl.artefacts.image import FEATURES, load_lira_heads
from privssl.artefacts.tables import expected_of, load_tensor_file
from privssl.artefacts.tuning import parse_checking_choices
from privssl.attacks.clustered import clustered_membership_metrics
from privssl.attacks.lira import candidate_pool, membership
from privssl.attacks.mia_spec import REFERENCE_ATTACKS, RMIA_ATTACKS, reference_counts
from privssl.attacks.reference_attacks import References, fit_rmia, reference_scores
from privssl.attacks.rmia import label_probability
from privssl.cli import expect_argument, thread_count
from privssl.data.splits import LABELLED_SPLITS
from privssl.io import Progress, atomic_write_csv, script_logger
from privssl.release.protection import head_inputs
from privssl.training.heads import head_logits, unflatten


def parse_arguments() -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    """The command line, every option checked that needs no file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True)
    parser.add_argument("--heads", required=True, help="clean finetune shadow and target heads (lira_heads rule)")
    parser.add_argument("--attacks", nargs="+", required=True, choices=REFERENCE_ATTACKS)
    parser.add_argument("--population", choices=LABELLED_SPLITS, required=True, help="RMIA's z: a split in no head")
    parser.add_argument("--rmia-gamma", type=float, default=1.0)
    parser.add_argument("--fpr", nargs="+", type=float, required=True)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    expect_argument(parser)
    args = parse_checking_choices(parser)
    bad = [f for f in args.fpr if not 0 < f < 1]
    if bad:
        parser.error(f"--fpr levels must lie in (0, 1), got {bad}")
    if args.bootstrap < 1 or not args.rmia_gamma > 0:
        parser.error(f"--bootstrap must be >= 1 and --rmia-gamma > 0, got {args.bootstrap}, {args.rmia_gamma}")
    return args, parser


def head_outputs(feats: dict, heads: dict, population: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(every head's logits of the candidates (B, N, C), their labels, every head's probability of the
    population's labels for RMIA)."""
    x, y = candidate_pool(feats, heads["pool"])
    z, z_labels = candidate_pool(feats, [population])
    x, z = head_inputs(x.double(), heads["clip_norm"]), head_inputs(z.double(), heads["clip_norm"])
    params = unflatten(heads["flat"], heads["shapes"])
    logits, probabilities = head_logits(params, x), label_probability(head_logits(params, z), z_labels)
    return logits, y, probabilities


def attack_rows(args: argparse.Namespace, heads: dict, logits: torch.Tensor, y: torch.Tensor,
                population: torch.Tensor, log: Callable[..., None]) -> list[dict]:
    """Every attack with the first k shadows as its references, for each k of 1, 2, 4, … up to all
    of them; RMIA's a and thresholds fitted once on all the shadows."""
    n_shadows = heads["shadows"]
    inside = membership(heads["sets"], heads["pool_size"])
    target_in = inside[n_shadows:].numpy()
    everyone = References(logits[:n_shadows], inside[:n_shadows], population[:n_shadows])
    if any(a in RMIA_ATTACKS for a in args.attacks):
        everyone = fit_rmia(everyone, y, args.rmia_gamma)
    log("RMIA's a and thresholds fitted on the %d shadows: %s, %s", n_shadows, everyone.rmia_a,
        everyone.rmia_thresholds)
    counts = reference_counts(n_shadows)
    rows = []
    progress = Progress(log, "attacks (references × attack)", len(counts) * len(args.attacks))
    for k in counts:
        references = everyone.first(k)
        for attack in args.attacks:
            scores, threshold = reference_scores(attack, logits[n_shadows:], population[n_shadows:], references, y,
                                                 args.rmia_gamma)
            rows.append({"dataset": args.dataset, "attack": attack, "references": k,
                         "targets": int(heads["targets"]),
                         "rmia_a": references.rmia_a if attack in RMIA_ATTACKS else float("nan"),
                         **clustered_membership_metrics(scores.numpy(), target_in, threshold, tuple(args.fpr),
                                                        n_boot=args.bootstrap, seed=args.seed)})
            progress.advance()
        log("%d references: AUC %s", k, {r["attack"]: round(r["auc"], 4) for r in rows[-len(args.attacks):]})
    return rows


def main() -> None:
    args, parser = parse_arguments()
    log = script_logger("lira_references")
    if args.threads:
        torch.set_num_threads(args.threads)
    feats = load_tensor_file(args.features, FEATURES)
    heads = load_lira_heads(args.heads, len(feats["finetune_labels"]), expected_of(args.expect, args.heads))
    if args.population in heads["pool"]:
        parser.error(f"--population {args.population} is a split of the candidate pool {heads['pool']}; allowed: a "
                     f"split in no head ({', '.join(s for s in LABELLED_SPLITS if s not in heads['pool'])})")
    logits, y, population = head_outputs(feats, heads, args.population)
    atomic_write_csv(pd.DataFrame(attack_rows(args, heads, logits, y, population, log.info)), args.out)


if __name__ == "__main__":
    main()
