"""Protection (noisy release, utility loss) and the data splits of the threat model."""

import numpy as np
import pytest
import torch

from privssl.artefacts.image import load_release
from privssl.data.images import load_pool
from privssl.data.splits import DATASETS, SPLITS, check_split_sizes, make_splits
from privssl.release.mechanisms import Gaussian, L2Gamma, Laplace, Logistic
from privssl.release.methods import OUTPUT_PERTURBATION_METHODS
from privssl.release.protection import calibrate, head_inputs, protected_heads, released_heads, utility_loss

DIGITS_SIZES = {"pretrain": 700, "finetune": 300, "nonmember": 200, "shadow": 300, "test": 197, "reference": 100}
SENSITIVITY = {"sampling": "population", "delta1": 0.3, "delta2": 0.05, "gamma": 0.2, "k": 9, "m": 10}


def test_utility_loss_formula():
    noisy = torch.tensor([0.9, 0.45, 0.0, 0.95])
    np.testing.assert_allclose(utility_loss(noisy, 0.9).numpy(), [1 - 0.9 / 0.9, 1 - 0.45 / 0.9, 1.0, 1 - 0.95 / 0.9],
                               rtol=1e-6)
    with pytest.raises(ValueError, match="clean accuracy of 0"):
        utility_loss(noisy, 0.0)


# The unit-noise family each output-perturbation release must draw (paper §4, Chaudhuri et al. 2011),
# stated here and not read from the registry under test: ALM is the logistic mechanism.
FAMILY = {"alm": Logistic, "laplace": Laplace, "gaussian": Gaussian, "gaussian_analytic": Gaussian,
          "certified_gaussian": Gaussian, "certified_pure": L2Gamma}


def test_every_output_perturbation_method_has_its_family_stated_here():
    assert set(FAMILY) == set(OUTPUT_PERTURBATION_METHODS)


@pytest.mark.parametrize("mechanism", OUTPUT_PERTURBATION_METHODS)
def test_protected_heads_common_random_numbers(mechanism):
    released = torch.linspace(-1, 1, 7, dtype=torch.float64)
    eps_grid = [0.1, 1.0, 5.0]
    noisy, calibrations = protected_heads(released, mechanism, eps_grid, repeats=4, delta=1e-5,
                                          sensitivity=SENSITIVITY, seed=9)
    assert noisy.shape == (3, 4, 7)
    expected = FAMILY[mechanism](None).sample((4, 7), torch.Generator().manual_seed(9))
    for e, eps in enumerate(eps_grid):
        scale = calibrate(mechanism, eps, 1e-5, SENSITIVITY).noise_scale
        assert calibrations[e].noise_scale == scale
        torch.testing.assert_close((noisy[e] - released) / scale, expected, rtol=1e-9, atol=1e-12)


def test_make_splits_digits():
    labels = load_pool("digits", "unused").labels
    splits = make_splits("digits", labels, DIGITS_SIZES, seed=0)
    assert {name: len(idx) for name, idx in splits.items()} == DIGITS_SIZES
    everything = [i for idx in splits.values() for i in idx]
    assert len(set(everything)) == len(everything) == 1797 and min(everything) >= 0 and max(everything) < 1797
    assert splits == make_splits("digits", labels, DIGITS_SIZES, seed=0)
    assert splits != make_splits("digits", labels, DIGITS_SIZES, seed=1)


@pytest.mark.parametrize("pretrain", [40, 100])
def test_pretrain_takes_unlabelled_first(pretrain):
    labels = torch.cat([torch.full((60,), -1), torch.arange(200) % 10])  # 60 unlabelled, then 200 labelled
    sizes = {"pretrain": pretrain, "finetune": 30, "nonmember": 30, "shadow": 20, "test": 10, "reference": 10}
    splits = make_splits("stl10", labels, sizes, seed=0)
    unlabelled_used = sum(labels[i] < 0 for i in splits["pretrain"])
    assert len(splits["pretrain"]) == pretrain and unlabelled_used == min(pretrain, 60)
    for name in SPLITS[1:]:
        assert len(splits[name]) == sizes[name] and all(labels[i] >= 0 for i in splits[name])
    everything = [i for idx in splits.values() for i in idx]
    assert len(set(everything)) == len(everything)


def test_check_split_sizes_errors():
    too_many = {**DIGITS_SIZES, "test": 198}
    with pytest.raises(ValueError, match=r"'digits' \(pretrain=700, .*test=198, reference=100\) need 1798 labelled"):
        check_split_sizes("digits", too_many)
    with pytest.raises(ValueError, match="'shadow' of 'digits' must be an integer >= 0, got -1"):
        check_split_sizes("digits", {**DIGITS_SIZES, "shadow": -1})
    with pytest.raises(ValueError, match="'nonmember' missing"):
        check_split_sizes("digits", {k: v for k, v in DIGITS_SIZES.items() if k != "nonmember"})
    with pytest.raises(ValueError, match="unknown dataset 'mnist'"):
        check_split_sizes("mnist", DIGITS_SIZES)
    # STL-10's unlabelled images count towards pre-training only
    stl = DATASETS["stl10"]
    check_split_sizes("stl10", {"pretrain": stl.unlabelled, "finetune": stl.labelled, "nonmember": 0,
                                "shadow": 0, "test": 0, "reference": 0})
    with pytest.raises(ValueError, match="need 13001 labelled"):
        check_split_sizes("stl10", {"pretrain": stl.unlabelled + 1, "finetune": stl.labelled, "nonmember": 0,
                                    "shadow": 0, "test": 0, "reference": 0})


def test_load_digits_is_scikit_learns_digits_scaled_to_the_unit_interval(tmp_path):
    # the pool reads scikit-learn's file itself (importing scikit-learn costs a job a second): the
    # same images, in the same order, as load_digits gives, divided by their maximum 16
    from sklearn.datasets import load_digits

    reference = load_digits()
    pool = load_pool("digits", tmp_path)
    assert pool.images.shape == (1797, 1, 8, 8) and pool.n_classes == 10
    np.testing.assert_array_equal(pool.images[:, 0].numpy(), (reference.images / 16.0).astype(np.float32))
    np.testing.assert_array_equal(pool.labels.numpy(), reference.target)


def test_load_cifar10_offline_names_data_root(tmp_path):
    root = tmp_path / "empty"
    with pytest.raises(FileNotFoundError, match=f"under data root {root}.*download is off"):
        load_pool("cifar10", root, download=False)


def test_head_inputs_clip_rows_to_norm():
    x = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]], dtype=torch.float64)
    clipped = head_inputs(x, 1.0)
    torch.testing.assert_close(clipped, torch.tensor([[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]], dtype=torch.float64))
    assert head_inputs(x, None) is x


def test_released_heads_take_shapes_and_clipping_from_the_protect_file(tmp_path):
    shapes = {"weight": (2, 3), "bias": (3,)}
    flat = torch.arange(2 * 4 * 9, dtype=torch.float64).reshape(2, 4, 9)
    torch.save({"method": "certified_pure", "flat": flat, "eps": torch.tensor([1.0, 10.0]), "shapes": shapes,
                "noise_scale": torch.tensor([3.0, 0.3]), "clip_norm": 2.0}, tmp_path / "p.pt")
    releases = released_heads({"params": {}, "shapes": {}}, load_release(tmp_path / "p.pt", "certified_pure"))
    assert (releases.method, releases.eps, releases.repeats, releases.clip_norm) == ("certified_pure", [1.0, 10.0], 4, 2.0)
    assert releases.shapes == shapes and torch.equal(releases.flat[5], flat[1, 1])
