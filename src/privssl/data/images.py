"""Image datasets as one pool of images per dataset.

CIFAR-10/100 and STL-10 are read through torchvision, whose classes download into the data
root and check their archives' MD5 sums; `digits` is scikit-learn's bundled copy (offline).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from privssl.data.splits import DATASETS


@dataclass
class ImagePool:
    """All images of a dataset: (N, C, H, W) uint8 or float in [0, 1]; label −1 = unlabelled."""

    images: torch.Tensor
    labels: torch.Tensor
    n_classes: int


def _torchvision_pool(dataset: str, root: Path, download: bool) -> ImagePool:
    from torchvision import datasets

    root.mkdir(parents=True, exist_ok=True)
    try:
        if dataset in ("cifar10", "cifar100"):
            cls = datasets.CIFAR10 if dataset == "cifar10" else datasets.CIFAR100
            parts = [cls(str(root), train=train, download=download) for train in (True, False)]
            images = np.concatenate([p.data for p in parts]).transpose(0, 3, 1, 2)  # NHWC -> NCHW
            labels = np.concatenate([np.asarray(p.targets) for p in parts])
        else:
            parts = [datasets.STL10(str(root), split=s, download=download) for s in ("train", "test", "unlabeled")]
            images = np.concatenate([p.data for p in parts])
            labels = np.concatenate([np.asarray(p.labels) for p in parts])  # unlabeled: -1
    except RuntimeError as err:  # torchvision: "Dataset not found or corrupted"
        hint = "" if download else " (download is off: run the data rule on a machine with internet)"
        raise FileNotFoundError(f"{dataset} not found or corrupted under data root {root}{hint}: {err}") from err
    return ImagePool(torch.from_numpy(np.ascontiguousarray(images)), torch.from_numpy(labels).long(),
                     DATASETS[dataset].n_classes)


def load_pool(dataset: str, root: str | Path, download: bool = False) -> ImagePool:
    """Every image of `dataset`; downloads into `root` first when `download` is true."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; allowed: {', '.join(DATASETS)}")
    if dataset == "digits":
        from sklearn.datasets import load_digits

        bunch = load_digits()
        images = torch.from_numpy(bunch.images / 16.0).float().unsqueeze(1)  # 0..16 -> [0, 1]
        return ImagePool(images, torch.from_numpy(bunch.target).long(), 10)
    return _torchvision_pool(dataset, Path(root), download)
