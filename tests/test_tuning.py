"""The tuning rule's procedure (privssl.release.tuning, tuning_spec): folds of the public
reference split, the grid, the scores against independent computations, the choice."""

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from privssl.accounting.dpsgd import accountant_epsilon
from privssl.cli import json_object
from privssl.release import tuning
from privssl.release.certified import CertifiedSpec, fit_certified_head
from privssl.release.protection import head_inputs
from privssl.release.tuning_spec import grid_points, tuned_sections, varied_fields
from privssl.training.heads import HeadSpec, accuracy, train_heads_on_sets


def blobs(n: int, classes: int = 3, width: int = 6, spread: float = 0.4, seed: int = 0):
    """Well-separated Gaussian blobs: a head that trains at all classifies them."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, width)) * 2
    y = rng.integers(0, classes, n)
    x = centres[y] + spread * rng.normal(size=(n, width))
    return torch.tensor(x, dtype=torch.float64), torch.tensor(y)


# ------------------------------------------------------------------------------------ folds and grid

def test_folds_train_on_d_sized_subsets_and_score_on_the_rest():
    splits = tuning.folds(30, 12, 3, seed=5)
    assert len(splits) == 3
    for train, val in splits:
        assert len(train) == 12 and len(val) == 18
        assert sorted(torch.cat([train, val]).tolist()) == list(range(30))  # disjoint, the whole split
    assert not torch.equal(splits[0][0], splits[1][0])  # each fold draws its own subset
    again = tuning.folds(30, 12, 3, seed=5)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(splits, again))


@pytest.mark.parametrize("n_train", [0, 30, 31])
def test_folds_refuse_a_reference_split_without_validation_records(n_train):
    with pytest.raises(ValueError, match=f"|d| = {n_train}"):
        tuning.folds(30, n_train, 2, seed=0)


def test_grid_points_replace_the_varied_fields_in_product_order():
    config = {"dpsgd": {"lr": 0.1, "epochs": 30, "clip_norm": 1.0},
              "tuning": {"dpsgd": {"lr": [0.5, 2], "clip_norm": [0.1, 1]}}}
    points = grid_points(config, "dpsgd")  # fields alphabetically, the last fastest
    assert [(p["clip_norm"], p["lr"]) for p in points] == [(0.1, 0.5), (0.1, 2), (1, 0.5), (1, 2)]
    assert all(p["epochs"] == 30 for p in points)  # not varied: the section's value
    assert varied_fields(config, "dpsgd") == ["clip_norm", "lr"]
    assert grid_points({"head": {"epochs": 5}}, "head") == [{"epochs": 5}]  # no tuning: the config's point


def test_grid_points_refuse_a_field_the_section_may_not_vary():
    with pytest.raises(ValueError, match="tuning.certified may vary l2, clip_norm; not tolerance"):
        grid_points({"certified": {}, "tuning": {"certified": {"tolerance": [1e-3]}}}, "certified")


def test_tuned_sections_follow_the_release_methods():
    assert tuned_sections(["alm", "laplace"]) == ["head"]
    assert tuned_sections(["alm", "certified_pure", "dpsgd"]) == ["head", "certified", "dpsgd"]


def test_best_point_is_the_highest_score_at_one_eps_the_first_on_ties():
    rows = [{"point": 0, "eps": 1.0, "accuracy": 0.6}, {"point": 1, "eps": 1.0, "accuracy": 0.6},
            {"point": 2, "eps": 1.0, "accuracy": 0.5}, {"point": 2, "eps": math.inf, "accuracy": 0.9},
            {"point": 3, "eps": 10.0, "accuracy": math.nan}]
    assert tuning.best_point(rows, 1.0) == 0
    assert tuning.best_point(rows, math.inf) == 2
    assert tuning.best_point(rows, 10.0) is None  # no point reaches ε = 10


def test_least_regret_point_gives_up_no_eps_for_the_others():
    # point 0 is best on average (it wins the large ε) but falls 0.3 short at ε = 1;
    # point 1 is never more than 0.14 short of the best at any ε: it is chosen
    scores = {0: {1.0: 0.2, 10.0: 0.99, 100.0: 0.99, 1000.0: 0.99},
              1: {1.0: 0.5, 10.0: 0.85, 100.0: 0.85, 1000.0: 0.85},
              2: {1.0: 0.5, 10.0: 0.6, 100.0: 0.6, 1000.0: 0.6}}
    rows = [{"point": p, "method": "certified_gaussian", "eps": e, "accuracy": a}
            for p, by_eps in scores.items() for e, a in by_eps.items()]
    rows.append({"point": 2, "method": "noise_free", "eps": math.inf, "accuracy": 1.0})  # not compared
    assert tuning.regrets(rows)[:3] == pytest.approx([0.3, 0.0, 0.0])
    assert tuning.least_regret_point(rows) == 1
    assert np.mean(list(scores[0].values())) > np.mean(list(scores[1].values()))
    rows.append({"point": 1, "method": "certified_pure", "eps": 1.0, "accuracy": 0.1})  # now 1 falls 0.4 short
    rows += [{"point": p, "method": "certified_pure", "eps": 1.0, "accuracy": 0.5} for p in (0, 2)]
    assert tuning.least_regret_point(rows) == 0  # worst shortfalls 0.3, 0.4, 0.39: the least


# ------------------------------------------------------------------------------------ scores

def test_head_scores_are_the_pooled_validation_accuracy_of_each_fold():
    x, y = blobs(60)
    splits = tuning.folds(60, 20, 2, seed=1)
    points = [{"architecture": "linear", "epochs": 1, "lr": 1e-4}, {"architecture": "linear", "epochs": 60,
                                                                     "lr": 0.05}]
    rows = tuning.tune_head(x, y, 3, points, splits)
    for row, point in zip(rows, points):  # independent: each fold's head trained alone
        correct = 0
        for train, val in splits:
            head = train_heads_on_sets(HeadSpec.from_config(point), x, y, train[None], 3)
            correct += round(float(accuracy(head, x[val], y[val])[0]) * len(val))
        assert row["correct"] == correct and row["decisions"] == 80
        assert row["accuracy"] == pytest.approx(correct / 80)
    assert tuning.best_point(rows, math.inf) == 1  # the head that trains beats the one that does not
    assert rows[1]["accuracy"] > 0.9


def test_certified_scores_use_the_releases_noise_at_each_eps():
    x, y = blobs(80, spread=0.3)
    splits = tuning.folds(80, 40, 2, seed=2)
    points = [{"clip_norm": 1.0, "l2": 0.01, "tolerance": 1e-6}]
    rows = tuning.tune_certified(x, y, 3, points, splits, ["certified_gaussian"], [0.01, 1e6], 1e-5, draws=4, seed=0)
    by = {(r["method"], r["eps"]): r for r in rows}
    # ε = ∞: the certified head without noise, fitted independently here
    spec = CertifiedSpec(1.0, 0.01)
    correct = sum(round(float(accuracy(fit_certified_head(x[t], y[t], 3, spec).params,
                                       head_inputs(x[v], 1.0), y[v])[0]) * len(v)) for t, v in splits)
    assert by["noise_free", math.inf]["accuracy"] == pytest.approx(correct / 80)
    assert by["noise_free", math.inf]["decisions"] == 80  # one head per fold: its decisions counted once
    assert by["certified_gaussian", 1e6]["accuracy"] == pytest.approx(correct / 80, abs=0.05)
    assert by["certified_gaussian", 0.01]["accuracy"] < 0.6  # the noise at ε = 0.01 drowns the head
    assert by["certified_gaussian", 0.01]["decisions"] == 2 * 40 * 4  # folds × validation × draws


def test_dpsgd_scores_calibrate_sigma_per_eps_and_add_the_noise_free_limit():
    x, y = blobs(60)
    splits = tuning.folds(60, 30, 2, seed=3)
    points = [{"clip_norm": 1.0, "batch_size": 10, "epochs": 5, "lr": 0.5, "momentum": 0.9, "repeats": 1,
               "accountant": "rdp"}]
    rows = tuning.tune_dpsgd(x, y, 3, HeadSpec(architecture="linear"), points, splits, [0.5, 50.0], 1e-5, seed=0,
                             search_seconds=None)
    by = {r["eps"]: r for r in rows}
    assert set(by) == {0.5, 50.0, math.inf}
    assert by[math.inf]["noise_multiplier"] == 0.0
    for eps in (0.5, 50.0):  # σ is the accountant's for this point's q and steps: its ε is the target's
        spent = accountant_epsilon(by[eps]["noise_multiplier"], by[eps]["sample_rate"], by[eps]["steps"], 1e-5, "rdp")
        assert 0.99 * eps <= spent <= eps * (1 + 1e-9)
    assert by[0.5]["steps"] == 5 * 3  # 30 records, batches of 10
    assert by[math.inf]["accuracy"] > 0.9 and by[0.5]["accuracy"] < by[math.inf]["accuracy"]


# ------------------------------------------------------------------------------------ the choice's file

def test_a_spec_is_read_from_a_file_given_as_at_path(tmp_path):
    path = tmp_path / "head.json"
    path.write_text(json.dumps({"epochs": 7}))
    assert json_object(f"@{path}") == {"epochs": 7}
    with pytest.raises(argparse.ArgumentTypeError, match="cannot read the JSON file"):
        json_object(f"@{tmp_path / 'missing.json'}")
    path.write_text("[1, 2]")
    with pytest.raises(argparse.ArgumentTypeError, match="expected a JSON object"):
        json_object(f"@{path}")


def test_the_tune_script_refuses_a_grid_point_before_any_training(tmp_path):
    root = Path(__file__).resolve().parents[1]
    x, y = blobs(40)
    torch.save({"n_classes": 3, "finetune": x[:10], "finetune_labels": y[:10], "reference": x[10:],
                "reference_labels": y[10:]}, tmp_path / "features.pt")
    config = {"head": {"architecture": "linear", "epochs": 5, "lr": 0.01},
              "certified": {"clip_norm": 1.0, "l2": 0.01, "tolerance": 1e-6},
              "dpsgd": {}, "protect": {"mechanisms": ["alm", "certified_pure"], "eps": [1.0], "delta": 1e-5,
                                       "repeats": 2},
              "tuning": {"certified": {"l2": [0.01, 1e-12]}}}  # λ = 1e-12 would need ~6e7 solver steps
    done = subprocess.run([sys.executable, str(root / "scripts" / "tune.py"), "--dataset", "blobs", "--features",
                           str(tmp_path / "features.pt"), "--config", json.dumps(config), "--sections", "head",
                           "certified", "--seed", "0", "--out-dir", str(tmp_path / "tuning")],
                          capture_output=True, text=True, env={"PYTHONPATH": str(root / "src"), "PATH": ""})
    assert done.returncode == 2
    assert "tune.py: error: --config: certified spec (clip_norm R = 1, l2 λ = 1e-12" in done.stderr
    assert not (tmp_path / "tuning").exists()
