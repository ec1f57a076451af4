"""The disjoint splits of the threat model, and the sizes each dataset allows.

Splits (index sets into one pool of images per dataset, pairwise disjoint):
- `pretrain`  — the public set D for SimCLR (labels unused; STL-10's unlabelled images first);
- `finetune`  — the private set d, the victim's members;
- `nonmember` — never seen by the victim: the non-members of the membership-inference test;
- `shadow`    — the attacker's own data (half trains its shadow head, half is 'out');
- `test`      — held-out queries for accuracy and utility loss;
- `reference` — a labelled public pool, the population the sensitivity sampler draws its
  neighbouring data sets from (Rubinstein & Aldà 2017); never part of d. The presets take it
  from the public data (it is carved out of what would otherwise be pre-training data).

Free of torch on purpose: the Snakefile imports it to validate the config before any job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

SPLITS = ("pretrain", "finetune", "nonmember", "shadow", "test", "reference")
LABELLED_SPLITS = SPLITS[1:]


@dataclass(frozen=True)
class DatasetInfo:
    labelled: int  # images with a class label
    unlabelled: int  # images usable for pre-training only
    n_classes: int
    channels: int
    image_size: int
    # (folder under data_root, file names): what its loader (privssl.data.images, torchvision's
    # classes) opens without downloading, which the config check looks for before any job
    # (privssl.config.check_data_present); None: read from no file (bundled or generated). No
    # default: an entry that forgot its files would have its offline check skipped.
    files: tuple[str, tuple[str, ...]] | None


_CIFAR10 = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch", "batches.meta")
# The registry of image data sets: a new one is an entry here and its loader in privssl.data.images
# (tests/test_config.py checks the file lists against torchvision's own).
DATASETS = {
    "digits": DatasetInfo(1797, 0, 10, 1, 8, None),  # scikit-learn's bundled copy
    "cifar10": DatasetInfo(60000, 0, 10, 3, 32, ("cifar-10-batches-py", _CIFAR10)),
    "cifar100": DatasetInfo(60000, 0, 100, 3, 32, ("cifar-100-python", ("train", "test", "meta"))),
    "stl10": DatasetInfo(13000, 100000, 10, 3, 96, ("stl10_binary", ("train_X.bin", "train_y.bin", "unlabeled_X.bin",
                                                                      "test_X.bin", "test_y.bin"))),
    "fashion_mnist": DatasetInfo(70000, 0, 10, 1, 28, ("FashionMNIST/raw", tuple(
        f"{part}-{kind}-ubyte" for part in ("train", "t10k") for kind in ("images-idx3", "labels-idx1")))),
    # CIFAR-shaped images generated on the spot (privssl.data.synthetic): the ResNet-18 and WRN-28-2
    # paths on a machine without network (configs/gpu-smoke.yaml); not a benchmark of privacy
    "synthetic_cifar": DatasetInfo(12000, 0, 10, 3, 32, None),
}
# Debian's dataset-fashion-mnist package puts Zalando's four .gz files here; the data loader lays
# them out for torchvision, and the config check accepts them in place of data_root's copies.
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


def check_split_sizes(dataset: str, sizes: dict[str, int]) -> None:
    """Raise ValueError naming the bad size if the splits cannot be drawn from `dataset`."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; allowed: {', '.join(DATASETS)}")
    info = DATASETS[dataset]
    for name in SPLITS:
        if name not in sizes:
            raise ValueError(f"split size '{name}' missing for dataset {dataset!r}")
        if not isinstance(sizes[name], int) or sizes[name] < 0:
            raise ValueError(f"split size '{name}' of {dataset!r} must be an integer >= 0, got {sizes[name]!r}")
    labelled_needed = sum(sizes[s] for s in LABELLED_SPLITS) + max(0, sizes["pretrain"] - info.unlabelled)
    if labelled_needed > info.labelled:
        detail = ", ".join(f"{s}={sizes[s]}" for s in SPLITS)
        raise ValueError(
            f"split sizes of {dataset!r} ({detail}) need {labelled_needed} labelled images, "
            f"but {dataset} has {info.labelled} labelled and {info.unlabelled} unlabelled images")


def make_splits(dataset: str, labels, sizes: dict[str, int], seed: int) -> dict[str, list[int]]:
    """Draw the disjoint splits at random (seeded); pre-training uses unlabelled images first."""
    check_split_sizes(dataset, sizes)
    labels = np.asarray(labels)
    generator = np.random.default_rng(seed)
    labelled = generator.permutation(np.flatnonzero(labels >= 0))
    unlabelled = generator.permutation(np.flatnonzero(labels < 0))
    from_unlabelled = min(sizes["pretrain"], len(unlabelled))
    from_labelled = sizes["pretrain"] - from_unlabelled
    splits = {"pretrain": np.concatenate([unlabelled[:from_unlabelled], labelled[:from_labelled]])}
    offset = from_labelled
    for name in LABELLED_SPLITS:
        splits[name] = labelled[offset:offset + sizes[name]]
        offset += sizes[name]
    for name, idx in splits.items():  # the labels given may hold fewer images than the table says
        if len(idx) != sizes[name]:
            raise ValueError(f"split '{name}' of {dataset!r} needs {sizes[name]} images, only {len(idx)} are left "
                             f"among the {len(labels)} given")
    return {name: sorted(idx.tolist()) for name, idx in splits.items()}


# The contrastive-privacy branch (thesis Ch. 4): four equal disjoint parts and the attribute
# adversary's auxiliary set, drawn from the labelled records the public encoder never saw (its
# `pretrain` split), so that no member or non-member of a target was in its pre-training data.
CONTRASTIVE_SPLITS = ("target_train", "target_test", "shadow_train", "shadow_test", "aux")


def labelled_public(dataset: str, sizes: dict[str, int]) -> int:
    """Labelled images in the public pre-training split (which takes the unlabelled ones first):
    what a pre-training that needs labels (DPAdapter's classifier) can use."""
    return max(0, sizes["pretrain"] - DATASETS[dataset].unlabelled)


def contrastive_capacity(dataset: str, sizes: dict[str, int]) -> int:
    """Labelled records outside the public pre-training split of `sizes` (the image track's)."""
    info = DATASETS[dataset]
    return info.labelled - max(0, sizes["pretrain"] - info.unlabelled)


def check_contrastive_sizes(dataset: str, sizes: dict[str, int], part: int, aux: int) -> None:
    """Raise ValueError if 4 parts and the auxiliary set do not fit beside the pre-training split."""
    capacity = contrastive_capacity(dataset, sizes)
    if 4 * part + aux > capacity:
        raise ValueError(f"4 parts of {part} and aux = {aux} need {4 * part + aux} labelled images, but {dataset} has "
                         f"{capacity} outside the public pre-training split (pretrain = {sizes['pretrain']}); allowed: "
                         f"4 * part + aux <= {capacity}")


def make_contrastive_splits(labels, public: list[int], part: int, aux: int, seed: int) -> dict[str, list[int]]:
    """Draw the branch's splits (seeded) from the labelled images not in `public`."""
    labels = np.asarray(labels)
    candidates = np.setdiff1d(np.flatnonzero(labels >= 0), np.asarray(public, dtype=int))
    if 4 * part + aux > len(candidates):
        raise ValueError(f"4 parts of {part} and aux = {aux} need {4 * part + aux} labelled images outside the "
                         f"pre-training split, only {len(candidates)} are left")
    drawn = np.random.default_rng(seed).permutation(candidates)
    sizes = [part] * 4 + [aux]
    bounds = np.cumsum([0] + sizes)
    return {name: sorted(drawn[bounds[i]:bounds[i + 1]].tolist()) for i, name in enumerate(CONTRASTIVE_SPLITS)}


SEMILEAK_SPLITS = ("target_train", "target_test", "shadow_train", "shadow_test")  # thesis §3.4.1


def check_semileak_sizes(dataset: str, part: int, labels: int) -> None:
    """Raise ValueError if four parts of `part` labelled images, `labels` of each train part
    labelled (at least one per class) and the rest unlabelled, cannot be drawn from `dataset`."""
    info = DATASETS[dataset]
    if 4 * part > info.labelled:
        raise ValueError(f"4 parts of {part} need {4 * part} labelled images, but {dataset} has {info.labelled}; "
                         f"allowed: part <= {info.labelled // 4}")
    if not info.n_classes <= labels < part:
        raise ValueError(f"labels = {labels} is not allowed for parts of {part} images of {info.n_classes} classes; "
                         f"allowed: {info.n_classes} <= labels < part (one labelled image per class at least, "
                         "one unlabelled image at least)")


def make_semileak_splits(classes, part: int, labels: int,
                         seed: int) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Four equal random parts of the labelled images (seeded), and in each train part `labels`
    images keeping their labels, spread over the classes as evenly as the part allows (FixMatch's
    labelled sets hold the same number per class); the others are used unlabelled."""
    classes = np.asarray(classes)
    rng = np.random.default_rng(seed)
    drawn = rng.permutation(np.flatnonzero(classes >= 0))[:4 * part]
    if len(drawn) < 4 * part:
        raise ValueError(f"4 parts of {part} need {4 * part} labelled images, only {len(drawn)} exist")
    parts = {name: drawn[i * part:(i + 1) * part] for i, name in enumerate(SEMILEAK_SPLITS)}
    labelled = {}
    for name in ("target_train", "shadow_train"):
        index = rng.permutation(parts[name])
        # round robin over the classes: the r-th image of each class before any class's (r+1)-th
        rank = np.zeros(len(index), dtype=int)
        for c in np.unique(classes[index]):
            members = classes[index] == c
            rank[members] = np.arange(members.sum())
        order = np.lexsort((rng.random(len(index)), rank))
        labelled[name] = sorted(index[order[:labels]].tolist())
    return {name: sorted(idx.tolist()) for name, idx in parts.items()}, labelled
