"""The checks every track's splits.json shares: pairwise disjoint splits, the record of the pool
their indices point into, the data set and split sizes a reader expects; and the reader of a
labelled splits file of either kind (an image data set's or a graph's)."""

from __future__ import annotations

import re

from privssl.artefacts.specs import fail
from privssl.data.splits import DATASETS


def _check_disjoint(path, splits: dict) -> None:
    seen: dict[int, str] = {}
    for name, index in splits.items():
        for i in index:
            if i in seen:
                fail(path, f"splits.{name}", f"index {i} is also in splits.{seen[i]}", "pairwise disjoint splits")
            seen[i] = name


def _check_pool(path, record: dict) -> None:
    """A splits file's record of the pool its indices point into (privssl.data.images.pool_record):
    the dataset's size, and a SHA-256 that the readers compare with the pool they load."""
    pool, size = record.get("pool"), DATASETS[record["dataset"]].labelled + DATASETS[record["dataset"]].unlabelled
    if not (isinstance(pool, dict) and set(pool) == {"size", "sha256"} and pool["size"] == size
            and isinstance(pool["sha256"], str) and re.fullmatch("[0-9a-f]{64}", pool["sha256"])):
        fail(path, "pool", repr(pool)[:200], f"{{size: {size}, sha256: 64 hex digits}}, the pool the splits were "
                                             "drawn from")


def _check_reader(path, record: dict, dataset: str | None, sizes: dict | None) -> None:
    """The splits of `dataset` (when given), with `sizes` (split -> length, when given: the encode
    rules wrote split s's features in its order, row i being record splits[s][i])."""
    if dataset is not None and record["dataset"] != dataset:
        fail(path, "dataset", repr(record["dataset"]), f"{dataset!r}, the data set of the reading rule")
    wrong = {s: (len(record["splits"][s]), n) for s, n in (sizes or {}).items() if len(record["splits"][s]) != n}
    if wrong:
        fail(path, "splits", f"split sizes {', '.join(f'{s} {a}' for s, (a, _) in wrong.items())}",
             f"those of the features encoded from it: {', '.join(f'{s} {n}' for s, (_, n) in wrong.items())}")


def load_labelled_splits(path, dataset: str, sizes: dict | None = None) -> dict:
    """splits.json of `dataset`: the data rule's for an image data set (each index an image of its
    pool), graph_data's for a graph (each index a node), checked against the split `sizes`."""
    # here: both loaders import this module's checks
    from privssl.artefacts.graphs import load_graph_splits
    from privssl.artefacts.image import load_image_splits

    return (load_image_splits if dataset in DATASETS else load_graph_splits)(path, dataset, sizes)
