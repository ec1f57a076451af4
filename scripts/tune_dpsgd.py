#!/usr/bin/env python
"""Rule `tune`, section `dpsgd`: the DP-SGD head's training chosen on public data, per ε and for
the noise-free limit, by the accuracy on the folds of the reference split of heads trained with
the head's chosen architecture (head.json) and each ε's noise (privssl.release.tuning). Writes
dpsgd.csv and dpsgd.json (one choice per ε the accountant reaches, and the noise-free one's)."""

import math
import time

import torch

from privssl.artefacts.image import load_tuning_folds
from privssl.artefacts.tuning import parse_checking_choices
from privssl.cli import json_object, tuning_parser
from privssl.io import script_logger
from privssl.release import tuning
from privssl.release.dpsgd_spec import DPSGDSpec
from privssl.release.tuning_spec import checked_points, varied_fields
from privssl.release.tuning_table import grid_table, write_choice
from privssl.training.heads import HeadSpec


def main() -> None:
    parser = tuning_parser(__doc__)
    parser.add_argument("--head-spec", type=json_object, required=True, help="the head's choice, @<head.json>")
    args = parse_checking_choices(parser)
    log = script_logger("tune")
    protect = args.config["protect"]
    try:
        head_spec = HeadSpec.from_config(args.head_spec)
        points = checked_points(args.config, "dpsgd", DPSGDSpec)  # every point refused before any training
    except (KeyError, TypeError, ValueError) as err:
        parser.error(f"--config: {err}")
    if args.threads:
        torch.set_num_threads(args.threads)
    data = load_tuning_folds(args.features, args.config, args.seed, log.info)
    start = time.perf_counter()
    rows = tuning.tune_dpsgd(data, head_spec, points, protect["eps"], protect["delta"], args.seed, log=log.info)
    per_eps = {eps: tuning.best_point(rows, eps) for eps in [*protect["eps"], math.inf]}
    choice = {"per_eps": [{"eps": eps, "spec": points[p]} for eps, p in per_eps.items()
                          if p is not None and math.isfinite(eps)],
              "noise_free": points[per_eps[math.inf]]}
    write_choice(args.out_dir, "dpsgd", grid_table(rows, points, varied_fields(args.config, "dpsgd"),
                                                   lambda r: per_eps.get(r["eps"]) == r["point"]), choice)
    log.info("dpsgd: per ε %s (%.1f s)", per_eps, time.perf_counter() - start)


if __name__ == "__main__":
    main()
