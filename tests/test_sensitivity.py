"""The sensitivity sampler (Algorithm 2) and the random-DP statement it supports."""

import numpy as np
import pytest
import torch

from privssl.heads import DTYPE, HeadSpec, train_head
from privssl.sensitivity import pair_distances, random_dp_statement, sample_pairs, sample_sensitivity

N, IN_DIM, N_CLASSES = 30, 5, 3
SPEC = HeadSpec(hidden=6, epochs=15, lr=0.05)  # full batch: masking equals deleting the record


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def make_data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(N, IN_DIM, generator=g, dtype=DTYPE), torch.randint(0, N_CLASSES, (N,), generator=g)


def head_without(features, labels, removed):
    keep = torch.arange(len(features)) != removed
    params = train_head(SPEC, features[keep], labels[keep], N_CLASSES)
    return torch.cat([p.flatten() for p in params.values()])


def test_pair_distances_equal_sequential_trainings():
    features, labels = make_data()
    pairs = sample_pairs(N, 5, seed=3)
    l1, l2 = pair_distances(SPEC, features, labels, N_CLASSES, pairs, chunk_size=2)
    expected_l1, expected_l2 = [], []
    for i, j in pairs.tolist():
        diff = head_without(features, labels, i) - head_without(features, labels, j)
        expected_l1.append(sum(abs(x) for x in diff.tolist()))
        expected_l2.append(sum(x * x for x in diff.tolist()) ** 0.5)
    assert l1.shape == l2.shape == (5,)
    np.testing.assert_allclose(l1.numpy(), expected_l1, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(l2.numpy(), expected_l2, rtol=1e-7, atol=1e-10)
    assert min(expected_l1) > 1e-4  # the pairs sampled here do differ


# Identical data sets give identical heads up to float64 rounding only: heads at different
# positions of the stack reduce their bias gradients in a different order (~1e-16 per step),
# against pair distances of ~1e-2 here.
ROUNDING = 1e-12


def test_same_record_removed_gives_zero_distance():
    features, labels = make_data()
    pairs = torch.tensor([[0, 0], [7, 7], [29, 29]])
    l1, l2 = pair_distances(SPEC, features, labels, N_CLASSES, pairs, chunk_size=2)
    assert l1.max() <= ROUNDING and l2.max() <= ROUNDING


def test_all_records_identical_gives_zero_sensitivity():
    features, labels = make_data()
    record = sample_sensitivity(SPEC, features[:1].expand(N, -1), labels[:1].expand(N), N_CLASSES,
                                m=6, seed=0, rho=0.1)
    assert record["delta1"] <= ROUNDING and record["delta2"] <= ROUNDING


def test_sample_pairs():
    pairs = sample_pairs(10, 500, seed=1)
    assert pairs.shape == (500, 2) and pairs.min() == 0 and pairs.max() == 9
    assert torch.equal(pairs, sample_pairs(10, 500, seed=1))
    assert not torch.equal(pairs, sample_pairs(10, 500, seed=2))
    with pytest.raises(ValueError, match="got 0"):
        sample_pairs(10, 0, seed=1)


@pytest.mark.parametrize("m, rho, confidence", [(1, 0.5, 0.9), (50, 0.01, 0.95), (300, 0.001, 0.99)])
def test_random_dp_statement_formulas(m, rho, confidence):
    statement = random_dp_statement(m, rho, confidence)
    assert statement["probability"] == pytest.approx(1 - (1 - rho) ** m, rel=1e-12)
    assert statement["covered_fraction"] == 1 - rho
    rho_reached = 1 - statement["covered_fraction_at_confidence"]
    assert 1 - (1 - rho_reached) ** m == pytest.approx(confidence, rel=1e-9)


@pytest.mark.parametrize("rho", [0.0, 1.0, -0.2, 1.5])
def test_random_dp_statement_rejects_bad_rho(rho):
    with pytest.raises(ValueError, match="rho"):
        random_dp_statement(10, rho)


def test_sampled_maximum_exceeds_quantile_with_stated_probability():
    """Monte Carlo over i.i.d. Exp(1) 'distances': P(max of m ≥ q_{1−ρ}) = 1 − (1 − ρ)^m."""
    m, rho, batches = 20, 0.05, 40_000
    quantile = -np.log(rho)  # the (1 − ρ)-quantile of Exp(1)
    maxima = np.random.default_rng(0).exponential(size=(batches, m)).max(1)
    fraction = (maxima >= quantile).mean()
    stated = random_dp_statement(m, rho)["probability"]
    assert fraction >= stated - 0.01  # the guarantee; 0.01 ≈ 4 standard errors
    assert fraction <= stated + 0.01  # and, for a continuous distance, it is exact


def test_sample_sensitivity_record():
    features, labels = make_data()
    record = sample_sensitivity(SPEC, features, labels, N_CLASSES, m=7, seed=5, rho=0.05, chunk_size=3)
    assert record["m"] == 7 and len(record["distances_l1"]) == len(record["distances_l2"]) == 7
    assert record["pairs"] == sample_pairs(N, 7, seed=5).tolist()
    assert record["delta1"] == max(record["distances_l1"]) > 0
    assert record["delta2"] == max(record["distances_l2"]) > 0
    assert record["random_dp"]["probability"] == pytest.approx(1 - 0.95 ** 7)
