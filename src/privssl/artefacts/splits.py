"""The checks every track's splits.json shares: pairwise disjoint splits, and the record of the
pool their indices point into."""

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
