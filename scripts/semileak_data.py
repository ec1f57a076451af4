#!/usr/bin/env python
"""Rule `semileak_data`: the semi-supervised branch's splits (thesis §3.4.1) — four equal random
parts of the dataset's labelled images (target train = members, target test, shadow train, shadow
test) and, in each train part, the images that keep their labels; the rest are used unlabelled."""

import argparse

import numpy as np

from privssl.data.images import load_pool, pool_record
from privssl.data.splits import check_semileak_sizes, make_semileak_splits
from privssl.io import atomic_write_json, script_logger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--part", type=int, required=True, help="size of each of the four equal parts")
    parser.add_argument("--labels", type=int, required=True, help="labelled images of each train part")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    log = script_logger("semileak_data")
    check_semileak_sizes(args.dataset, args.part, args.labels)  # before the pool is read
    pool = load_pool(args.dataset, args.data_root)
    classes = pool.labels.numpy()
    splits, labelled = make_semileak_splits(classes, args.part, args.labels, args.seed)
    for name, index in labelled.items():
        log.info("%s: %d images, %d labelled, labelled per class %s", name, len(splits[name]), len(index),
                 np.bincount(classes[index], minlength=pool.n_classes).tolist())
    atomic_write_json({"dataset": args.dataset, "n_classes": pool.n_classes, "pool": pool_record(pool),
                       "splits": splits, "labelled": labelled}, args.out)


if __name__ == "__main__":
    main()
