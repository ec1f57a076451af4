"""Label maps of the contrastive branch (task = coarse label, attribute = class) and its splits."""

import pickle

import numpy as np
import pytest

from privssl.data.label_maps import LABEL_MAPS, check_partition, cifar100_superclasses, label_map, task_labels
from privssl.data.splits import (
    CONTRASTIVE_SPLITS,
    check_contrastive_sizes,
    contrastive_capacity,
    make_contrastive_splits,
)


@pytest.mark.parametrize("dataset, name", [(d, n) for d, maps in LABEL_MAPS.items() for n, m in maps.items()
                                           if m.class_to_task is not None])
def test_fixed_label_maps_partition_the_classes(dataset, name):
    mapping = label_map(dataset, name)
    classes = np.arange(len(mapping.class_to_task))
    tasks = task_labels(dataset, name, classes)
    # every class in exactly one task class, every task class non-empty, and more than one of them
    groups = [set(classes[tasks == t]) for t in range(len(mapping.task_names))]
    assert set().union(*groups) == set(classes.tolist()) and sum(map(len, groups)) == len(classes)
    assert all(groups) and len(groups) >= 2


def test_known_maps():
    assert task_labels("digits", "parity", np.arange(10)).tolist() == [0, 1] * 5
    assert task_labels("digits", "low_high", np.arange(10)).tolist() == [0] * 5 + [1] * 5
    # CIFAR-10: airplane, automobile, ship, truck are vehicles
    assert np.flatnonzero(task_labels("cifar10", "animal_vehicle", np.arange(10))).tolist() == [0, 1, 8, 9]
    # STL-10: airplane, bird, car, cat, deer, dog, horse, monkey, ship, truck
    assert np.flatnonzero(task_labels("stl10", "animal_vehicle", np.arange(10))).tolist() == [0, 2, 8, 9]
    # Fashion-MNIST: sandal, sneaker, bag, ankle boot are accessories; t-shirt, trouser, pullover, dress, coat, shirt
    # are garments
    assert label_map("fashion_mnist", "garment_accessory").task_names == ("garment", "accessory")
    assert np.flatnonzero(task_labels("fashion_mnist", "garment_accessory", np.arange(10))).tolist() == [5, 7, 8, 9]


def test_unknown_map_is_named_with_the_allowed_ones():
    with pytest.raises(ValueError, match=r"unknown label map 'colour' for digits; allowed: parity, low_high"):
        label_map("digits", "colour")
    with pytest.raises(ValueError, match="has no label maps"):
        label_map("mnist", "parity")


def test_partition_check_refuses_an_empty_or_out_of_range_task():
    with pytest.raises(ValueError, match=r"task labels \[1\] have no class"):
        check_partition([0, 0, 0], 3, 2)
    with pytest.raises(ValueError, match="must lie in"):
        check_partition([0, 2, 1], 3, 2)


def test_cifar100_superclasses_are_read_from_the_dataset_files(tmp_path):
    # the format of the python version of CIFAR-100 (pickled dicts with fine and coarse labels)
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    rng = np.random.default_rng(0)
    fine_to_coarse = rng.permutation(np.repeat(np.arange(20), 5))
    fine = {"train": rng.integers(0, 100, 500), "test": rng.integers(0, 100, 100)}
    for part, labels in fine.items():
        (folder / part).write_bytes(pickle.dumps({"fine_labels": labels.tolist(),
                                                  "coarse_labels": fine_to_coarse[labels].tolist()}))
    coarse = cifar100_superclasses(tmp_path)
    classes = np.concatenate([fine["train"], fine["test"]])
    assert coarse.tolist() == fine_to_coarse[classes].tolist()
    assert task_labels("cifar100", "superclass", classes, coarse).tolist() == coarse.tolist()
    broken = coarse.copy()
    broken[classes == classes[0]] = (broken[0] + 1) % 20  # class 0's images now in another superclass...
    broken[np.flatnonzero(classes == classes[0])[0]] = coarse[0]  # ...but one of them still in the old one
    with pytest.raises(ValueError, match="not a function of its classes"):
        task_labels("cifar100", "superclass", classes, broken)


def test_contrastive_splits_are_disjoint_equal_and_avoid_the_public_data():
    labels = np.r_[np.full(50, -1), np.arange(300) % 10]  # 50 unlabelled images first
    public = list(range(50, 110))
    splits = make_contrastive_splits(labels, public, part=40, aux=30, seed=1)
    assert list(splits) == list(CONTRASTIVE_SPLITS)
    assert [len(splits[s]) for s in CONTRASTIVE_SPLITS] == [40, 40, 40, 40, 30]
    drawn = [i for s in splits.values() for i in s]
    assert len(set(drawn)) == len(drawn)
    assert not set(drawn) & set(public) and min(drawn) >= 50
    assert splits == make_contrastive_splits(labels, public, part=40, aux=30, seed=1)


def test_contrastive_sizes_must_fit_beside_the_pretraining_split():
    sizes = {"pretrain": 597, "finetune": 150, "nonmember": 150, "shadow": 300, "test": 300, "reference": 300}
    assert contrastive_capacity("digits", sizes) == 1200
    check_contrastive_sizes("digits", sizes, 240, 240)
    with pytest.raises(ValueError, match=r"need 1201 labelled images.*allowed: 4 \* part \+ aux <= 1200"):
        check_contrastive_sizes("digits", sizes, 240, 241)
    assert contrastive_capacity("stl10", dict(sizes, pretrain=100000)) == 13000  # unlabelled images first
