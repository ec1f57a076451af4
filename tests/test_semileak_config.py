"""The semi-supervised branch's splits, sizes, config checks and the rows its attack table must
hold (privssl.data.splits, privssl.config.check_semileak, privssl.artefacts.semileak.semileak_rows)."""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from privssl.artefacts.semileak import semileak_rows as semileak
from privssl.artefacts.tables import key_value
from privssl.config import ConfigError, load_config_file, validate_config
from privssl.data.splits import DATASETS, SEMILEAK_SPLITS, check_semileak_sizes, make_semileak_splits

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schemas" / "config.schema.yaml"
DEFAULT = load_config_file(REPO / "config.yaml")

# ------------------------------------------------------------------------------ splits


def class_counts(classes: np.ndarray, index: list[int]) -> Counter:
    return Counter(classes[index].tolist())


def test_four_disjoint_parts_with_the_labelled_images_inside_the_train_parts():
    classes = np.arange(500) % 10
    parts, labelled = make_semileak_splits(classes, 100, 25, seed=0)
    assert list(parts) == list(SEMILEAK_SPLITS)
    assert all(len(index) == 100 and len(set(index)) == 100 for index in parts.values())
    assert len(set().union(*map(set, parts.values()))) == 400  # pairwise disjoint
    assert sorted(labelled) == ["shadow_train", "target_train"]
    for name, index in labelled.items():
        assert len(index) == 25 and set(index) <= set(parts[name])


def test_labelled_images_spread_evenly_over_the_classes():
    classes = np.arange(800) % 10  # ~20 images per class in a part of 200: every class can give 3
    parts, labelled = make_semileak_splits(classes, 200, 25, seed=1)
    for name, index in labelled.items():
        counts = class_counts(classes, index)
        assert min(class_counts(classes, parts[name]).values()) >= 3  # the part allows 2 or 3 of each
        assert sorted(counts.values()) == [2] * 5 + [3] * 5


def test_a_scarce_class_gives_what_it_has_and_the_others_stay_even():
    # class 0 is rare: one image in 20; the others share the labelled images evenly
    classes = np.where(np.arange(2000) % 20 == 0, 0, 1 + np.arange(2000) % 3)
    parts, labelled = make_semileak_splits(classes, 400, 61, seed=2)
    for name, index in labelled.items():
        available, counts = class_counts(classes, parts[name]), class_counts(classes, index)
        assert sum(counts.values()) == 61
        for a, b in itertools.permutations(available, 2):  # fewer than another class by 2: exhausted
            if counts[a] < counts[b] - 1:
                assert counts[a] == available[a]
    # with only a handful of class-0 images in a part, class 0 is exhausted and 1, 2, 3 differ by at most 1
    counts = class_counts(classes, labelled["target_train"])
    assert counts[0] == class_counts(classes, parts["target_train"])[0] < 20
    assert max(counts[c] for c in (1, 2, 3)) - min(counts[c] for c in (1, 2, 3)) <= 1


def test_semileak_splits_are_drawn_from_labelled_images_and_follow_the_seed():
    classes = np.arange(300) % 5
    classes[::3] = -1  # unlabelled images: never in a part
    first, again, other = (make_semileak_splits(classes, 40, 10, seed=s) for s in (4, 4, 5))
    assert first == again
    assert first != other
    assert all((classes[index] >= 0).all() for index in first[0].values())
    with pytest.raises(ValueError, match="4 parts of 60 need 240 labelled images, only 200 exist"):
        make_semileak_splits(classes, 60, 10, seed=0)


@pytest.mark.parametrize("part, labels, bad", [
    (100, 101, "labels = 101"),  # more labelled than the part
    (100, 100, "labels = 100"),  # no unlabelled image left
    (100, 9, "labels = 9"),  # fewer than the 10 classes
    (450, 40, "4 parts of 450 need 1800"),  # digits has 1797 images
])
def test_check_semileak_sizes_refuses_bad_sizes_naming_them(part, labels, bad):
    with pytest.raises(ValueError, match=bad):
        check_semileak_sizes("digits", part, labels)


@pytest.mark.parametrize("part, labels", [(449, 10), (100, 99)])
def test_check_semileak_sizes_accepts_the_limits(part, labels):
    assert 4 * 449 <= DATASETS["digits"].labelled < 4 * 450
    check_semileak_sizes("digits", part, labels)


# ------------------------------------------------------------------------------ config


def default_config() -> dict:
    return copy.deepcopy(DEFAULT)


def refused(config: dict) -> str:
    with pytest.raises(ConfigError) as error:
        validate_config(config, SCHEMA)
    return str(error.value)


def test_the_default_config_with_its_semileak_section_is_valid():
    config = default_config()
    assert "semileak" in config and "digits" in config["semileak"]["datasets"]
    validate_config(config, SCHEMA)


def setting(config: dict, path: str, value) -> dict:
    *parents, last = path.split(".")
    section = config
    for part in parents:
        section = section[part]
    section[last] = value
    return config


@pytest.mark.parametrize("path, value, message", [
    ("semileak.datasets.digits", {"part": 440, "labels": 441}, "config key 'semileak.datasets.digits': labels = 441"),
    ("semileak.datasets.digits", {"part": 440, "labels": 5}, "config key 'semileak.datasets.digits': labels = 5"),
    ("semileak.datasets.digits", {"part": 500, "labels": 40},
     "config key 'semileak.datasets.digits': 4 parts of 500 need 2000"),
    ("semileak.datasets.cifar10", {"part": 100, "labels": 20},
     "config key 'semileak.datasets.cifar10': cifar10 is not among the image datasets"),
    ("semileak.attack.views", 0, "config key 'semileak.attack.views': 0 is less than the minimum of 1"),
    ("semileak.algorithms", ["fixmatch", "mixmatch"], "config key 'semileak.algorithms[1]': 'mixmatch' is not one of"),
    ("semileak.attack.similarity", "kl", "config key 'semileak.attack.similarity': 'kl' is not one of"),
    ("semileak.attack.similarities", ["js", "kl"], "config key 'semileak.attack.similarities[1]': 'kl'"),
    ("semileak.defences.early_stopping", 300, "config key 'semileak.defences.early_stopping': 300 is not a checkpoint"),
    ("semileak.defences.early_stopping", 800,  # the last step is no early stop
     "config key 'semileak.defences.early_stopping': 800 is not a checkpoint before the last"),
    ("semileak.train.checkpoint_every", 300,
     "config key 'semileak.train.checkpoint_every': 300 does not divide steps = 800"),
    ("semileak.train.batch_size", 41, "config key 'semileak.train.batch_size': DP-SGD samples B = 41"),
    ("semileak.train.unlabelled_ratio", 26, "config key 'semileak.train.batch_size': DP-SGD samples B = 16"),
    ("semileak.augmentation.padding", 8, "config key 'semileak.augmentation.padding': 8 pixels do not fit"),
])
def test_a_bad_semileak_value_is_refused_naming_its_key(path, value, message):
    assert message in refused(setting(default_config(), path, value))


@pytest.mark.parametrize("path, value", [("semileak.train.batch_size", 41), ("semileak.train.unlabelled_ratio", 26)])
def test_batches_larger_than_the_labelled_set_are_allowed_without_dpsgd(path, value):
    # only DP-SGD's Poisson sampling needs rates <= 1 (16 · 26 = 416 > 400 unlabelled images)
    config = setting(default_config(), path, value)
    del config["semileak"]["defences"]["dpsgd"]
    validate_config(config, SCHEMA)


# ------------------------------------------------------------------------------ the table's rows


def grid_keys(blocks: list[dict]) -> set[tuple]:
    """The distinct rows of the union of the blocks' products, as the table's reader compares them."""
    columns = list(blocks[0])
    return {key for block in blocks for key in itertools.product(*([key_value(v) for v in block[c]] for c in columns))}


def test_the_semileak_grid_of_the_default_config_has_the_rows_the_attack_rule_writes():
    config = default_config()
    section = config["semileak"]
    train, attack, defences = section["train"], section["attack"], section["defences"]
    algorithms, kinds = len(section["algorithms"]), 3  # all, labelled, unlabelled members
    checkpoints = train["steps"] // train["checkpoint_every"]
    baselines = 5  # A_NN and the four metric attacks
    settings = {(attack["views"], attack["similarity"])}  # A_DA's settings at the last step
    settings |= {(k, attack["similarity"]) for k in attack["views_grid"]}
    settings |= {(attack["views"], s) for s in attack["similarities"]}
    per_algorithm = (checkpoints * (baselines + 1) + (len(settings) - 1)  # the default A_DA is a checkpoint's
                     + (baselines + 1) * defences["top1"]) * kinds
    supervised = baselines + 1  # its members: all
    dpsgd = len(defences["dpsgd"]["eps"]) * (baselines + 1) * kinds
    expected = algorithms * per_algorithm + supervised + dpsgd
    assert (algorithms, checkpoints, len(settings)) == (3, 4, 8)  # the config this count was written for
    assert expected == 3 * (4 * 6 + 7 + 6) * 3 + 6 + 4 * 6 * 3 == 411
    keys = grid_keys(semileak(config, "digits", 0))
    assert len(keys) == expected
    columns = list(semileak(config, "digits", 0)[0])
    rows = [dict(zip(columns, key)) for key in keys]
    assert {r["step"] for r in rows if r["target"] == "fixmatch"} == {200.0, 400.0, 600.0, 800.0}
    assert {r["member_kind"] for r in rows if r["target"] == "supervised"} == {"all"}
    assert {r["step"] for r in rows if r["target"] == "fixmatch_dpsgd"} == {200.0}
    assert {r["defence"] for r in rows if r["step"] != 800.0} == {"none"}  # top-1 at the last step only


def test_the_semileak_grid_drops_top1_and_dpsgd_when_they_are_off():
    config = default_config()
    config["semileak"]["defences"]["top1"] = False
    del config["semileak"]["defences"]["dpsgd"]
    rows = grid_keys(semileak(config, "digits", 0))
    assert len(rows) == 3 * (4 * 6 + 7) * 3 + 6
