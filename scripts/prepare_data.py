#!/usr/bin/env python
"""Rule `data`: make the dataset available under the data root and draw the disjoint splits
pretrain / finetune / nonmember / shadow / test. Writes one JSON file of index sets."""

import argparse

from privssl.cli import json_object
from privssl.data.images import load_pool, pool_record
from privssl.data.splits import DATASETS, SPLITS, check_split_sizes, make_splits
from privssl.io import atomic_write_json, script_logger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True, choices=sorted(DATASETS))
    parser.add_argument("--data-root", required=True, help="where torchvision finds or downloads the data")
    parser.add_argument("--sizes", required=True, type=json_object, help=f"JSON object of split sizes: {SPLITS}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--download", action="store_true", help="download the dataset if it is missing")
    parser.add_argument("--out", required=True, help="splits JSON")
    args = parser.parse_args()
    log = script_logger("data")
    check_split_sizes(args.dataset, args.sizes)  # fail before touching any data
    pool = load_pool(args.dataset, args.data_root, download=args.download)
    splits = make_splits(args.dataset, pool.labels, args.sizes, args.seed)
    log.info("%s: %s", args.dataset, {k: len(v) for k, v in splits.items()})
    atomic_write_json({"dataset": args.dataset, "seed": args.seed, "n_classes": pool.n_classes, "pool": pool_record(pool),
                       "sizes": {k: len(v) for k, v in splits.items()}, "splits": splits}, args.out)


if __name__ == "__main__":
    main()
