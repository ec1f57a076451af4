#!/usr/bin/env python
"""Rule `tune`, section `head`: the released head's training (A_S) chosen on public data, by
its noise-free accuracy on the folds of the reference split (privssl.release.tuning). Writes the
grid with every point's score (head.csv) and the choice the release rules read (head.json)."""

import math
import time

import torch

from privssl.artefacts import load_tuning_folds
from privssl.cli import tuning_parser
from privssl.io import script_logger
from privssl.release import tuning
from privssl.release.tuning_spec import checked_points, varied_fields
from privssl.release.tuning_table import grid_table, write_choice
from privssl.training.heads import HeadSpec


def main() -> None:
    parser = tuning_parser(__doc__)
    args = parser.parse_args()
    log = script_logger("tune")
    try:
        points = checked_points(args.config, "head", HeadSpec)  # every point refused before any training
    except (KeyError, TypeError, ValueError) as err:
        parser.error(f"--config: {err}")
    if args.threads:
        torch.set_num_threads(args.threads)
    x, y, n_classes, n, splits = load_tuning_folds(args.features, args.config, args.seed, log.info)
    start = time.perf_counter()
    rows = tuning.tune_head(x, y, n_classes, points, splits, log=log.info)
    chosen = tuning.best_point(rows, math.inf)
    write_choice(args.out_dir, "head", grid_table(rows, points, varied_fields(args.config, "head"),
                                                  lambda r: r["point"] == chosen), points[chosen])
    log.info("head: point %d of %d, %s (%.1f s)", chosen, len(rows), points[chosen], time.perf_counter() - start)


if __name__ == "__main__":
    main()
