#!/usr/bin/env python
"""Rule `audit_canary`: the audits of the DP-SGD head with a gradient canary
(privssl.audit.gradient_canary) at each ε of `audit.canary.eps`: white box with every update
visible and final model only, each by a Gaussian-DP fit and a Clopper–Pearson test of the runs
with the canary against the runs without it (`runs` of each), each the release's own settings and σ
at that ε.

A lower bound above the release's claim stops the job with the rows in its log, and so do updates
that show another trainer than the one the claim accounts for (noise scale, clipping, optimiser,
steps): each is a bug in the training or in its accounting, not a result."""

import argparse

import torch

from privssl.artefacts.image import FEATURES, load_release
from privssl.artefacts.tables import expected_of, load_tensor_file
from privssl.artefacts.tuning import parse_checking_choices
from privssl.audit.audit_names import CANARY_ATTACK
from privssl.audit.gradient_canary import TrainerMismatch, audit_dpsgd, write_below_claim
from privssl.cli import expect_argument, json_object, thread_count
from privssl.io import InputError, Progress, script_logger
from privssl.training.heads import HeadSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True)
    parser.add_argument("--release", required=True, help="protect/dpsgd.pt: each ε's settings and σ")
    parser.add_argument("--head-spec", type=json_object, default={})
    parser.add_argument("--eps", nargs="+", type=float, required=True, help="the release's ε to audit")
    parser.add_argument("--runs", type=int, required=True, help="trainings with the canary, and as many without")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--delta", type=float, required=True, help="the release's δ")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    expect_argument(parser)
    args = parse_checking_choices(parser)
    log = script_logger("audit_canary")
    if args.runs < 4 or not 0 < args.confidence < 1:
        parser.error(f"--runs must be >= 4 (the white-box test splits each world in halves) and --confidence in "
                     f"(0, 1), got {args.runs} and {args.confidence}")
    if args.threads:
        torch.set_num_threads(args.threads)
    feats = load_tensor_file(args.features, FEATURES)
    release = load_release(args.release, "dpsgd", expected_of(args.expect, args.release))
    grid = release["eps"].tolist()
    missing = [e for e in args.eps if e not in grid]
    if missing:
        raise InputError(f"--eps {missing} are not ε of the release {args.release}; allowed: {grid}")
    head_spec = HeadSpec.from_config(args.head_spec)
    x, y = feats["finetune"].double(), feats["finetune_labels"]
    rows = []
    progress = Progress(log.info, "ε audited", len(args.eps))
    for eps in args.eps:
        e = grid.index(eps)
        sigma = float(release["noise_scale"][e])
        # each ε's trainings draw from seeds of their own: its chunks take seed, seed + chunk, … < seed + 2 runs + 1
        try:
            found = audit_dpsgd(x, y, int(feats["n_classes"]), head_spec, release["specs"][e], sigma, eps,
                                args.delta, args.runs, args.confidence, args.seed + e * (2 * args.runs + 1))
        except TrainerMismatch as err:
            raise SystemExit(f"audit_canary.py: error: {err}") from err
        rows += [{"dataset": args.dataset, "method": "dpsgd", "eps": eps, "attack": CANARY_ATTACK,
                  "adaptive": True, "guarantee_kind": "approx_dp", **row} for row in found]
        log.info("ε = %g (σ = %.4g): %s", eps, sigma,
                 ", ".join(f"{r['audit']} ε ≥ {r['eps_lower_bound']:.3f}" for r in found))
        progress.advance()
    write_below_claim(rows, args.out, log, "audit_canary.py")


if __name__ == "__main__":
    main()
