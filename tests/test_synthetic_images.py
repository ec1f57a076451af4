"""synthetic_cifar: CIFAR-shaped images generated on the spot for the GPU check."""

import numpy as np
import torch

from privssl.data.images import load_pool
from privssl.data.label_maps import task_labels
from privssl.data.splits import DATASETS
from privssl.data.synthetic import synthetic_images


def test_the_pool_has_cifars_shape_and_balanced_classes_and_is_the_same_every_time():
    pool = load_pool("synthetic_cifar", "unused")
    info = DATASETS["synthetic_cifar"]
    assert pool.images.shape == (info.labelled, 3, 32, 32) and pool.images.dtype == torch.uint8
    assert torch.bincount(pool.labels).tolist() == [info.labelled // 10] * 10
    first, again = synthetic_images(500, 10), synthetic_images(500, 10)
    assert np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])


def test_classes_are_learnable_but_not_trivially():
    """Nearest class mean on 1000 training images: far above chance (0.1), not perfect (shifts,
    contrast, a distractor wave and pixel noise stand between an image and its class pattern)."""
    images, labels = synthetic_images(2000, 10)
    x = images.reshape(len(images), -1).astype(np.float64)
    means = np.stack([x[:1000][labels[:1000] == c].mean(0) for c in range(10)])
    predicted = np.argmin(((x[1000:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    accuracy = (predicted == labels[1000:]).mean()
    assert 0.5 < accuracy < 0.95


def test_the_low_high_task_splits_classes_at_five():
    assert task_labels("synthetic_cifar", "low_high", np.arange(10)).tolist() == [0] * 5 + [1] * 5
