#!/usr/bin/env python
"""Rule `tune`, section `certified`: the certified head's regularisation chosen on public data,
by the accuracy its releases (the config's certified methods at every ε) reach on the folds of
the reference split, as the point of least regret (privssl.release.tuning). Writes
certified.csv and certified.json."""

import time

import torch

from privssl.artefacts.image import load_tuning_folds
from privssl.cli import tuning_parser
from privssl.io import script_logger
from privssl.release import tuning
from privssl.release.certified import CertifiedSpec
from privssl.release.methods import output_perturbation_methods, release_method
from privssl.release.tuning_spec import checked_points, varied_fields
from privssl.release.tuning_table import grid_table, write_choice


def main() -> None:
    parser = tuning_parser(__doc__)
    args = parser.parse_args()
    log = script_logger("tune")
    protect = args.config["protect"]
    try:
        points = checked_points(args.config, "certified", CertifiedSpec)  # every point refused before any training
    except (KeyError, TypeError, ValueError) as err:
        parser.error(f"--config: {err}")
    methods = [m for m in output_perturbation_methods(protect["mechanisms"]) if release_method(m).head == "certified"]
    if not methods:
        parser.error(f"--config: no certified release among protect.mechanisms {protect['mechanisms']}")
    if args.threads:
        torch.set_num_threads(args.threads)
    data = load_tuning_folds(args.features, args.config, args.seed, log.info)
    scoring = tuning.NoisyScoring(tuple(methods), tuple(protect["eps"]), protect["delta"], protect["repeats"],
                                  args.seed)
    start = time.perf_counter()
    rows = tuning.tune_certified(data, points, scoring, log=log.info)
    chosen = tuning.least_regret_point(rows)
    write_choice(args.out_dir, "certified", grid_table(rows, points, varied_fields(args.config, "certified"),
                                                       lambda r: r["point"] == chosen), points[chosen])
    log.info("certified: point %d of %d, %s (%.1f s)", chosen, len(points), points[chosen],
             time.perf_counter() - start)


if __name__ == "__main__":
    main()
