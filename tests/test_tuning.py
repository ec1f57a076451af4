"""The tuning rule's procedure (privssl.release.tuning, tuning_spec): folds of the public
reference split, the grid, the scores against independent computations, the choice."""

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from privssl.accounting import dpsgd as dpsgd_accounting
from privssl.accounting.dpsgd import Unreachable, accountant_epsilon
from privssl.accounting.dpsgd import calibrate_grid as tuning_calibrate_grid
from privssl.cli import json_object
from privssl.release import tuning
from privssl.release.certified import CertifiedSpec, certified_sensitivity, fit_certified_head
from privssl.release.dpsgd_batched import train_dpsgd_heads
from privssl.release.dpsgd_spec import DPSGDSpec
from privssl.release.protection import head_inputs, protected_heads
from privssl.release.sensitivity import PopulationSampler, population_sensitivity
from privssl.release.tuning_spec import grid_points, tuned_sections, varied_fields
from privssl.training.heads import HeadSpec, accuracy, flatten, train_heads_on_sets, unflatten


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


def test_a_list_of_head_grids_pools_their_points_in_the_order_written():
    config = {"head": {"architecture": "mlp", "optimizer": "adam", "lr": 0.01, "weight_decay": 0.0},
              "tuning": {"head": [{}, {"architecture": ["linear"], "optimizer": ["sgd"], "lr": [0.3, 1]},
                                  {"weight_decay": [1e-3]}]}}
    points = grid_points(config, "head")
    assert [(p["architecture"], p["optimizer"], p["lr"], p["weight_decay"]) for p in points] == [
        ("mlp", "adam", 0.01, 0.0),  # {}: the configured head itself
        ("linear", "sgd", 0.3, 0.0), ("linear", "sgd", 1, 0.0),
        ("mlp", "adam", 0.01, 1e-3)]  # each grid starts again from the configured head
    assert varied_fields(config, "head") == ["architecture", "lr", "optimizer", "weight_decay"]
    with pytest.raises(ValueError, match="tuning.certified must be a mapping of fields to lists of values; got"):
        grid_points({"certified": {}, "tuning": {"certified": [{"l2": [0.1]}]}}, "certified")  # a list: head only
    with pytest.raises(ValueError, match="tuning.head may vary .*; not clip_norm"):
        grid_points({"head": {}, "tuning": {"head": [{}, {"clip_norm": [1.0]}]}}, "head")  # every grid is checked


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
    rows = tuning.tune_head(tuning.TuningFolds(x, y, 3, splits), points)
    for row, point in zip(rows, points):  # independent: each fold's head trained alone
        correct = 0
        for train, val in splits:
            head = train_heads_on_sets(HeadSpec.from_config(point), x, y, train[None], 3)
            correct += round(float(accuracy(head, x[val], y[val])[0]) * len(val))
        assert row["correct"] == correct and row["decisions"] == 80
        assert row["accuracy"] == pytest.approx(correct / 80)
    assert tuning.best_point(rows, math.inf) == 1  # the head that trains beats the one that does not
    assert rows[1]["accuracy"] > 0.9


def test_head_scores_after_noise_use_each_points_own_delta_sampled_on_the_pool():
    """Each point's head of each fold, trained alone here, released with the noise its own Δ
    (the population sampler on the whole public pool, data sets of the folds' size) calibrates:
    the rows' correct decisions, decision counts and Δ are exactly these."""
    x, y = blobs(80, spread=1.0, seed=6)
    splits = tuning.folds(80, 20, 2, seed=3)
    points = [{"architecture": "linear", "optimizer": "sgd", "epochs": 30, "lr": lr, "weight_decay": 1e-2}
              for lr in (0.05, 0.5)]
    sampler = PopulationSampler(m=12, rho=0.3, gamma=0.5, seed=11, chunk_size=5)
    methods, eps_grid, draws = ("alm", "gaussian_analytic"), (0.5, 50.0), 3
    rows = tuning.tune_head(tuning.TuningFolds(x, y, 3, splits), points,
                            tuning.NoisyScoring(methods, eps_grid, 1e-5, draws, seed=11), sampler)
    by = {(r["point"], r["method"], r["eps"]): r for r in rows}
    assert len(rows) == len(points) * (1 + len(methods) * len(eps_grid))
    for p, point in enumerate(points):
        spec = HeadSpec.from_config(point)
        record = population_sensitivity(spec, x, y, 3, 20, PopulationSampler(12, 0.3, 0.5, seed=11))
        noise_free = sum(round(float(accuracy(train_heads_on_sets(spec, x, y, t[None], 3), x[v], y[v])[0]) * len(v))
                         for t, v in splits)
        assert by[p, "head", math.inf]["correct"] == noise_free
        for m, method in enumerate(methods):
            right = np.zeros(len(eps_grid))
            for f, (train, val) in enumerate(splits):
                head = train_heads_on_sets(spec, x, y, train[None], 3)
                noisy, _ = protected_heads(flatten(head)[0], method, list(eps_grid), draws, 1e-5, record,
                                           11 + 1000 * f + m)
                hits = accuracy(unflatten(noisy.reshape(-1, noisy.shape[-1]), {k: tuple(v.shape[1:])
                                                                              for k, v in head.items()}),
                                x[val], y[val]) * len(val)
                right += hits.reshape(len(eps_grid), draws).sum(1).round().numpy()
            for e, eps in enumerate(eps_grid):
                row = by[p, method, eps]
                assert (row["correct"], row["decisions"]) == (right[e], 60 * draws * 2)
                assert (row["delta1"], row["delta2"]) == (record["delta1"], record["delta2"])
    # the larger step moves the head further per record: its Δ is larger, its noise too
    assert by[1, "alm", 0.5]["delta1"] > by[0, "alm", 0.5]["delta1"]


def test_the_head_is_chosen_for_its_noise_where_the_run_releases_the_alm_family(tmp_path):
    """The tune script: with a method of the ALM family the least worst-case regret after noise,
    without one the noise-free accuracy; here they differ (the MLP fits better and is far less
    stable), so a script that kept the noise-free criterion fails."""
    root = Path(__file__).resolve().parents[1]
    x, blob = blobs(160, classes=6, width=4, spread=0.5, seed=0)
    y = blob % 3  # each class two blobs apart: the MLP fits it (0.99), a linear head only in part (0.83)
    torch.save({"n_classes": 3, "finetune": x[:40], "finetune_labels": y[:40], "reference": x[40:],
                "reference_labels": y[40:]}, tmp_path / "features.pt")
    config = {"head": {"architecture": "mlp", "hidden": 32, "epochs": 150, "optimizer": "adam", "lr": 0.05,
                       "weight_decay": 0.0},
              "sensitivity": {"sampling": "population", "m": 12, "rho": 0.3, "gamma": 0.5, "chunk_size": 12},
              "protect": {"mechanisms": ["alm", "laplace"], "eps": [3.0, 30.0], "delta": 1e-5, "repeats": 4},
              "tuning": {"folds": 2, "head": [{}, {"architecture": ["linear"], "optimizer": ["sgd"], "lr": [0.1],
                                                   "weight_decay": [1e-2], "epochs": [30]}]}}

    def chosen(mechanisms):
        config["protect"]["mechanisms"] = mechanisms
        out = tmp_path / "-".join(mechanisms)
        done = subprocess.run([sys.executable, str(root / "scripts" / "tune_head.py"), "--dataset", "blobs",
                               "--features", str(tmp_path / "features.pt"), "--config", json.dumps(config),
                               "--seed", "0", "--out-dir", str(out)],
                              capture_output=True, text=True, env={"PYTHONPATH": str(root / "src"), "PATH": ""})
        assert done.returncode == 0, done.stderr
        table = pd.read_csv(out / "head.csv")
        return json.loads((out / "head.json").read_text())["architecture"], table

    after_noise, table = chosen(["alm", "laplace"])
    noise_free, _ = chosen(["certified_pure"])
    assert (after_noise, noise_free) == ("linear", "mlp")
    regret = table[np.isfinite(table.eps)].groupby("point").regret.max()
    assert table[table.chosen].point.unique().tolist() == [regret.idxmin()]
    head_rows = table[table.method == "head"]
    assert head_rows.loc[head_rows.accuracy.idxmax(), "architecture"] == "mlp"


def test_certified_scores_use_the_releases_noise_at_each_eps():
    x, y = blobs(80, spread=0.3)
    splits = tuning.folds(80, 40, 2, seed=2)
    points = [{"clip_norm": 1.0, "l2": 0.01, "tolerance": 1e-6}]
    rows = tuning.tune_certified(tuning.TuningFolds(x, y, 3, splits), points,
                                 tuning.NoisyScoring(("certified_gaussian",), (0.01, 1e6), 1e-5, draws=4, seed=0))
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
    rows = tuning.tune_dpsgd(tuning.TuningFolds(x, y, 3, splits), HeadSpec(architecture="linear"), points, [0.5, 50.0],
                             1e-5, seed=0)
    by = {r["eps"]: r for r in rows}
    assert set(by) == {0.5, 50.0, math.inf}
    assert by[math.inf]["noise_multiplier"] == 0.0
    for eps in (0.5, 50.0):  # σ is the accountant's for this point's q and steps: its ε is the target's
        spent = accountant_epsilon(by[eps]["noise_multiplier"], by[eps]["sample_rate"], by[eps]["steps"], 1e-5, "rdp")
        assert 0.99 * eps <= spent <= eps * (1 + 1e-9)
    assert by[0.5]["steps"] == 5 * 3  # 30 records, batches of 10
    assert by[math.inf]["accuracy"] > 0.9 and by[0.5]["accuracy"] < by[math.inf]["accuracy"]


# ------------------------------------------------------------------------------------ fitting on the right records

def split_rule(seed: int = 4):
    """80 reference records in three blobs and two folds given by hand: the training records
    (0..29) are labelled by their blob, the validation records (30..79) by the next blob. A head
    fitted on a fold's training records is wrong on its validation records (accuracy ≈ 0); one
    fitted on the validation records themselves would be right (≈ 1): tuning that trained on
    the wrong records is told apart, as it is not on blobs whose records all follow one rule.
    The validation sets (25) are larger than the training sets (15): n is the training size."""
    x, blob = blobs(80, spread=0.3, seed=seed)
    y = torch.where(torch.arange(80) < 30, blob, (blob + 1) % 3)
    splits = [(torch.arange(0, 15), torch.arange(30, 55)), (torch.arange(15, 30), torch.arange(55, 80))]
    return x, y, splits


def test_head_tuning_fits_on_the_training_records_of_each_fold():
    x, y, splits = split_rule()
    point = {"architecture": "linear", "epochs": 60, "lr": 0.05}
    row = tuning.tune_head(tuning.TuningFolds(x, y, 3, splits), [point])[0]
    correct = wrong_records = 0
    for train, val in splits:
        head = train_heads_on_sets(HeadSpec.from_config(point), x, y, train[None], 3)
        correct += round(float(accuracy(head, x[val], y[val])[0]) * len(val))
        on_val = train_heads_on_sets(HeadSpec.from_config(point), x, y, val[None], 3)
        wrong_records += round(float(accuracy(on_val, x[val], y[val])[0]) * len(val))
    assert (row["correct"], row["decisions"]) == (correct, 50) and row["accuracy"] == correct / 50
    assert row["accuracy"] < 0.1 and wrong_records / 50 > 0.9


def test_certified_tuning_fits_and_releases_on_the_training_records_of_each_fold():
    x, y, splits = split_rule()
    point = {"clip_norm": 1.0, "l2": 0.01, "tolerance": 1e-6}
    rows = tuning.tune_certified(tuning.TuningFolds(x, y, 3, splits), [point],
                                 tuning.NoisyScoring(("certified_gaussian", "certified_pure"), (0.5, 1e6), 1e-5,
                                                     draws=3, seed=7))
    by = {(r["method"], r["eps"]): r for r in rows}
    spec = CertifiedSpec(1.0, 0.01)
    record = certified_sensitivity(15, 3, spec)  # n = |d| = the training sets' size, not the validation's 25
    expected, on_val = {}, 0
    for f, (train, val) in enumerate(splits):
        params = fit_certified_head(x[train], y[train], 3, spec).params
        queries = head_inputs(x[val], 1.0)
        expected[("noise_free", math.inf)] = expected.get(("noise_free", math.inf), 0) + round(
            float(accuracy(params, queries, y[val])[0]) * 25)
        flat = flatten(params)[0]
        shapes = {k: tuple(v.shape[1:]) for k, v in params.items()}
        for m, method in enumerate(["certified_gaussian", "certified_pure"]):
            noisy, _ = protected_heads(flat, method, [0.5, 1e6], 3, 1e-5, record, 7 + 1000 * f + m)
            for e, eps in enumerate([0.5, 1e6]):
                hits = accuracy(unflatten(noisy[e], shapes), queries, y[val]) * 25
                expected[(method, eps)] = expected.get((method, eps), 0) + int(hits.round().sum())
        on_val += round(float(accuracy(fit_certified_head(x[val], y[val], 3, spec).params, queries, y[val])[0]) * 25)
    assert {key: row["correct"] for key, row in by.items()} == expected
    assert by["noise_free", math.inf]["decisions"] == 50 and by["certified_pure", 0.5]["decisions"] == 150
    assert by["noise_free", math.inf]["accuracy"] < 0.1 and on_val / 50 > 0.9


def test_dpsgd_tuning_trains_on_the_training_records_at_opacus_rate():
    x, y, splits = split_rule()
    points = [{"clip_norm": 1.0, "batch_size": 10, "epochs": 20, "lr": 0.5, "momentum": 0.5, "repeats": 1,
               "accountant": "rdp"}]
    rows = tuning.tune_dpsgd(tuning.TuningFolds(x, y, 3, splits), HeadSpec(architecture="linear"), points, [2.0], 1e-5,
                             seed=0)
    by = {r["eps"]: r for r in rows}
    # 15 records in batches of 10: Opacus samples at 1/⌈15/10⌉ = 1/2 (not 10/15), 2 steps an epoch
    assert {(r["sample_rate"], r["steps"]) for r in rows} == {(0.5, 40)}
    spent = accountant_epsilon(by[2.0]["noise_multiplier"], 0.5, 40, 1e-5, "rdp")
    assert 0.99 * 2.0 <= spent <= 2.0 * (1 + 1e-9)
    assert by[math.inf]["decisions"] == 50 and by[math.inf]["accuracy"] < 0.1
    spec = DPSGDSpec.from_config(points[0])
    on_val = train_dpsgd_heads(x, y, torch.stack([val[:15] for _, val in splits]), 3, HeadSpec(architecture="linear"),
                               spec, torch.zeros(2, dtype=torch.float64), 0)
    right = sum(float(accuracy({k: v[f:f + 1] for k, v in on_val.items()}, x[val], y[val])[0]) * 25
                for f, (_, val) in enumerate(splits))
    assert right / 50 > 0.8  # a head trained on validation records would have scored high


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
    done = subprocess.run([sys.executable, str(root / "scripts" / "tune_certified.py"), "--dataset", "blobs",
                           "--features", str(tmp_path / "features.pt"), "--config", json.dumps(config),
                           "--seed", "0", "--out-dir", str(tmp_path / "tuning")],
                          capture_output=True, text=True, env={"PYTHONPATH": str(root / "src"), "PATH": ""})
    assert done.returncode == 2
    assert "tune_certified.py: error: --config: certified spec (clip_norm R = 1, l2 λ = 1e-12" in done.stderr
    assert not (tmp_path / "tuning").exists()


# ------------------------------------------------------------------------------------ the rows, field by field

def test_every_row_holds_its_fields_and_an_unreachable_eps_is_a_row_without_a_score(monkeypatch):
    """The rows as the tuning table writes them: a head row, a certified row, a DP-SGD row at a
    reached ε and at σ = 0, and one at an ε the accountant cannot reach (σ NaN, no decisions). The
    DP-SGD heads train with exactly the calibrated σ (float64, per fold) on the folds' training sets."""
    x, y, splits = split_rule()
    head = tuning.tune_head(tuning.TuningFolds(x, y, 3, splits), [{"architecture": "linear", "epochs": 2, "lr": 0.05}])
    assert list(head[0]) == ["point", "eps", "method", "correct", "decisions", "accuracy", "delta1", "delta2"]
    assert math.isnan(head[0]["delta1"]) and math.isnan(head[0]["delta2"])  # noise-free: no Δ sampled
    assert (head[0]["point"], head[0]["eps"], head[0]["method"], head[0]["decisions"]) == (0, math.inf, "head", 50)
    certified = tuning.tune_certified(tuning.TuningFolds(x, y, 3, splits), [{"clip_norm": 1.0, "l2": 0.01}],
                                      tuning.NoisyScoring(("certified_pure",), (1.0,), 1e-5, draws=1, seed=0))
    assert [(r["point"], r["method"], r["eps"]) for r in certified] == [(0, "noise_free", math.inf),
                                                                       (0, "certified_pure", 1.0)]
    assert all(list(r) == ["point", "eps", "method", "correct", "decisions", "accuracy"] for r in certified)
    seen = []

    def spy(features, labels, sets, *args):
        seen.append((sets, args[-2]))
        return train_dpsgd_heads(features, labels, sets, *args)

    def calibrate(eps_grid, *args):  # ε = 1e-6 is out of reach (σ > 1e6), but a search takes ~10 s to say so
        reached, unreachable = tuning_calibrate_grid([e for e in eps_grid if e != 1e-6], *args)
        return reached, unreachable + [Unreachable(1e-6, 1e-5, "σ would exceed 1e6")]

    monkeypatch.setattr(tuning, "train_dpsgd_heads", spy)
    monkeypatch.setattr(dpsgd_accounting, "calibrate_grid", calibrate)  # tune_dpsgd imports it at its call
    point = {"clip_norm": 1.0, "batch_size": 10, "epochs": 2, "lr": 0.5, "momentum": 0.5, "repeats": 1,
             "accountant": "rdp"}
    rows = tuning.tune_dpsgd(tuning.TuningFolds(x, y, 3, splits), HeadSpec(architecture="linear"), [point], [1e-6, 3.0],
                             1e-5, seed=0)
    reached = tuning_calibrate_grid([3.0], 1e-5, 0.5, 4, "rdp")[0][0].noise_multiplier
    fields = ["point", "eps", "method", "noise_multiplier", "sample_rate", "steps", "correct", "decisions", "accuracy"]
    assert all(list(r) == fields for r in rows)
    assert [(r["point"], r["eps"], r["method"], r["noise_multiplier"], r["sample_rate"], r["steps"], r["decisions"])
            for r in rows[:2]] == [(0, 3.0, "dpsgd", reached, 0.5, 4, 50), (0, math.inf, "dpsgd", 0.0, 0.5, 4, 50)]
    assert rows[0]["correct"] == round(rows[0]["accuracy"] * 50)
    unreachable = rows[2]
    assert (unreachable["point"], unreachable["eps"], unreachable["method"], unreachable["sample_rate"],
            unreachable["steps"], unreachable["correct"], unreachable["decisions"]) == (0, 1e-6, "dpsgd", 0.5, 4, 0, 0)
    assert math.isnan(unreachable["noise_multiplier"]) and math.isnan(unreachable["accuracy"])
    (sets, sigma), = seen
    assert torch.equal(sets, torch.stack([train for train, _ in splits]).repeat(2, 1))
    assert sigma.dtype == torch.float64 and sigma.tolist() == [reached, reached, 0.0, 0.0]


def test_points_of_different_sampling_plans_are_calibrated_each_for_its_own():
    """Two points, batches of 5 and of 15 of the 15 training records: q = 1/3 and 1, each σ the
    accountant's for its own q and steps."""
    x, y, splits = split_rule()
    points = [{"clip_norm": 1.0, "batch_size": b, "epochs": 2, "lr": 0.5, "momentum": 0.5, "repeats": 1,
               "accountant": "rdp"} for b in (5, 15)]
    data = tuning.TuningFolds(x, y, 3, splits)
    rows = [r for r in tuning.tune_dpsgd(data, HeadSpec(architecture="linear"), points, [3.0], 1e-5, seed=0)
            if r["eps"] == 3.0]
    assert [(r["sample_rate"], r["steps"]) for r in rows] == [(1 / 3, 6), (1.0, 2)]
    for r in rows:
        spent = accountant_epsilon(r["noise_multiplier"], r["sample_rate"], r["steps"], 1e-5, "rdp")
        assert 0.99 * 3.0 <= spent <= 3.0 * (1 + 1e-9)
    assert rows[0]["noise_multiplier"] < rows[1]["noise_multiplier"]


def test_the_prv_work_bound_reaches_the_tuning(monkeypatch):
    """A PRV σ search above the accountant's work bound leaves its ε unreachable (no score), however
    reachable it would be with a larger bound."""
    monkeypatch.setattr(dpsgd_accounting, "PRV_MAX_POINTS", 100)
    x, y, splits = split_rule()
    point = {"clip_norm": 1.0, "batch_size": 10, "epochs": 2, "lr": 0.5, "momentum": 0.5, "repeats": 1,
             "accountant": "prv"}
    rows = tuning.tune_dpsgd(tuning.TuningFolds(x, y, 3, splits), HeadSpec(architecture="linear"), [point], [3.0], 1e-5,
                             seed=0)
    by = {r["eps"]: r for r in rows}
    assert by[3.0]["decisions"] == 0 and math.isnan(by[3.0]["noise_multiplier"]) and by[math.inf]["decisions"] == 50


def test_folds_may_train_on_a_single_record_and_the_refusal_names_the_sizes():
    assert [len(train) for train, _ in tuning.folds(5, 1, 2, seed=0)] == [1, 1]
    with pytest.raises(ValueError, match=r"^tuning trains on \|d\| = 5 of the 5 reference records and scores on the "
                                         r"rest: needs 0 < \|d\| < \|reference\|$"):
        tuning.folds(5, 5, 1, seed=0)


def test_a_method_and_eps_without_any_score_has_no_regret_and_an_unscored_point_is_refused():
    rows = [{"point": 0, "method": "certified_pure", "eps": 1.0, "accuracy": math.nan},
            {"point": 1, "method": "certified_pure", "eps": 1.0, "accuracy": math.nan},
            {"point": 0, "method": "certified_gaussian", "eps": 1.0, "accuracy": 0.7},
            {"point": 1, "method": "certified_gaussian", "eps": 1.0, "accuracy": 0.6}]
    regrets = tuning.regrets(rows)
    assert math.isnan(regrets[0]) and math.isnan(regrets[1]) and regrets[2:] == pytest.approx([0.0, 0.1])
    with pytest.raises(ValueError, match="^every point must be scored at every ε to compare their regrets$"):
        tuning.least_regret_point([{"point": 0, "method": "noise_free", "eps": math.inf, "accuracy": 1.0}])


def test_a_point_unscored_at_some_eps_is_refused():
    rows = [{"point": 0, "method": "certified_pure", "eps": 1.0, "accuracy": math.nan},
            {"point": 1, "method": "certified_pure", "eps": 1.0, "accuracy": 0.5},
            {"point": 0, "method": "certified_gaussian", "eps": 1.0, "accuracy": 0.7},
            {"point": 1, "method": "certified_gaussian", "eps": 1.0, "accuracy": 0.6}]
    with pytest.raises(ValueError, match="^every point must be scored at every ε to compare their regrets$"):
        tuning.least_regret_point(rows)  # returns point 0, never scored at (certified_pure, 1)


def test_each_section_logs_its_grid_points_done_out_of_all():
    """The tuning job's progress (privssl.io.Progress): one line per finished point of a two-point
    grid (each a half, so each a new tenth), named after the section, with done/total."""
    x, y, splits = split_rule()
    runs = {
        "head grid points": lambda log: tuning.tune_head(
            tuning.TuningFolds(x, y, 3, splits), [{"architecture": "linear", "epochs": e, "lr": 0.05} for e in (1, 2)],
            log=log),
        "certified grid points": lambda log: tuning.tune_certified(
            tuning.TuningFolds(x, y, 3, splits), [{"clip_norm": 1.0, "l2": l2} for l2 in (0.01, 0.1)],
            tuning.NoisyScoring(("certified_pure",), (1.0,), 1e-5, draws=1, seed=0), log=log),
        "DP-SGD grid points": lambda log: tuning.tune_dpsgd(
            tuning.TuningFolds(x, y, 3, splits), HeadSpec(architecture="linear"),
            [{"clip_norm": 1.0, "batch_size": 10, "epochs": 1, "lr": lr, "momentum": 0.0, "repeats": 1,
              "accountant": "rdp"} for lr in (0.1, 0.5)], [3.0], 1e-5, seed=0,
            log=log),
    }
    for what, run in runs.items():
        lines = []
        run(lines.append)
        assert [line.split(", ")[0] for line in lines] == [f"{what}: 1/2 (50 %)", f"{what}: 2/2 (100 %)"], lines
