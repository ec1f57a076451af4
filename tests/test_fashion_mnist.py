"""Fashion-MNIST: laid out from Debian's dataset-fashion-mnist package for torchvision (checked,
all or none, atomically), the loaded pool, and the config check before any job."""

from __future__ import annotations

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision import datasets
from torchvision.datasets.utils import check_integrity

import privssl.config
from privssl.config import ConfigError, check_data_present
from privssl.data import images
from privssl.data.images import FASHION_MNIST_MD5, load_pool
from privssl.data.label_maps import label_map
from privssl.data.splits import DATASETS, DEBIAN_FASHION_MNIST
from privssl.io import InputError

NAMES = list(FASHION_MNIST_MD5)
SIZES = {"train": 6, "t10k": 4}  # images of the fake train and test files


def idx_bytes(array: np.ndarray) -> bytes:
    """IDX format: magic 0x0000 08 <ndim> (08: unsigned bytes), big-endian dimensions, the data."""
    header = struct.pack(">I", 0x0800 + array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A fake Debian directory of tiny valid files, the loader and the config check pointed at it
    and the MD5 table holding theirs. Yields (directory, {name: uncompressed bytes}, {split: (images, labels)})."""
    rng = np.random.default_rng(0)
    arrays = {part: (rng.integers(0, 256, (n, 28, 28)), rng.integers(0, 10, n)) for part, n in SIZES.items()}
    contents = {}
    for part, (pixels, labels) in arrays.items():
        contents[f"{part}-images-idx3-ubyte"] = idx_bytes(pixels)
        contents[f"{part}-labels-idx1-ubyte"] = idx_bytes(labels)
    assert set(contents) == set(NAMES)
    directory = tmp_path / "package"
    directory.mkdir()
    for name, data in contents.items():
        (directory / f"{name}.gz").write_bytes(gzip.compress(data))
    monkeypatch.setattr(images, "DEBIAN_FASHION_MNIST", directory)
    monkeypatch.setattr(privssl.config, "DEBIAN_FASHION_MNIST", directory)
    monkeypatch.setattr(images, "FASHION_MNIST_MD5", {n: hashlib.md5(d).hexdigest() for n, d in contents.items()})
    return directory, contents, arrays


def raw_folder(root: Path) -> Path:
    return root / "FashionMNIST" / "raw"


def everything_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# ------------------------------------------------------------------ layout from a package directory

def test_the_package_files_are_laid_out_for_torchvision_and_loaded(tmp_path, package, monkeypatch):
    _, contents, arrays = package
    root = tmp_path / "data"
    pool = load_pool("fashion_mnist", root)
    raw = raw_folder(root)
    assert everything_in(raw) == sorted(NAMES)  # no temporary file left beside them
    assert all((raw / name).read_bytes() == data for name, data in contents.items())
    # train then test, as torchvision reads them; (N, 1, 28, 28) uint8 images and long labels
    expected = np.concatenate([arrays["train"][0], arrays["t10k"][0]])[:, None]
    assert pool.images.dtype == torch.uint8 and pool.images.shape == (10, 1, 28, 28)
    assert np.array_equal(pool.images.numpy(), expected)
    assert pool.labels.dtype == torch.long
    assert pool.labels.tolist() == np.concatenate([arrays["train"][1], arrays["t10k"][1]]).tolist()
    assert pool.n_classes == 10
    # once laid out, the package is not needed any more
    monkeypatch.setattr(images, "DEBIAN_FASHION_MNIST", tmp_path / "uninstalled")
    assert torch.equal(load_pool("fashion_mnist", root).images, pool.images)


def test_only_the_missing_files_are_laid_out(tmp_path, package):
    directory, contents, _ = package
    raw = raw_folder(tmp_path)
    raw.mkdir(parents=True)
    (raw / NAMES[0]).write_bytes(contents[NAMES[0]])
    (directory / f"{NAMES[0]}.gz").write_bytes(b"not gzip")  # would be refused, were it read
    load_pool("fashion_mnist", tmp_path)
    assert everything_in(raw) == sorted(NAMES)


def test_files_already_under_the_root_are_checked_too(tmp_path, package):
    # the case: the test files under the train names, put there by hand; torchvision would
    # load a pool with the test images twice, so that one image is both a member and a non-member
    _, contents, _ = package
    raw = raw_folder(tmp_path)
    raw.mkdir(parents=True)
    for name, data in contents.items():
        (raw / name).write_bytes(contents[name.replace("train", "t10k")])
    with pytest.raises(InputError, match=f"^{raw / 'train-images-idx3-ubyte'} is not Fashion-MNIST's "
                                         "train-images-idx3-ubyte: its MD5 is "
                                         f"{hashlib.md5(contents['t10k-images-idx3-ubyte']).hexdigest()}"):
        load_pool("fashion_mnist", tmp_path)


def test_a_pool_other_than_the_splits_is_refused(tmp_path, package):
    _, contents, arrays = package
    root = tmp_path / "data"
    pool = load_pool("fashion_mnist", root)
    recorded = images.pool_record(pool)
    # the record is the digest of the pool's bytes: images then labels, as stored
    expected = hashlib.sha256(pool.images.numpy().tobytes() + pool.labels.numpy().tobytes()).hexdigest()
    assert recorded == {"size": 10, "sha256": expected}
    assert torch.equal(load_pool("fashion_mnist", root, recorded=recorded).labels, pool.labels)
    # one label of the training file changed after the splits were made (the MD5 table updated with it,
    # as if the new file were the original)
    labels = bytearray(contents["train-labels-idx1-ubyte"])
    labels[-1] = (labels[-1] + 1) % 10
    (raw_folder(root) / "train-labels-idx1-ubyte").write_bytes(bytes(labels))
    images.FASHION_MNIST_MD5["train-labels-idx1-ubyte"] = hashlib.md5(bytes(labels)).hexdigest()
    with pytest.raises(InputError, match="is not the pool the splits were drawn from: 10 images of SHA-256"):
        load_pool("fashion_mnist", root, recorded=recorded)


def test_the_layout_writes_beside_the_files_and_renames_them_all_at_the_end(tmp_path, package, monkeypatch):
    raw, original, seen = raw_folder(tmp_path), images._decompress_checked, []

    def spy(archive, target, name):
        original(archive, target, name)
        # a temporary file in the raw folder (so os.replace is atomic), and no file under its name yet
        seen.append((target.parent, target.name, everything_in(raw)))

    monkeypatch.setattr(images, "_decompress_checked", spy)
    load_pool("fashion_mnist", tmp_path)
    assert [parent for parent, _, _ in seen] == [raw] * 4
    assert all(temporary not in NAMES for _, temporary, _ in seen)
    assert not set(NAMES) & {name for _, _, present in seen for name in present}
    assert everything_in(raw) == sorted(NAMES)


def test_a_job_killed_while_laying_out_leaves_nothing(tmp_path, package, monkeypatch):
    original, calls = images._decompress_checked, []

    def killed_on_the_third(archive, target, name):
        original(archive, target, name)
        calls.append(name)
        if len(calls) == 3:
            raise SystemExit(143)  # SIGTERM, as privssl.io.script_logger turns it into an exit

    monkeypatch.setattr(images, "_decompress_checked", killed_on_the_third)
    with pytest.raises(SystemExit):
        load_pool("fashion_mnist", tmp_path)
    assert everything_in(raw_folder(tmp_path)) == []


def test_a_file_that_is_not_the_original_is_refused_by_name_and_nothing_is_written(tmp_path, package):
    directory, contents, _ = package
    bad = directory / "t10k-images-idx3-ubyte.gz"
    bad.write_bytes(gzip.compress(contents["t10k-images-idx3-ubyte"][:-1] + b"\x01"))  # one pixel differs
    with pytest.raises(InputError, match=rf"{bad} does not hold Fashion-MNIST's t10k-images-idx3-ubyte: its contents "
                                         r"have MD5 [0-9a-f]{32}, not [0-9a-f]{32} \(a corrupt or different file\)"):
        load_pool("fashion_mnist", tmp_path)
    assert everything_in(raw_folder(tmp_path)) == []  # not even the three good files


def test_an_archive_that_is_not_gzip_or_is_cut_short_is_refused_by_name(tmp_path, package):
    directory, contents, _ = package
    bad = directory / "train-labels-idx1-ubyte.gz"
    for broken in (b"plain bytes", gzip.compress(contents["train-labels-idx1-ubyte"])[:-20]):
        bad.write_bytes(broken)
        with pytest.raises(InputError, match=rf"{bad} is not a readable gzip archive .*apt-get install --reinstall"):
            load_pool("fashion_mnist", tmp_path)
        assert everything_in(raw_folder(tmp_path)) == []


def test_missing_everywhere_without_download_says_how_to_get_the_files(tmp_path, package, monkeypatch):
    monkeypatch.setattr(images, "DEBIAN_FASHION_MNIST", tmp_path / "uninstalled")
    root = tmp_path / "data"
    with pytest.raises(FileNotFoundError) as error:
        load_pool("fashion_mnist", root)
    message = str(error.value)
    assert f"fashion_mnist is not under data root {root}" in message
    assert f"missing {raw_folder(root)}/{{{', '.join(NAMES)}}}" in message
    assert "`apt-get install dataset-fashion-mnist` as root" in message and "download: true" in message


def test_with_download_torchvision_fetches_what_no_package_holds(tmp_path, package, monkeypatch):
    _, contents, _ = package
    monkeypatch.setattr(images, "DEBIAN_FASHION_MNIST", tmp_path / "uninstalled")
    downloads = []

    def download(self):  # torchvision's MNIST.download, without the internet
        downloads.append(self.raw_folder)
        Path(self.raw_folder).mkdir(parents=True, exist_ok=True)
        for name, data in contents.items():
            Path(self.raw_folder, name).write_bytes(data)

    monkeypatch.setattr(datasets.FashionMNIST, "download", download)
    assert len(load_pool("fashion_mnist", tmp_path, download=True).images) == 10
    assert downloads and set(downloads) == {str(raw_folder(tmp_path))}


# --------------------------------------------------------------------------- config check

def data_config(root: Path, download: bool = False) -> dict:
    return {"download": download, "data_root": str(root), "datasets": {"fashion_mnist": {}}}


def test_the_config_check_refuses_fashion_mnist_found_nowhere_naming_the_files(tmp_path, package, monkeypatch):
    directory, _, _ = package
    monkeypatch.setattr(privssl.config, "DEBIAN_FASHION_MNIST", tmp_path / "uninstalled")
    with pytest.raises(ConfigError) as error:
        check_data_present(data_config(tmp_path))
    message = str(error.value)
    assert f"config key 'data_root': fashion_mnist is not under data_root = {tmp_path}" in message
    assert f"missing {raw_folder(tmp_path)}/{{{', '.join(NAMES)}}}, nor as .gz files in {tmp_path / 'uninstalled'}" \
        in message
    assert "`apt-get install dataset-fashion-mnist`, as root" in message and "download: true" in message
    check_data_present(data_config(tmp_path, download=True))
    # the package's files are accepted in place of data_root's, file by file
    monkeypatch.setattr(privssl.config, "DEBIAN_FASHION_MNIST", directory)
    check_data_present(data_config(tmp_path))
    (directory / f"{NAMES[-1]}.gz").unlink()
    with pytest.raises(ConfigError, match=rf"missing {raw_folder(tmp_path)}/\{{{NAMES[-1]}\}}, nor as \.gz"):
        check_data_present(data_config(tmp_path))
    raw_folder(tmp_path).mkdir(parents=True)
    (raw_folder(tmp_path) / NAMES[-1]).write_bytes(b"")
    check_data_present(data_config(tmp_path))


def test_the_accessory_classes_are_torchvisions_footwear_and_bags():
    mapping = label_map("fashion_mnist", "garment_accessory")
    accessories = [datasets.FashionMNIST.classes[c] for c, task in enumerate(mapping.class_to_task) if task]
    assert accessories == ["Sandal", "Sneaker", "Bag", "Ankle boot"]


# ------------------------------------------------------------- the real files of Debian's package

@pytest.fixture(scope="module")
def debian_root(tmp_path_factory):
    if not all((DEBIAN_FASHION_MNIST / f"{name}.gz").is_file() for name in NAMES):
        pytest.skip(f"Debian's dataset-fashion-mnist package is not installed (no .gz files in {DEBIAN_FASHION_MNIST}; "
                    "`apt-get install dataset-fashion-mnist` as root installs it)")
    return tmp_path_factory.mktemp("fashion_mnist")


def test_the_real_dataset_loads_as_the_table_says(debian_root):
    pool = load_pool("fashion_mnist", debian_root)
    info = DATASETS["fashion_mnist"]
    assert pool.images.shape == (info.labelled, info.channels, info.image_size, info.image_size) == (70000, 1, 28, 28)
    assert pool.images.dtype == torch.uint8 and (pool.images.min(), pool.images.max()) == (0, 255)
    assert pool.labels.dtype == torch.long and pool.n_classes == info.n_classes == 10
    assert pool.labels.bincount().tolist() == [7000] * 10
    assert pool.labels[:60000].bincount().tolist() == [6000] * 10  # the training file first


def test_the_real_laid_out_files_pass_torchvisions_checks(debian_root):
    load_pool("fashion_mnist", debian_root)
    for train in (True, False):
        assert datasets.FashionMNIST(str(debian_root), train=train)._check_exists()
    raw = raw_folder(debian_root)
    assert all(check_integrity(str(raw / name), md5) for name, md5 in FASHION_MNIST_MD5.items())


def test_a_registered_dataset_without_a_loader_is_refused_not_read_as_stl10(tmp_path, monkeypatch):
    # the torchvision loader's last branch was STL-10's: a dataset registered in DATASETS but given
    # no branch of its own read STL-10's files (or asked to download them)
    monkeypatch.setitem(DATASETS, "svhn", DATASETS["cifar10"])
    with pytest.raises(ValueError, match="no loader for dataset 'svhn'"):
        load_pool("svhn", tmp_path, download=False)
    assert not any(tmp_path.rglob("stl10*"))
