#!/usr/bin/env python
"""Rule `audit_crafted_pair`: the crafted worst-case audits of the certified heads
(privssl.audit.crafted_pair) at each ε of `audit.crafted_pair.eps`: a neighbouring pair (d, d')
built to move the certified head as far as the proof allows, `draws` releases of each world's head
by the release's own calibration and noise, and the Neyman–Pearson test between the worlds.

The certified spec, n and the classes are the release's (its sensitivity record), so the pair is
audited under the release's claim; a release whose noise scale differs from the one the audit
recomputes is refused. A lower bound above the claim stops the job with the rows in its log: it is
a bug in the sensitivity proof or the calibration, not a result."""

import argparse
import logging
import math

import torch

from privssl.artefacts.image import load_release, load_sensitivity
from privssl.artefacts.tables import expected_of
from privssl.artefacts.tuning import parse_checking_choices
from privssl.audit.audit_names import CRAFTED_ATTACK
from privssl.audit.crafted_pair import CraftedPair, audit_certified, craft_pair
from privssl.audit.gradient_canary import write_below_claim
from privssl.cli import expect_argument, thread_count
from privssl.io import InputError, Progress, script_logger
from privssl.release.certified import CertifiedSpec
from privssl.release.methods import release_method


def parse_arguments() -> argparse.Namespace:
    """The command line, every option checked that needs no file."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--sensitivity", required=True, help="certified/sensitivity.json: the proven Δ2 and its spec")
    parser.add_argument("--methods", nargs="+", required=True, help="the certified release methods audited")
    parser.add_argument("--releases", nargs="+", required=True, help="protect/<method>.pt, one per --methods")
    parser.add_argument("--eps", nargs="+", type=float, required=True, help="the releases' ε to audit")
    parser.add_argument("--draws", type=int, required=True, help="releases of each world's head")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--delta", type=float, required=True, help="the releases' δ (the Gaussian's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    expect_argument(parser)
    args = parse_checking_choices(parser)
    if args.draws < 2 or not 0 < args.confidence < 1:
        parser.error(f"--draws must be >= 2 and --confidence in (0, 1), got {args.draws} and {args.confidence}")
    if len(args.releases) != len(args.methods):
        parser.error(f"--releases needs one file per --methods, got {len(args.releases)} for {len(args.methods)}")
    for method in args.methods:
        if release_method(method).head != "certified":
            parser.error(f"--methods {method!r} does not release the certified head; allowed: the methods whose "
                         "head is 'certified' (privssl.release.methods)")
    return args


def read_inputs(args: argparse.Namespace) -> tuple[dict, dict, CertifiedSpec]:
    """The certified head's proven sensitivity record, the releases (each with every --eps, all of
    the certified head's linear layout with the record's classes) and the record's certified spec."""
    record = load_sensitivity(args.sensitivity, expected_of(args.expect, args.sensitivity))
    if record["sampling"] != "certified":
        raise InputError(f"{args.sensitivity}: sampling {record['sampling']!r}; the crafted pair needs the certified "
                         "head's proven record")
    releases = {m: load_release(p, m, expected_of(args.expect, p)) for m, p in zip(args.methods, args.releases)}
    for method, release in releases.items():
        missing = [e for e in args.eps if e not in release["eps"].tolist()]
        if missing:
            raise InputError(f"--eps {missing} are not ε of the release {method}; allowed: {release['eps'].tolist()}")
    try:  # the record's schema lets tolerance be 0, which no certified head is trained to
        spec = CertifiedSpec(record["clip_norm"], record["l2"], record["tolerance"])
    except ValueError as err:
        raise InputError(f"{args.sensitivity}: {err}") from err
    layout = releases[args.methods[0]]["shapes"]
    for method, release in releases.items():
        if release["shapes"] != layout or tuple(layout.get("weight", ()))[1:] != (record["n_classes"],):
            raise InputError(f"the release {method} has shapes {release['shapes']}; allowed: the certified head's "
                             f"linear layout with the {record['n_classes']} classes of {args.sensitivity}, the same "
                             "for every release")
    return record, releases, spec


def audit_releases(args: argparse.Namespace, pair: CraftedPair, record: dict, releases: dict,
                   log: logging.Logger) -> list[dict]:
    """The crafted pair's audits of every release at every --eps, each release's noise scale checked
    against the one the audit's calibration gives."""
    rows = []
    progress = Progress(log.info, "(method, ε) audited", len(args.methods) * len(args.eps))
    for m, (method, release) in enumerate(releases.items()):
        grid = release["eps"].tolist()
        for e, eps in enumerate(args.eps):
            # disjoint seeds per (method, ε) and world: each world takes seed, seed + CHUNK, … < seed + draws
            seed = args.seed + (m * len(args.eps) + e) * 2 * args.draws
            found = audit_certified(pair, method, eps, args.delta, record, args.draws, args.confidence, seed)
            released = float(release["noise_scale"][grid.index(eps)])
            if not math.isclose(found[0]["noise_scale"], released, rel_tol=1e-6):  # stored in float32
                raise InputError(f"{method} at ε = {eps:g}: the release's noise scale {released:.6g} is not the "
                                 f"{found[0]['noise_scale']:.6g} its calibration gives on {args.sensitivity}")
            rows += [{"dataset": args.dataset, "method": method, "eps": eps, "attack": CRAFTED_ATTACK,
                      "adaptive": True, "guarantee_kind": release_method(method).dp_kind, **row} for row in found]
            log.info("%s, ε = %g: %s", method, eps,
                     ", ".join(f"{r['audit']} ε ≥ {r['eps_lower_bound']:.3f}" for r in found))
            progress.advance()
    return rows


def main() -> None:
    args = parse_arguments()
    log = script_logger("audit_crafted_pair")
    if args.threads:
        torch.set_num_threads(args.threads)
    record, releases, spec = read_inputs(args)
    width = releases[args.methods[0]]["shapes"]["weight"][0]
    pair = craft_pair(record["finetune_size"], width, record["n_classes"], spec)
    if not math.isclose(pair.sensitivity, record["delta2"], rel_tol=1e-12):
        raise InputError(f"{args.sensitivity}: delta2 = {record['delta2']:.6g}, but its spec and n give "
                         f"{pair.sensitivity:.6g} (privssl.release.certified.certified_sensitivity)")
    log.info("crafted pair %s: ‖W_d − W_d'‖ = %.6g = %.3f Δ2 (Δ2 = %.6g)", pair.design, pair.distance,
             pair.fraction, pair.sensitivity)
    write_below_claim(audit_releases(args, pair, record, releases, log), args.out, log, "audit_crafted_pair.py")


if __name__ == "__main__":
    main()
