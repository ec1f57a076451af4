#!/usr/bin/env python
"""Rule `contrastive_data`: the contrastive-privacy branch's splits (thesis Ch. 4) — target train
(members), target test, shadow train, shadow test (four equal parts) and the attribute adversary's
auxiliary set — drawn from the labelled images outside the public pre-training split, with each
image's task label (a coarse map of its class), its membership-task label (the task the membership
claims' models learn: the task itself, or the class) and sensitive attribute (its class)."""

import argparse

import numpy as np

from privssl.artefacts.image import load_image_splits
from privssl.data.images import load_pool
from privssl.data.label_maps import cifar100_superclasses, label_map, task_labels
from privssl.data.splits import make_contrastive_splits
from privssl.io import atomic_write_json, script_logger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", required=True, help="the image track's splits.json (its `pretrain` is excluded)")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--task", required=True, help="label map of the dataset (privssl.data.label_maps)")
    parser.add_argument("--membership-task", help="label map of the membership claims' models (default: --task)")
    parser.add_argument("--part", type=int, required=True, help="size of each of the four equal parts")
    parser.add_argument("--aux", type=int, required=True, help="size of the auxiliary set")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    log = script_logger("contrastive_data")
    image_splits = load_image_splits(args.splits)
    dataset = image_splits["dataset"]
    membership_task = args.membership_task or args.task
    # an unknown map fails here, before the pool is read
    mappings = {name: label_map(dataset, name) for name in (args.task, membership_task)}
    pool = load_pool(dataset, args.data_root, recorded=image_splits["pool"])
    classes = pool.labels.numpy()
    needs_coarse = any(m.class_to_task is None for m in mappings.values())
    coarse = cifar100_superclasses(args.data_root) if needs_coarse else None
    splits = make_contrastive_splits(classes, image_splits["splits"]["pretrain"], args.part, args.aux, args.seed)
    labelled = classes >= 0  # STL-10's unlabelled images have class -1 and no task label

    def labels_of(name: str) -> dict[str, list[int]]:
        of = np.full(len(classes), -1)
        of[labelled] = task_labels(dataset, name, classes[labelled], None if coarse is None else coarse[labelled])
        return {split: [int(v) for v in of[idx]] for split, idx in splits.items()}

    task, membership = labels_of(args.task), labels_of(membership_task)
    attribute = {name: classes[idx].tolist() for name, idx in splits.items()}
    for name in splits:
        log.info("%s: %d images, task labels %s, membership-task labels %s, attributes %s", name, len(splits[name]),
                 np.bincount(task[name]).tolist(), np.bincount(membership[name]).tolist(),
                 np.bincount(attribute[name]).tolist())
    atomic_write_json({"dataset": dataset, "task_map": args.task, "task_names": list(mappings[args.task].task_names),
                       "n_task": len(mappings[args.task].task_names), "membership_task_map": membership_task,
                       "membership_task_names": list(mappings[membership_task].task_names),
                       "n_membership_task": len(mappings[membership_task].task_names),
                       "n_attribute": pool.n_classes, "pool": image_splits["pool"], "splits": splits, "task": task,
                       "membership_task": membership,
                       "attribute": {k: [int(v) for v in a] for k, a in attribute.items()}}, args.out)


if __name__ == "__main__":
    main()
