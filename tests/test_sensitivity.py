"""The sensitivity samplers: population (Rubinstein & Aldà 2017) with its order statistic, and
the paper's Algorithm 2 inside d."""

import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from warm_scripts import script_python

from privssl.release.random_dp import minimum_pairs, order_statistic_index
from privssl.release.sensitivity import (
    PopulationSampler,
    pair_distances,
    paper_sensitivity,
    population_pairs,
    population_sensitivity,
    sample_pairs,
)
from privssl.training.heads import DTYPE, HeadSpec, train_head

REPO = Path(__file__).resolve().parents[1]

N, IN_DIM, N_CLASSES = 30, 5, 3
SPEC = HeadSpec(hidden=6, epochs=15, lr=0.05)  # full batch: masking equals deleting the record




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
    record = paper_sensitivity(SPEC, features[:1].expand(N, -1), labels[:1].expand(N), N_CLASSES, m=6, seed=0)
    assert record["delta1"] <= ROUNDING and record["delta2"] <= ROUNDING
    pool = population_sensitivity(SPEC, features[:1].expand(N, -1), labels[:1].expand(N), N_CLASSES, n=10,
                                  sampler=PopulationSampler(m=12, rho=0.3, gamma=0.5, seed=0))
    assert pool["delta1"] <= ROUNDING and pool["delta2"] <= ROUNDING


def test_sample_pairs():
    pairs = sample_pairs(10, 500, seed=1)
    assert pairs.shape == (500, 2) and pairs.min() == 0 and pairs.max() == 9
    assert torch.equal(pairs, sample_pairs(10, 500, seed=1))
    assert not torch.equal(pairs, sample_pairs(10, 500, seed=2))
    with pytest.raises(ValueError, match="got 0"):
        sample_pairs(10, 0, seed=1)


def test_paper_sensitivity_record():
    features, labels = make_data()
    record = paper_sensitivity(SPEC, features, labels, N_CLASSES, m=7, seed=5, chunk_size=3)
    assert record["m"] == record["k"] == 7 and len(record["distances_l1"]) == len(record["distances_l2"]) == 7
    assert record["pairs"] == sample_pairs(N, 7, seed=5).tolist()
    assert record["delta1"] == max(record["distances_l1"]) > 0
    assert record["delta2"] == max(record["distances_l2"]) > 0
    assert record["sampling"] == "paper" and record["guarantee_kind"] == "none"
    assert "private data" in record["statement"] and "no DP guarantee" in record["statement"]


@pytest.mark.parametrize("m, rho, gamma", [(116, 0.1, 0.2), (150, 0.1, 0.2), (1000, 0.05, 0.1), (16, 0.3, 0.5)])
def test_order_statistic_index_formula(m, rho, gamma):
    # Rubinstein & Aldà 2017: k = ⌈m(1 − ρ + √(log(1/(γ − ρ))/(2m)))⌉, computed here independently
    expected = math.ceil(m * (1 - rho) + math.sqrt(m * math.log(1 / (gamma - rho)) / 2))
    assert order_statistic_index(m, rho, gamma) == expected <= m


@pytest.mark.parametrize("rho, gamma", [(0.1, 0.2), (0.05, 0.1), (0.3, 0.5), (0.01, 0.05)])
def test_minimum_pairs_is_the_least_m_with_an_order_statistic(rho, gamma):
    m = minimum_pairs(rho, gamma)
    assert order_statistic_index(m, rho, gamma) <= m
    with pytest.raises(ValueError, match=f"allowed: m >= {m}"):
        order_statistic_index(m - 1, rho, gamma)


@pytest.mark.parametrize("rho, gamma", [(0.2, 0.1), (0.1, 0.1), (0.0, 0.5), (0.1, 1.0), (-0.1, 0.5)])
def test_bad_rho_gamma_rejected_naming_them(rho, gamma):
    with pytest.raises(ValueError, match="rho|gamma"):
        order_statistic_index(1000, rho, gamma)


def test_order_statistic_exceeds_the_quantile_with_the_stated_probability():
    """Monte Carlo over i.i.d. Exp(1) 'distances': P(G_(k) < q_{1−ρ}) ≤ γ − ρ (the DKW step)."""
    m, rho, gamma, batches = 60, 0.2, 0.35, 40_000
    k = order_statistic_index(m, rho, gamma)
    assert k < m  # an order statistic below the maximum
    quantile = -np.log(rho)  # the (1 − ρ)-quantile of Exp(1)
    kth = np.sort(np.random.default_rng(0).exponential(size=(batches, m)), axis=1)[:, k - 1]
    failure = (kth < quantile).mean()
    assert failure <= gamma - rho + 0.005  # the guarantee; 0.005 ≈ 4 standard errors at this failure rate
    assert failure > 0  # the event does happen: the check is not met trivially


def test_population_pairs_are_neighbours_of_size_n():
    sets, substituted = population_pairs(pool_size=20, n=7, m=50, seed=4)
    assert sets.shape == (50, 2, 7) and substituted.shape == (50, 2)
    assert torch.equal(sets[:, 0, :6], sets[:, 1, :6])  # the shared n − 1 records
    assert torch.equal(sets[:, :, 6], substituted)  # one record substituted by another draw
    assert sets.min() >= 0 and sets.max() < 20 and len(sets.unique()) == 20  # i.i.d. over the whole pool
    assert torch.equal(sets, population_pairs(20, 7, 50, seed=4)[0])
    assert not torch.equal(sets, population_pairs(20, 7, 50, seed=5)[0])


@pytest.mark.parametrize("batch_size", [None, 4])
def test_population_sensitivity_equals_sequential_trainings(batch_size):
    features, labels = make_data()
    spec = HeadSpec(hidden=6, epochs=15, lr=0.05, batch_size=batch_size)
    n, m, rho, gamma = 9, 16, 0.3, 0.5
    record = population_sensitivity(spec, features, labels, N_CLASSES, n=n,
                                    sampler=PopulationSampler(m=m, rho=rho, gamma=gamma, seed=2, chunk_size=5))
    sets, _ = population_pairs(N, n, m, seed=2)
    expected_l1 = []
    for pair in sets:
        a, b = (torch.cat([p.flatten() for p in train_head(spec, features[s], labels[s], N_CLASSES).values()])
                for s in pair)
        expected_l1.append(float((a - b).abs().sum()))
    np.testing.assert_allclose(record["distances_l1"], expected_l1, rtol=1e-7, atol=1e-10)
    k = order_statistic_index(m, rho, gamma)
    assert record["k"] == k and record["delta1"] == pytest.approx(sorted(expected_l1)[k - 1], rel=1e-7)
    assert record["delta1"] <= record["max_distance_l1"]
    assert record["sampling"] == "population" and record["guarantee_kind"] == "random_dp"
    assert record["pool"]["size"] == N and record["finetune_size"] == n


def features_file(path: Path, finetune_seed: int) -> Path:
    """A features file whose reference pool is fixed and whose private split d depends on the seed."""
    pool, pool_labels = make_data()
    g = torch.Generator().manual_seed(finetune_seed)
    torch.save({"n_classes": N_CLASSES, "reference": pool, "reference_labels": pool_labels,
                "finetune": torch.randn(12, IN_DIM, generator=g, dtype=DTYPE) * 5,
                "finetune_labels": torch.randint(0, N_CLASSES, (12,), generator=g)}, path)
    return path


SCRIPT_HEAD = {"hidden": 6, "epochs": 10, "lr": 0.05}  # the head that the sensitivity script trains in these tests


def run_sensitivity_script(features: Path, out: Path, sampling: str) -> dict:
    cmd = [script_python(), str(REPO / "scripts" / "sensitivity.py"), "--features", str(features),
           "--head", json.dumps(SCRIPT_HEAD), "--sampling", sampling, "--m", "16",
           "--rho", "0.3", "--gamma", "0.5", "--chunk-size", "8", "--seed", "1", "--out", str(out), "--device", "cpu"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_population_delta_does_not_depend_on_the_private_set(tmp_path):
    # Every record of d changes (features and labels); the reference pool and |d| stay.
    a = run_sensitivity_script(features_file(tmp_path / "a.pt", 0), tmp_path / "a.json", "population")
    b = run_sensitivity_script(features_file(tmp_path / "b.pt", 1), tmp_path / "b.json", "population")
    assert (a["delta1"], a["delta2"]) == (b["delta1"], b["delta2"]) and a["delta1"] > 0
    # the control: the two d differ where it shows, since the paper's sampler inside d (the
    # script's other branch, the same call with the same settings) gives two different Δ1
    spec = HeadSpec.from_config(SCRIPT_HEAD)
    c, d = (paper_sensitivity(spec, feats["finetune"], feats["finetune_labels"], N_CLASSES, m=16, seed=1,
                              chunk_size=8)
            for feats in (torch.load(tmp_path / name, weights_only=True) for name in ("a.pt", "b.pt")))
    assert c["delta1"] != d["delta1"]
