#!/usr/bin/env python
"""Rule `tune`, section `head`: the released head's training (A_S) chosen on public data, for its
noise: on the folds of the reference split, each grid point's head is released by every method
of the ALM family in the run at every ε, with the noise of the point's own Δ sampled on the
reference pool, and the point of least worst-case regret is chosen (privssl.release.tuning; by
noise-free accuracy where the run releases no method of the family). Writes the grid with every
point's scores and Δ (head.csv) and the choice the release rules read (head.json)."""

import math
import time

import torch

from privssl.artefacts.image import load_tuning_folds
from privssl.cli import tuning_parser
from privssl.io import script_logger
from privssl.release import tuning
from privssl.release.methods import output_perturbation_methods, release_method
from privssl.release.sensitivity import PopulationSampler, order_statistic_index
from privssl.release.tuning_spec import checked_points, varied_fields
from privssl.release.tuning_table import grid_table, write_choice
from privssl.training.heads import HeadSpec


def main() -> None:
    parser = tuning_parser(__doc__)
    args = parser.parse_args()
    log = script_logger("tune")
    protect, sampler = args.config["protect"], args.config["sensitivity"]
    try:
        points = checked_points(args.config, "head", HeadSpec)  # every point refused before any training
        order_statistic_index(sampler["m"], sampler["rho"], sampler["gamma"])
    except (KeyError, TypeError, ValueError) as err:
        parser.error(f"--config: {err}")
    family = [m for m in output_perturbation_methods(protect["mechanisms"]) if release_method(m).head == "finetune"]
    if args.threads:
        torch.set_num_threads(args.threads)
    data = load_tuning_folds(args.features, args.config, args.seed, log.info)
    scoring = tuning.NoisyScoring(tuple(family), tuple(protect["eps"]), protect["delta"], protect["repeats"], args.seed)
    start = time.perf_counter()
    rows = tuning.tune_head(data, points, scoring, PopulationSampler.from_config(sampler, args.seed),
                            log=log.info, precision=args.config["tuning"].get("head_precision"))
    chosen = tuning.least_regret_point(rows) if family else tuning.best_point(rows, math.inf)
    write_choice(args.out_dir, "head", grid_table(rows, points, varied_fields(args.config, "head"),
                                                  lambda r: r["point"] == chosen), points[chosen])
    log.info("head: point %d of %d, %s, %s (%.1f s)", chosen, len(points),
             f"least worst-case regret over {family} at ε {protect['eps']}" if family else "noise-free accuracy",
             points[chosen], time.perf_counter() - start)


if __name__ == "__main__":
    main()
