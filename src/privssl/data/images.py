"""Image datasets as one pool of images per dataset.

CIFAR-10/100, STL-10 and Fashion-MNIST are read through torchvision, whose classes download into
the data root and check their archives' MD5 sums; `digits` is scikit-learn's bundled copy
(offline) and `synthetic_cifar` is generated (privssl.data.synthetic). Fashion-MNIST's files
missing from <data root>/FashionMNIST/raw are first laid out from Debian's dataset-fashion-mnist package where it is installed (DEBIAN_FASHION_MNIST), decompressed
and checked against the MD5 sums of the original files; torchvision downloads only what is still
missing then.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import zlib
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from privssl.data.splits import DATASETS, DEBIAN_FASHION_MNIST
from privssl.io import InputError, atomic_path

# MD5 of the uncompressed files of Zalando's release, i.e. of the archives whose MD5 torchvision's
# FashionMNIST.resources lists. Debian's archives hold the same files, but their gzip headers differ
# (no file name, another time stamp), and so do their MD5 sums: the check is on what torchvision reads.
FASHION_MNIST_MD5 = {
    "train-images-idx3-ubyte": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
    "train-labels-idx1-ubyte": "9018921c3c673c538a1fc5bad174d6f9",
    "t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
    "t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
}


@dataclass
class ImagePool:
    """All images of a dataset: (N, C, H, W) uint8 or float in [0, 1]; label −1 = unlabelled."""

    images: torch.Tensor
    labels: torch.Tensor
    n_classes: int


def _decompress_checked(archive: Path, target: Path, name: str) -> None:
    """Decompress `archive` into `target`; InputError naming the archive unless the result is the
    original file `name`."""
    reinstall = "reinstall the package (`apt-get install --reinstall dataset-fashion-mnist`, as root)"
    digest = hashlib.md5(usedforsecurity=False)
    try:
        with gzip.open(archive, "rb") as source, open(target, "wb") as out:
            while chunk := source.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise InputError(f"{archive} is not a readable gzip archive ({err}): {reinstall}") from err
    expected = FASHION_MNIST_MD5[name]
    if digest.hexdigest() != expected:
        raise InputError(f"{archive} does not hold Fashion-MNIST's {name}: its contents have MD5 "
                         f"{digest.hexdigest()}, not {expected} (a corrupt or different file): {reinstall}")


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _check_fashion_mnist(raw: Path) -> None:
    """Each of the four files under <root>/FashionMNIST/raw is the original file of its name,
    whatever put it there (the package, torchvision, a user's copy): with t10k's files under the
    train names the pool would hold 10,000 images twice, one of them a member and the other not."""
    for name, expected in FASHION_MNIST_MD5.items():
        if (raw / name).is_file() and (found := _md5(raw / name)) != expected:
            raise InputError(f"{raw / name} is not Fashion-MNIST's {name}: its MD5 is {found}, not {expected} (another "
                             f"file under its name, e.g. a t10k file as a train file; allowed: the original file: "
                             f"delete it, and the data rule lays it out again from Debian's package)")


def _lay_out_fashion_mnist(root: Path, download: bool) -> None:
    """Put the Debian package's files that <root>/FashionMNIST/raw lacks there, all or none: every
    one is decompressed beside its place and checked before any is renamed into it, so that jobs
    laying out at once, a killed one or a bad archive never leave a partial file under its name.
    FileNotFoundError if files are still missing and `download` is off."""
    raw = root / "FashionMNIST" / "raw"
    missing = [name for name in FASHION_MNIST_MD5 if not (raw / name).is_file()]
    with ExitStack() as stack:
        for name in missing:
            archive = DEBIAN_FASHION_MNIST / f"{name}.gz"
            if archive.is_file():
                _decompress_checked(archive, stack.enter_context(atomic_path(raw / name)), name)
    missing = [name for name in missing if not (raw / name).is_file()]
    if missing and not download:
        raise FileNotFoundError(
            f"fashion_mnist is not under data root {root} (missing {raw}/{{{', '.join(missing)}}}), nor as .gz "
            f"files in {DEBIAN_FASHION_MNIST} (download is off: install Debian's package, "
            f"`apt-get install dataset-fashion-mnist` as root, or set download: true on a machine with internet)")


def _torchvision_pool(dataset: str, root: Path, download: bool) -> ImagePool:
    from torchvision import datasets

    if DATASETS[dataset].files is None:  # the config check would have skipped its files
        raise ValueError(f"dataset {dataset!r} is registered as reading no file (privssl.data.splits.DATASETS, "
                         f"files None) but has no loader that builds it without files (allowed: list the files its "
                         f"loader opens in its registry entry)")
    root.mkdir(parents=True, exist_ok=True)
    try:
        if dataset in ("cifar10", "cifar100"):
            cls = datasets.CIFAR10 if dataset == "cifar10" else datasets.CIFAR100
            parts = [cls(str(root), train=train, download=download) for train in (True, False)]
            images = np.concatenate([p.data for p in parts]).transpose(0, 3, 1, 2)  # NHWC -> NCHW
            labels = np.concatenate([np.asarray(p.targets) for p in parts])
        elif dataset == "fashion_mnist":
            _lay_out_fashion_mnist(root, download)
            _check_fashion_mnist(root / "FashionMNIST" / "raw")
            parts = [datasets.FashionMNIST(str(root), train=train, download=download) for train in (True, False)]
            images = torch.cat([p.data for p in parts]).unsqueeze(1).numpy()  # (N, 28, 28) -> (N, 1, 28, 28)
            labels = torch.cat([p.targets for p in parts]).numpy()
        elif dataset == "stl10":
            parts = [datasets.STL10(str(root), split=s, download=download) for s in ("train", "test", "unlabeled")]
            images = np.concatenate([p.data for p in parts])
            labels = np.concatenate([np.asarray(p.labels) for p in parts])  # unlabeled: -1
        else:  # a dataset registered in privssl.data.splits.DATASETS without its loader here
            raise ValueError(f"no loader for dataset {dataset!r}; loaded from files: cifar10, cifar100, "
                             f"fashion_mnist, stl10")
    except RuntimeError as err:  # torchvision: "Dataset not found or corrupted"
        hint = "" if download else " (download is off: run the data rule on a machine with internet)"
        raise FileNotFoundError(f"{dataset} not found or corrupted under data root {root}{hint}: {err}") from err
    return ImagePool(torch.from_numpy(np.ascontiguousarray(images)), torch.from_numpy(labels).long(),
                     DATASETS[dataset].n_classes)


def pool_record(pool: ImagePool) -> dict:
    """What a splits file records of the pool its indices point into: its size and the SHA-256 of
    its images and labels (as stored), so that a reader finds out when the data changed since."""
    digest = hashlib.sha256()
    for values in (pool.images, pool.labels):
        digest.update(memoryview(np.ascontiguousarray(values.numpy())).cast("B"))
    return {"size": len(pool.labels), "sha256": digest.hexdigest()}


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled copy of the UCI digits, as `sklearn.datasets.load_digits` reads it
    (images (1797, 8, 8) of 0..16, labels 0..9), read from its file: importing scikit-learn would
    cost every job that loads the pool a second of CPU (tests/test_protection_data.py compares the two)."""
    spec = importlib.util.find_spec("sklearn")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the digits dataset is read from scikit-learn's bundled copy: install scikit-learn")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    with gzip.open(path, "rt") as lines:
        table = np.loadtxt(lines, delimiter=",")  # one row per image: 64 pixels, then its label
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(int)


def _load_pool(dataset: str, root: str | Path, download: bool) -> ImagePool:
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; allowed: {', '.join(DATASETS)}")
    if dataset == "digits":
        pixels, labels = _digits()
        images = torch.from_numpy(pixels / 16.0).float().unsqueeze(1)  # 0..16 -> [0, 1]
        return ImagePool(images, torch.from_numpy(labels).long(), 10)
    if dataset == "synthetic_cifar":
        from privssl.data.synthetic import synthetic_images

        images, labels = synthetic_images(DATASETS[dataset].labelled, DATASETS[dataset].n_classes)
        return ImagePool(torch.from_numpy(images), torch.from_numpy(labels).long(), DATASETS[dataset].n_classes)
    return _torchvision_pool(dataset, Path(root), download)


def load_pool(dataset: str, root: str | Path, download: bool = False, recorded: dict | None = None) -> ImagePool:
    """Every image of `dataset`; downloads into `root` first when `download` is true. `recorded`: a
    splits file's `pool_record`; the pool must still be the one its indices were drawn from."""
    pool = _load_pool(dataset, root, download)
    if recorded is not None and (found := pool_record(pool)) != recorded:
        raise InputError(f"{dataset} under data root {root} is not the pool the splits were drawn from: "
                         f"{found['size']} images of SHA-256 {found['sha256'][:16]}…, the splits' "
                         f"{recorded['size']} of {recorded['sha256'][:16]}… (its files changed since the splits were "
                         f"made; allowed: those files, or new splits: snakemake --forcerun data semileak_data "
                         f"contrastive_data, which reruns every job that read the old ones)")
    return pool
