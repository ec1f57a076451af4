#!/usr/bin/env python
"""Rule `tune`: every release method's training chosen on public data (the `reference` split),
by the procedure of privssl.release.tuning. Writes, per tuned section, the grid with the score of
every point (`<section>.csv`) and the chosen configuration that the release rules read
(`<section>.json`; DP-SGD: one per ε and the noise-free limit's)."""

import argparse
import logging
import math
import time

import pandas as pd
import torch

from privssl.accounting.dpsgd import SEARCH_SECONDS
from privssl.artefacts import features, load_tensor_file
from privssl.cli import json_object, positive_float
from privssl.io import atomic_write_csv, atomic_write_json, script_logger
from privssl.release import tuning
from privssl.release.certified import CertifiedSpec
from privssl.release.dpsgd_spec import DPSGDSpec
from privssl.release.methods import output_perturbation_methods, release_method
from privssl.release.tuning_spec import SECTIONS, grid_points, tuned_sections, varied_fields
from privssl.training.heads import DTYPE, HeadSpec


def table(rows: list[dict], points: list[dict], fields: list[str], chosen) -> pd.DataFrame:
    """Tidy rows: the varied fields of each row's point, its score, and whether it is chosen
    (`chosen(row)`) and the best at its own (method, ε)."""
    frame = pd.DataFrame(rows)
    for i, field in enumerate(fields):
        frame.insert(1 + i, field, [points[p][field] for p in frame.point])
    frame["chosen"] = [chosen(row) for row in rows]
    best = {}
    for (method, eps), group in frame.groupby(["method", "eps"]):
        scored = group.dropna(subset=["accuracy"])
        if len(scored):
            best[(method, eps)] = int(scored.sort_values(["accuracy", "point"], ascending=[False, True]).point.iloc[0])
    frame["best_at_eps"] = [best.get((r["method"], r["eps"])) == r["point"] for r in rows]
    frame["regret"] = tuning.regrets(rows)  # shortfall from the best point at the row's (method, ε)
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True)
    parser.add_argument("--config", type=json_object, required=True,
                        help="JSON object with the sections head, certified, dpsgd, protect and tuning")
    parser.add_argument("--sections", nargs="+", required=True, choices=SECTIONS)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out-dir", required=True, help="writes <section>.csv and <section>.json here")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--search-seconds", type=positive_float, default=SEARCH_SECONDS)
    args = parser.parse_args()
    for handler in list(logging.root.handlers):  # Opacus' import configures logging (protect_dpsgd.py)
        logging.root.removeHandler(handler)
    log = script_logger("tune")
    config, protect = args.config, args.config["protect"]
    if args.sections != tuned_sections(protect["mechanisms"]):
        parser.error(f"--sections {args.sections} differ from the sections the mechanisms "
                     f"{protect['mechanisms']} need: {tuned_sections(protect['mechanisms'])}")
    try:
        points = {section: grid_points(config, section) for section in args.sections}
        for section, spec in (("head", HeadSpec), ("certified", CertifiedSpec), ("dpsgd", DPSGDSpec)):
            for point in points.get(section, []):  # every point refused before any training
                spec.from_config(point)
    except (TypeError, ValueError) as err:
        parser.error(f"--config: {err}")
    if args.threads:
        torch.set_num_threads(args.threads)
    feats = load_tensor_file(args.features, features("finetune", "reference"))
    x, y, n_classes = feats["reference"].to(DTYPE), feats["reference_labels"], int(feats["n_classes"])
    n = len(feats["finetune_labels"])
    tuning_config = config.get("tuning", {})
    splits = tuning.folds(len(y), n, tuning_config.get("folds", 2), args.seed)
    log.info("%s: %d folds, each trains on |d| = %d of %d reference records", args.dataset, len(splits), n, len(y))

    start = time.perf_counter()
    rows = tuning.tune_head(x, y, n_classes, points["head"], splits)
    head = tuning.best_point(rows, math.inf)
    head_spec = points["head"][head]
    write(args.out_dir, "head", table(rows, points["head"], varied_fields(config, "head"),
                                      lambda r: r["point"] == head), head_spec)
    log.info("head: point %d of %d, %s (%.1f s)", head, len(rows), head_spec, time.perf_counter() - start)

    if "certified" in args.sections:
        start = time.perf_counter()
        methods = [m for m in output_perturbation_methods(protect["mechanisms"])
                   if release_method(m).head == "certified"]
        rows = tuning.tune_certified(x, y, n_classes, points["certified"], splits, methods, protect["eps"],
                                     protect["delta"], protect["repeats"], args.seed)
        chosen = tuning.least_regret_point(rows)
        write(args.out_dir, "certified", table(rows, points["certified"], varied_fields(config, "certified"),
                                               lambda r: r["point"] == chosen), points["certified"][chosen])
        log.info("certified: point %d of %d, %s (%.1f s)", chosen, len(points["certified"]),
                 points["certified"][chosen], time.perf_counter() - start)

    if "dpsgd" in args.sections:
        start = time.perf_counter()
        rows = tuning.tune_dpsgd(x, y, n_classes, HeadSpec.from_config(head_spec), points["dpsgd"], splits,
                                 protect["eps"], protect["delta"], args.seed, args.search_seconds)
        per_eps = {eps: tuning.best_point(rows, eps) for eps in [*protect["eps"], math.inf]}
        choice = {"per_eps": [{"eps": eps, "spec": points["dpsgd"][p]} for eps, p in per_eps.items()
                              if p is not None and math.isfinite(eps)],
                  "noise_free": points["dpsgd"][per_eps[math.inf]]}
        write(args.out_dir, "dpsgd", table(rows, points["dpsgd"], varied_fields(config, "dpsgd"),
                                           lambda r: per_eps.get(r["eps"]) == r["point"]), choice)
        log.info("dpsgd: per ε %s (%.1f s)", {e: p for e, p in per_eps.items()}, time.perf_counter() - start)


def write(out_dir: str, section: str, frame: pd.DataFrame, choice: dict) -> None:
    atomic_write_csv(frame, f"{out_dir}/{section}.csv")
    atomic_write_json(choice, f"{out_dir}/{section}.json")


if __name__ == "__main__":
    main()
