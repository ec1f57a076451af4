#!/usr/bin/env python
"""Rule `lira`: membership inference at low false-positive rates against one release method
(or the clean heads, `none`), and the hypothesis-test audit of its ε.

T target heads are released by the method at every ε and attacked, each on every candidate of
the pool, with the N shadow heads (none of which is a target). Attacks: LiRA online/offline
with per-candidate or global variance, and the loss attack. Each runs twice for a noisy method:
adaptive (the shadows released by the same mechanism at the same ε) and non-adaptive (clean
shadows). Writes per (ε, attack, adaptive): metrics with intervals over the T × pool decisions,
every decision's score (a Parquet line per target head and candidate, the candidate by its
image's index in the pool), and the audit row (threshold chosen on half of the candidates,
Clopper–Pearson bound on the other half).

RMIA (privssl.attacks.rmia) uses the same shadow heads as its reference heads and the attacker's
population split (`--population`, records in no head) as its z; its offline a and each variant's
decision threshold are fitted per (ε, adaptive) on the shadows alone, and the a is written beside
its rows (`rmia_a`)."""

import argparse
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import torch

from privssl.artefacts.image import (
    FEATURES,
    UTILITY,
    lira_score_table,
    load_image_splits,
    load_lira_heads,
    load_release,
)
from privssl.artefacts.tables import expected_of, load_csv_file, load_tensor_file
from privssl.artefacts.tuning import parse_checking_choices
from privssl.attacks.adaptive import head_kind, release_like_victim
from privssl.attacks.clustered import clustered_membership_metrics
from privssl.attacks.lira import candidate_pool, membership
from privssl.attacks.mia import best_threshold, metric_scores
from privssl.attacks.mia_spec import METRIC_ATTACKS, REFERENCE_ATTACKS, RMIA_ATTACKS
from privssl.attacks.reference_attacks import References, fit_rmia, reference_scores
from privssl.attacks.rmia import label_probability
from privssl.audit.audit_names import BLACK_BOX
from privssl.audit.bounds import each_rate, epsilon_lower_bound_split_clustered
from privssl.cli import expect_argument, json_object, thread_count
from privssl.data.splits import LABELLED_SPLITS
from privssl.io import Progress, atomic_write_csv, atomic_write_parquet, script_logger
from privssl.release.methods import METHODS, substitution_claim
from privssl.release.protection import head_inputs
from privssl.training.heads import HeadSpec, head_logits, unflatten

ATTACKS = (*REFERENCE_ATTACKS, *METRIC_ATTACKS)


def releases_of(method: str, heads: dict, release: dict | None, feats: dict, args,
                log: Callable[[str], None]) -> tuple[torch.Tensor, list]:
    """(E, B, P) released shadow+target heads and the ε grid; `none`: the clean heads, ε NaN. `log`
    gets the progress of the DP-SGD trainings, most of a dpsgd job's time."""
    x, y = candidate_pool(feats, heads["pool"])
    flat = release_like_victim(method, release, x, y, heads["sets"], int(feats["n_classes"]),
                               HeadSpec.from_config(args.head_spec), args.seed,
                               trained={head_kind(method): heads["flat"]}, log=log)
    return flat, [float("nan")] if release is None else release["eps"].tolist()


def parse_arguments() -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    """The command line, every option checked that needs no file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--method", required=True, choices=("none", *METHODS))
    parser.add_argument("--features", required=True)
    parser.add_argument("--splits", required=True, help="the data rule's splits.json: each candidate's pool index")
    parser.add_argument("--heads", required=True, help="clean shadow and target heads (lira_heads rule)")
    parser.add_argument("--release", default=None, help="the method's release file (protect rules); not for none")
    parser.add_argument("--utility", default=None, help="the method's utility CSV (its guarantee kinds)")
    parser.add_argument("--head-spec", type=json_object, default={})
    parser.add_argument("--attacks", nargs="+", required=True, choices=ATTACKS)
    parser.add_argument("--population", choices=LABELLED_SPLITS, default=None,
                        help="RMIA's population split z: in no head, so not a split of the candidate pool")
    parser.add_argument("--rmia-gamma", type=float, default=1.0, help="RMIA's γ: x dominates z when LR(x, z) >= γ")
    parser.add_argument("--fpr", nargs="+", type=float, required=True, help="FPR levels for TPR at low FPR")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--confidence", type=float, default=0.95, help="of the audit's Clopper–Pearson bounds")
    parser.add_argument("--delta", type=float, required=True, help="δ of the (ε, δ) methods")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-csv", required=True)
    parser.add_argument("--out-scores", required=True,
                        help="output: scores.parquet, every decision's score (artefacts.image.LIRA_SCORES)")
    parser.add_argument("--out-audit", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    expect_argument(parser)
    args = parse_checking_choices(parser)
    if (args.method == "none") != (args.release is None):
        parser.error("--release is required for a release method and not allowed for none")
    bad = [f for f in args.fpr if not 0 < f < 1]
    if bad:
        parser.error(f"--fpr levels must lie in (0, 1), got {bad}")
    if args.bootstrap < 1 or not 0 < args.confidence < 1:
        parser.error(f"--bootstrap must be >= 1 and --confidence in (0, 1), got {args.bootstrap}, {args.confidence}")
    rmia = [a for a in args.attacks if a in RMIA_ATTACKS]
    if rmia and args.population is None:
        parser.error(f"--attacks {' '.join(rmia)} need --population (RMIA's z)")
    if not args.rmia_gamma > 0:
        parser.error(f"--rmia-gamma {args.rmia_gamma} is not allowed; allowed: γ > 0")
    return args, parser


def audit_split(pool_size: int, n_targets: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The audit's one split of the candidates (its threshold is chosen on the selected half only),
    and each flat decision's candidate (the cluster of its Clopper–Pearson bounds), target-major."""
    select = torch.zeros(pool_size, dtype=torch.bool)
    select[torch.randperm(pool_size, generator=torch.Generator().manual_seed(seed))[: pool_size // 2]] = True
    return select.expand(n_targets, -1).reshape(-1).numpy(), np.tile(np.arange(pool_size), n_targets)


def attack_scores(attack: str, targets: torch.Tensor, target_population: torch.Tensor | None,
                  references: References, y: torch.Tensor, shadow_in: torch.Tensor,
                  rmia_gamma: float) -> tuple[torch.Tensor, float]:
    """(T, N) membership scores of the targets' candidates and the attack's decision threshold."""
    if attack in REFERENCE_ATTACKS:
        return reference_scores(attack, targets, target_population, references, y, rmia_gamma)
    # a metric attack: its threshold fitted on the shadows' in/out scores
    scores = metric_scores(torch.softmax(targets, -1), y)[attack]
    shadow_scores = metric_scores(torch.softmax(references.logits, -1), y)[attack]
    return scores, best_threshold(shadow_scores.reshape(-1).numpy(), shadow_in.reshape(-1).numpy())


@dataclass(frozen=True)
class Queries:
    """What the attacker queries a head with: the candidates x (labels y) and, when RMIA runs, its
    population z (labels z_labels; None without RMIA), both as the heads' inputs; and what it knows
    of its shadows' training sets (`shadow_in`, (N_shadows, pool))."""

    shapes: dict
    x: torch.Tensor
    y: torch.Tensor
    shadow_in: torch.Tensor
    z: torch.Tensor | None
    z_labels: torch.Tensor | None
    rmia_gamma: float

    def logits(self, flat: torch.Tensor, inputs: torch.Tensor | None = None) -> torch.Tensor:
        return head_logits(unflatten(flat, self.shapes), self.x if inputs is None else inputs)

    def population(self, flat: torch.Tensor) -> torch.Tensor | None:
        """RMIA's probabilities of the population's labels under each head; None without RMIA."""
        return None if self.z is None else label_probability(self.logits(flat, self.z), self.z_labels)

    def references(self, flat: torch.Tensor) -> References:
        """The attacker's heads, with RMIA's population probabilities and a when it runs."""
        if self.z is None:
            return References(self.logits(flat), self.shadow_in)
        return fit_rmia(References(self.logits(flat), self.shadow_in, self.population(flat)), self.y, self.rmia_gamma)


def read_inputs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple:
    """The features, the clean heads, the method's release (None for `none`), its guarantee kind
    per ε ({} without --utility) and each split's pool indices; RMIA's population checked to be in
    no head."""
    feats = load_tensor_file(args.features, FEATURES)
    splits = load_image_splits(args.splits, args.dataset, {s: len(feats[s]) for s in LABELLED_SPLITS})
    heads = load_lira_heads(args.heads, len(feats["finetune_labels"]), expected_of(args.expect, args.heads))
    release = load_release(args.release, args.method, expected_of(args.expect, args.release)) if args.release else None
    kinds = {}
    if args.utility:
        utility = load_csv_file(args.utility, UTILITY, expected_of(args.expect, args.utility))
        kinds = dict(zip(utility.eps, utility.guarantee_kind))
    if any(a in RMIA_ATTACKS for a in args.attacks) and args.population in heads["pool"]:
        parser.error(f"--population {args.population} is a split of the candidate pool {heads['pool']}; allowed: a "
                     f"split in no head ({', '.join(s for s in LABELLED_SPLITS if s not in heads['pool'])})")
    return feats, heads, release, kinds, splits["splits"]


def attacker_queries(feats: dict, heads: dict, x: torch.Tensor, y: torch.Tensor, shadow_in: torch.Tensor,
                     args: argparse.Namespace) -> Queries:
    """The candidates and, when an RMIA attack runs, its population, as the heads take them."""
    x = head_inputs(x.double(), heads["clip_norm"])
    z = z_labels = None
    if any(a in RMIA_ATTACKS for a in args.attacks):
        z, z_labels = candidate_pool(feats, [args.population])
        z = head_inputs(z.double(), heads["clip_norm"])
    return Queries(heads["shapes"], x, y, shadow_in, z, z_labels, args.rmia_gamma)


def audit_row(key: dict, scores: np.ndarray, is_member: np.ndarray, select: np.ndarray, candidate: np.ndarray,
              claim: tuple[float, float], per_rate: float, guarantee_kind: str) -> dict:
    """The hypothesis-test audit of the claim (ε, δ): the threshold chosen on the selected half of the
    candidates, the Clopper–Pearson bound on the other."""
    # each candidate's T decisions are one cluster of the Clopper–Pearson bounds, not T trials
    bound = epsilon_lower_bound_split_clustered(scores[select], is_member[select], scores[~select],
                                                is_member[~select], candidate[~select], claim[1], per_rate)
    return {**key, "delta": claim[1], "claimed_eps": claim[0], "guarantee_kind": guarantee_kind,
            "audit": "hypothesis_test", "threat_model": BLACK_BOX,
            "eps_lower_bound": bound["eps_lower_bound"], "eps_ceiling": bound["eps_ceiling"],
            "n": bound["n_members"] + bound["n_nonmembers"],
            "candidates": bound["member_clusters"] + bound["nonmember_clusters"]}


def attack_releases(args: argparse.Namespace, queries: Queries, released: torch.Tensor, eps_grid: list,
                    clean: References, target_in: torch.Tensor, pool_size: int, kinds: dict,
                    log: Callable[..., None]) -> tuple[list, list, list]:
    """Every attack against the targets released at every ε, adaptive and (for a noisy method) not:
    the metrics rows, each row's scores (T × pool, target-major) and the audit rows."""
    n_shadows = len(queries.shadow_in)
    is_member = target_in.reshape(-1).numpy()
    select, candidate = audit_split(pool_size, target_in.shape[0], args.seed)
    per_rate = each_rate(args.confidence)  # FPR and FNR each, so that both hold jointly at c (union bound)
    variants = [True] if args.method == "none" else [True, False]
    rows, scores_of_rows, audit_rows = [], [], []
    # a few ε only: an attack's bootstrapped metrics are the unit
    progress = Progress(log, "attacks (ε × adaptive × attack)", len(eps_grid) * len(variants) * len(args.attacks))
    for e, eps in enumerate(eps_grid):
        targets = queries.logits(released[e][n_shadows:])
        target_population = queries.population(released[e][n_shadows:])
        claim = (float("inf"), 0.0) if args.method == "none" else substitution_claim(args.method, eps, args.delta)
        for adaptive in variants:
            # adaptive: the shadows released by the same mechanism at the same ε
            references = queries.references(released[e][:n_shadows]) if adaptive and args.method != "none" else clean
            for attack in args.attacks:
                scores, threshold = attack_scores(attack, targets, target_population, references, queries.y,
                                                  queries.shadow_in, args.rmia_gamma)
                flat_scores = scores.reshape(-1).numpy()
                key = {"dataset": args.dataset, "method": args.method, "eps": eps, "attack": attack,
                       "adaptive": adaptive}
                # T targets decide every candidate: the intervals take the candidate as the unit
                rows.append({**key, "guarantee_kind": kinds.get(eps, "none"), "targets": targets.shape[0],
                             "rmia_a": references.rmia_a if attack in RMIA_ATTACKS else float("nan"),
                             **clustered_membership_metrics(scores.numpy(), target_in.numpy(), threshold,
                                                            tuple(args.fpr), n_boot=args.bootstrap, seed=args.seed)})
                scores_of_rows.append(flat_scores)
                audit_rows.append(audit_row(key, flat_scores, is_member, select, candidate, claim, per_rate,
                                            kinds.get(eps, "none")))
                progress.advance()
        log("%s eps %g: AUC per attack (adaptive) %s", args.method, eps,
            {r["attack"]: round(r["auc"], 4) for r in rows[-len(args.attacks) * len(variants):] if r["adaptive"]})
    return rows, scores_of_rows, audit_rows


def main() -> None:
    args, parser = parse_arguments()
    log = script_logger("lira")
    if args.threads:
        torch.set_num_threads(args.threads)
    feats, heads, release, kinds, splits = read_inputs(args, parser)
    x, y = candidate_pool(feats, heads["pool"])
    released, eps_grid = releases_of(args.method, heads, release, feats, args, log.info)
    n_shadows = heads["shadows"]
    inside = membership(heads["sets"], heads["pool_size"])  # (B, N)
    queries = attacker_queries(feats, heads, x, y, inside[:n_shadows], args)
    clean = queries.references(heads["flat"][:n_shadows])
    rows, scores, audit_rows = attack_releases(args, queries, released, eps_grid, clean, inside[n_shadows:],
                                               heads["pool_size"], kinds, log.info)
    atomic_write_csv(pd.DataFrame(rows), args.out_csv)
    atomic_write_parquet(lira_score_table(rows, scores, inside[n_shadows:].numpy(), heads["pool"], splits),
                         args.out_scores)
    atomic_write_csv(pd.DataFrame(audit_rows), args.out_audit)


if __name__ == "__main__":
    main()
