"""Task and sensitive attribute from a coarse/fine pair of labels (thesis §4.3.3).

The thesis takes the classification task from a coarse label and the sensitive attribute from a
fine one: Places (task indoor/outdoor, attribute the scene category), UTKFace (task gender,
attribute race). Here the attribute is always the dataset's class and the task a coarse map of
it, so the task never reveals more than the attribute and the attribute is never a function of
the task:
- digits: `parity` (even / odd) or `low_high` (0–4 / 5–9);
- cifar10, stl10: `animal_vehicle`;
- fashion_mnist: `garment_accessory` (garments / footwear and bags);
- synthetic_cifar: `low_high` (classes 0–4 / 5–9);
- cifar100: `superclass`, the 20 superclasses read from the dataset's own coarse labels;
- every dataset: `class`, its own classes, for the membership task only (below).

Free of torch on purpose: the Snakefile imports it to check the config before any job.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from privssl.data.splits import DATASETS


@dataclass(frozen=True)
class LabelMap:
    """`class_to_task[c]`: the task label of class c; None: read per image from the dataset."""

    task_names: tuple[str, ...]
    class_to_task: tuple[int, ...] | None


_CIFAR10_VEHICLES = {0, 1, 8, 9}  # airplane, automobile, ship, truck
_STL10_VEHICLES = {0, 2, 8, 9}  # airplane, car, ship, truck
_FASHION_ACCESSORIES = {5, 7, 8, 9}  # sandal, sneaker, bag, ankle boot; 0-4 and 6 are garments
LABEL_MAPS = {
    "digits": {"parity": LabelMap(("even", "odd"), tuple(c % 2 for c in range(10))),
               "low_high": LabelMap(("0-4", "5-9"), tuple(int(c >= 5) for c in range(10)))},
    "cifar10": {"animal_vehicle": LabelMap(("animal", "vehicle"), tuple(int(c in _CIFAR10_VEHICLES)
                                                                          for c in range(10)))},
    "stl10": {"animal_vehicle": LabelMap(("animal", "vehicle"), tuple(int(c in _STL10_VEHICLES) for c in range(10)))},
    "synthetic_cifar": {"low_high": LabelMap(("0-4", "5-9"), tuple(int(c >= 5) for c in range(10)))},
    "cifar100": {"superclass": LabelMap(tuple(f"superclass_{k}" for k in range(20)), None)},
    "fashion_mnist": {"garment_accessory": LabelMap(("garment", "accessory"),
                                                    tuple(int(c in _FASHION_ACCESSORIES) for c in range(10)))},
}
# `class`, every dataset's own classes: the membership task (contrastive.datasets.*.membership_task)
# where the coarse task's model does not memorise its members. Never the attribute claims' task: a
# model of the class reveals the attribute by construction (privssl.config refuses it there).
CLASS_MAP = "class"
for _dataset, _info in DATASETS.items():  # every registered dataset has its own classes' map
    LABEL_MAPS.setdefault(_dataset, {})[CLASS_MAP] = LabelMap(tuple(f"class_{c}" for c in range(_info.n_classes)),
                                                              tuple(range(_info.n_classes)))


def membership_task_of(entry: dict) -> str:
    """The label map of a `contrastive.datasets` entry's membership models: its own, else the task."""
    return entry.get("membership_task", entry["task"])


def label_map(dataset: str, name: str) -> LabelMap:
    """The label map `name` of `dataset`; ValueError naming the allowed ones otherwise."""
    maps = LABEL_MAPS.get(dataset)
    if maps is None:
        raise ValueError(f"dataset {dataset!r} has no label maps; allowed datasets: {', '.join(LABEL_MAPS)}")
    if name not in maps:
        raise ValueError(f"unknown label map {name!r} for {dataset}; allowed: {', '.join(maps)}")
    return maps[name]


def check_partition(class_to_task, n_classes: int, n_tasks: int) -> None:
    """Every class has exactly one task label in [0, n_tasks) and every task label has a class."""
    class_to_task = np.asarray(class_to_task)
    if class_to_task.shape != (n_classes,):
        raise ValueError(f"a label map needs one task label per class ({n_classes}), got {class_to_task.shape}")
    if class_to_task.min() < 0 or class_to_task.max() >= n_tasks:
        raise ValueError(f"task labels must lie in [0, {n_tasks}), got {sorted(set(class_to_task.tolist()))}")
    empty = sorted(set(range(n_tasks)) - set(class_to_task.tolist()))
    if empty:
        raise ValueError(f"task labels {empty} have no class: the map does not cover the task")


def cifar100_superclasses(root: str | Path) -> np.ndarray:
    """The coarse label of every CIFAR-100 image, in the order data.load_pool concatenates them
    (train, then test), read from the files torchvision downloaded and checked."""
    labels = []
    for part in ("train", "test"):
        with open(Path(root) / "cifar-100-python" / part, "rb") as f:
            labels.append(np.asarray(pickle.load(f, encoding="latin1")["coarse_labels"]))
    return np.concatenate(labels)


def task_labels(dataset: str, name: str, classes: np.ndarray, coarse: np.ndarray | None = None) -> np.ndarray:
    """The task label of every image of class `classes[i]`; `coarse`: the dataset's own coarse
    labels where the map reads them (CIFAR-100), checked to be a function of the class."""
    mapping = label_map(dataset, name)
    classes = np.asarray(classes)
    if mapping.class_to_task is not None:
        check_partition(mapping.class_to_task, len(mapping.class_to_task), len(mapping.task_names))
        return np.asarray(mapping.class_to_task)[classes]
    if coarse is None or len(coarse) != len(classes):
        raise ValueError(f"label map {name!r} of {dataset} needs the dataset's coarse label of each of the "
                         f"{len(classes)} images")
    class_to_task = np.full(classes.max() + 1, -1)
    class_to_task[classes] = coarse
    if not (class_to_task[classes] == coarse).all():
        raise ValueError(f"the coarse labels of {dataset} are not a function of its classes")
    if coarse.min() < 0 or coarse.max() >= len(mapping.task_names):
        raise ValueError(f"coarse labels of {dataset} must lie in [0, {len(mapping.task_names)}), got "
                         f"[{coarse.min()}, {coarse.max()}]")
    return np.asarray(coarse)
