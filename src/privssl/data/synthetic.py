"""CIFAR-shaped images generated on the spot: 32x32 RGB, 10 classes, no download.

For machines without network (the GPU check, configs/gpu-smoke.yaml): the ResNet-18, WRN-28-2
and RandAugment paths see images of CIFAR's shape and type. Each class is a smooth colour
pattern (a sum of random low-frequency plane waves per channel); an image is its class pattern
shifted, rescaled in contrast, overlaid with an image-specific wave and pixel noise, so that a
network has to generalise across shifts to classify it. Fixed by its own seed, never by the
config's: the same dataset everywhere, like a downloaded one. Not a benchmark of privacy.
"""

from __future__ import annotations

import numpy as np

SEED = 20261126
SIZE = 32
WAVES = 4        # plane waves per class and channel
MAX_SHIFT = 4    # pixels, both axes (CIFAR's random-crop padding)
NOISE = 0.2     # pixel noise std on the [0, 1] scale


def _waves(rng: np.random.Generator, count: int, waves: int) -> np.ndarray:
    """`count` smooth RGB patterns in [0, 1], shape (count, 3, SIZE, SIZE)."""
    grid = np.arange(SIZE) / SIZE
    freq = rng.integers(-3, 4, size=(count, 3, waves, 2))
    phase = rng.uniform(0, 2 * np.pi, size=(count, 3, waves, 1, 1))
    angle = (2 * np.pi * (freq[..., 0, None, None] * grid[:, None] + freq[..., 1, None, None] * grid[None, :])
             + phase)
    pattern = np.cos(angle).sum(axis=2) / waves
    return 0.5 + 0.5 * pattern


def synthetic_images(count: int, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (count, 3, 32, 32), labels int64 (count,)): balanced classes in random order."""
    rng = np.random.default_rng(SEED)
    prototypes = _waves(rng, n_classes, WAVES)
    labels = rng.permutation(np.arange(count) % n_classes)
    shifts = rng.integers(-MAX_SHIFT, MAX_SHIFT + 1, size=(count, 2))
    rows = (np.arange(SIZE)[None, :] - shifts[:, :1]) % SIZE
    cols = (np.arange(SIZE)[None, :] - shifts[:, 1:]) % SIZE
    shifted = prototypes[labels][np.arange(count)[:, None, None, None], np.arange(3)[None, :, None, None],
                                 rows[:, None, :, None], cols[:, None, None, :]]
    contrast = rng.uniform(0.6, 1.4, size=(count, 1, 1, 1))
    distractor = _waves(rng, count, 1)
    images = 0.5 + contrast * (shifted - 0.5) + 0.8 * (distractor - 0.5) + rng.normal(0, NOISE, shifted.shape)
    return np.round(np.clip(images, 0, 1) * 255).astype(np.uint8), labels.astype(np.int64)
