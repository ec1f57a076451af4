"""The DP-SGD head (privssl.release.dpsgd, scripts/protect_dpsgd.py): its accounting against Google's
dp_accounting, the σ calibration, the module against heads.py, seeding, unreachable ε, spec
validation and the script end to end."""

import json
import math
import os
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant
from warm_scripts import script_python

from privssl.accounting.dpsgd import UnreachableEpsilon, accountant_epsilon, calibrate_grid, noise_multiplier
from privssl.release.dpsgd import DPSGDSpec, sampling_plan, train_dpsgd_head
from privssl.training.heads import (
    HeadSpec,
    accuracy,
    flatten,
    init_heads,
    parameter_shapes,
    predict_proba,
    train_head,
    unflatten,
)

ROOT = Path(__file__).resolve().parents[1]
DELTA = 1e-5
N_CLASSES = 3
# 40 records, expected batch 10: q = 1/4, 4 batches per epoch, 2 epochs = 8 steps
SPEC = DPSGDSpec(clip_norm=1.0, batch_size=10, epochs=2, lr=0.5, momentum=0.5, repeats=2, accountant="rdp")


def blobs(n: int, seed: int, dim: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """Three well separated Gaussian classes."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % N_CLASSES
    centres = 3.0 * torch.eye(N_CLASSES, dim, dtype=torch.float64)
    return centres[y] + torch.randn(n, dim, generator=g, dtype=torch.float64), y


def google_rdp_epsilon(sample_rate: float, sigma: float, steps: int, delta: float) -> float:
    accountant = RdpAccountant()
    accountant.compose(SelfComposedDpEvent(PoissonSampledDpEvent(sample_rate, GaussianDpEvent(sigma)), steps))
    return accountant.get_epsilon(delta)


@pytest.fixture(scope="module")
def trained_run():
    x, y = blobs(40, seed=0)
    return train_dpsgd_head(x, y, N_CLASSES, HeadSpec(architecture="linear"), SPEC, 1.3, DELTA, seed=7)


@pytest.mark.parametrize("sample_rate, sigma, steps", [(0.01, 1.1, 1000), (1 / 3, 1.8737, 90), (1 / 2, 1.0, 60)])
def test_epsilon_agrees_with_dp_accounting_rdp(sample_rate, sigma, steps):
    ours = accountant_epsilon(sigma, sample_rate, steps, DELTA, "rdp")
    assert ours == pytest.approx(google_rdp_epsilon(sample_rate, sigma, steps, DELTA), rel=0.01)


def test_small_sigma_epsilon_agrees_with_integrated_rdp_where_dp_accounting_drops_orders():
    """At σ = 0.5 (the large-ε end of the grid) dp_accounting's series for fractional orders stops
    after 1000 terms and it drops those orders: its ε is a looser valid bound than ours. Ours
    matches the RDP integrated numerically at orders 1.1 … 2 (converted by dp_accounting)."""
    from dp_accounting.rdp import compute_epsilon
    from scipy import integrate, stats

    q, sigma, steps = 0.5, 0.5, 60

    def log_a(alpha):  # log E_{z~N(0,σ²)} [((1-q) + q N(1,σ²)(z) / N(0,σ²)(z))^α]
        def integrand(z):
            return stats.norm.pdf(z, 0, sigma) * ((1 - q) + q * np.exp((2 * z - 1) / (2 * sigma ** 2))) ** alpha
        return np.log(integrate.quad(integrand, -12, 12, points=[0, 1], limit=200)[0])

    orders = np.arange(1.1, 2.05, 0.1)
    integrated, _ = compute_epsilon(orders, [steps * log_a(a) / (a - 1) for a in orders], DELTA)
    ours = accountant_epsilon(sigma, q, steps, DELTA, "rdp")
    assert ours == pytest.approx(integrated, rel=0.01) and ours <= integrated * (1 + 1e-9)
    assert ours < google_rdp_epsilon(q, sigma, steps, DELTA)


def test_epsilon_of_a_training_run_agrees_with_dp_accounting_rdp(trained_run):
    run = trained_run
    assert (run.sample_rate, run.steps) == (0.25, 8) == sampling_plan(40, SPEC)
    assert run.eps_spent == pytest.approx(
        google_rdp_epsilon(run.sample_rate, run.noise_multiplier, run.steps, DELTA), rel=0.01)


@pytest.mark.parametrize("n, batch_size, batches", [(25, 10, 3), (101, 10, 11), (7, 3, 3), (40, 10, 4)])
def test_the_sampling_rate_is_one_over_the_batches_of_an_epoch_not_b_over_n(n, batch_size, batches):
    """Opacus' DPDataLoader samples at 1 / len(DataLoader(batch_size)) = 1/⌈n/B⌉, not B/n (0.4 for
    25 records in batches of 10, where Opacus samples at 1/3): the σ calibrated for B/n would be
    accounted at a rate the training does not run."""
    from opacus.data_loader import DPDataLoader

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(n, 1)), batch_size=batch_size)
    opacus_rate = DPDataLoader.from_data_loader(loader).sample_rate
    assert opacus_rate == 1 / batches
    spec = DPSGDSpec(clip_norm=1.0, batch_size=batch_size, epochs=3, lr=0.5, momentum=0.0, repeats=1, accountant="rdp")
    assert sampling_plan(n, spec) == (opacus_rate, 3 * batches)
    assert n % batch_size == 0 or batch_size / n != opacus_rate


def test_a_run_on_records_that_do_not_fill_the_last_batch_is_accounted_at_opacus_rate():
    x, y = blobs(25, seed=2)
    spec = DPSGDSpec(clip_norm=1.0, batch_size=10, epochs=2, lr=0.5, momentum=0.5, repeats=1, accountant="rdp")
    run = train_dpsgd_head(x, y, N_CLASSES, HeadSpec(architecture="linear"), spec, 1.3, DELTA, seed=1)
    assert (run.sample_rate, run.steps) == (1 / 3, 6)
    assert run.eps_spent == pytest.approx(google_rdp_epsilon(1 / 3, 1.3, 6, DELTA), rel=0.01)
    assert run.eps_spent < 0.9 * google_rdp_epsilon(0.4, 1.3, 6, DELTA)  # what B/n would have claimed


def test_noise_multiplier_reaches_target_eps_and_falls_as_eps_grows():
    q, steps = 1 / 3, 30
    reached, unreachable = calibrate_grid([0.5, 8.0], DELTA, q, steps, "rdp")
    assert unreachable == [] and [c.eps for c in reached] == [0.5, 8.0]
    reached.insert(1, noise_multiplier(2.0, DELTA, q, steps, "rdp"))
    for cal in reached:
        again = accountant_epsilon(cal.noise_multiplier, q, steps, DELTA, "rdp")
        assert again == pytest.approx(cal.eps_at_sigma, rel=1e-12)
        assert 0.99 * cal.eps <= again <= cal.eps  # reaches the target, and not with needless noise
        # the independent accountant agrees that σ buys the target
        assert google_rdp_epsilon(q, cal.noise_multiplier, steps, DELTA) == pytest.approx(cal.eps, rel=0.01)
    sigmas = [c.noise_multiplier for c in reached]
    assert sigmas[0] > sigmas[1] > sigmas[2] > 0


@pytest.mark.parametrize("architecture", ["linear", "mlp"])
def test_trained_module_agrees_with_predict_proba_of_flat_head(architecture):
    x, y = blobs(40, seed=1)
    head_spec = HeadSpec(architecture=architecture, hidden=5)
    run = train_dpsgd_head(x, y, N_CLASSES, head_spec, SPEC, 1.0, DELTA, seed=3)
    shapes = parameter_shapes(head_spec, x.shape[1], N_CLASSES)
    assert run.flat.dtype == torch.float64 and run.flat.shape == (sum(torch.Size(s).numel() for s in shapes.values()),)
    x_new, _ = blobs(25, seed=2)
    with torch.no_grad():
        module_proba = torch.softmax(run.module(x_new), -1)
    flat_proba = predict_proba(unflatten(run.flat[None], shapes), x_new)[0]
    torch.testing.assert_close(module_proba, flat_proba, rtol=0, atol=1e-12)
    # training moved the head away from A_S's initialisation
    init = flatten(init_heads(head_spec, x.shape[1], N_CLASSES, 1))[0]
    assert not torch.equal(run.flat, init)


def test_same_seed_gives_same_head_and_another_seed_another(trained_run):
    x, y = blobs(40, seed=0)
    head_spec = HeadSpec(architecture="linear")
    torch.manual_seed(12345)  # the global RNG plays no part
    same = train_dpsgd_head(x, y, N_CLASSES, head_spec, SPEC, 1.3, DELTA, seed=7)
    other = train_dpsgd_head(x, y, N_CLASSES, head_spec, SPEC, 1.3, DELTA, seed=8)
    assert torch.equal(same.flat, trained_run.flat)
    assert not torch.allclose(other.flat, trained_run.flat)


def test_unreachable_eps_is_reported_naming_it():
    # q = 1/4 over 8 steps: even Opacus' largest σ (1e6) leaves ε above 1e-4 at δ = 1e-5
    with pytest.raises(UnreachableEpsilon, match=r"ε = 0\.0001 is unreachable: .*privacy budget is too low"):
        noise_multiplier(1e-4, DELTA, 0.25, 8, "rdp")
    # a search whose PRV accountant would exceed its work bound (a large ε: a small σ, a large grid) is
    # reported, and the larger ε of the grid, which need a smaller σ still, are not searched
    reached, unreachable = calibrate_grid([3000.0, 1000.0, 5000.0], DELTA, 1 / 3, 90, "prv")
    assert reached == []
    assert [(u.eps, u.delta) for u in unreachable] == [(3000.0, DELTA), (1000.0, DELTA), (5000.0, DELTA)]
    assert "above its bound of 8,388,608 (PRV_MAX_POINTS)" in unreachable[1].reason
    for skipped in (unreachable[0], unreachable[2]):
        assert skipped.reason.startswith("not searched: the search for the smaller ε = 1000 already exceeded the work "
                                         "bound")


@pytest.mark.parametrize("field, value", [("clip_norm", 0.0), ("clip_norm", float("inf")), ("batch_size", 0),
                                          ("batch_size", 2.5), ("epochs", 0), ("lr", -0.1), ("momentum", 1.0),
                                          ("momentum", -0.1), ("repeats", 0), ("accountant", "gdp")])
def test_bad_spec_value_rejected_naming_the_field(field, value):
    with pytest.raises(ValueError, match=rf"dpsgd\.{field} = .* is not allowed; allowed: "):
        DPSGDSpec(**{field: value})
    with pytest.raises(ValueError, match="unknown dpsgd fields"):
        DPSGDSpec.from_config({"clip": 1.0})


def script_arguments(tmp_path: Path, eps: list[str], head_spec: dict) -> list[str]:
    """Arguments of protect_dpsgd.py on synthetic features and a non-private head in tmp_path."""
    x, y = blobs(40, seed=4)
    x_test, y_test = blobs(30, seed=5)
    feats = tmp_path / "features.pt"
    torch.save({"finetune": x, "finetune_labels": y, "test": x_test, "test_labels": y_test,
                "n_classes": N_CLASSES}, feats)
    spec = HeadSpec(**head_spec)
    params = train_head(spec, x, y, N_CLASSES)
    assert float(accuracy(params, x_test, y_test)[0]) > 0.5
    torch.save({"params": params, "shapes": parameter_shapes(spec, x.shape[1], N_CLASSES), "spec": spec.__dict__,
                "n_classes": N_CLASSES}, tmp_path / "head.pt")
    dpsgd = {k: getattr(SPEC, k) for k in SPEC.__dataclass_fields__}
    # the tune rule's choice: ε = 100 trains one epoch longer than the others
    tuned = {"per_eps": [{"eps": float(e), "spec": dpsgd | ({"epochs": 3} if float(e) == 100 else {})} for e in eps],
             "noise_free": dpsgd}
    return ["--dataset", "blobs", "--features", str(feats), "--head", str(tmp_path / "head.pt"),
            "--best-clean-head", str(tmp_path / "head.pt"),
            "--head-spec", json.dumps(head_spec), "--dpsgd", json.dumps(tuned), "--eps", *eps, "--delta", str(DELTA),
            "--seed", "11", "--out-csv", str(tmp_path / "dpsgd.csv"), "--out-heads", str(tmp_path / "dpsgd.pt"),
            "--threads", "1", "--device", "cpu"]


def test_script_end_to_end(tmp_path):
    head_spec = {"architecture": "mlp", "hidden": 4, "epochs": 50, "lr": 0.05}
    cmd = [script_python(), str(ROOT / "scripts" / "protect_dpsgd.py"),
           *script_arguments(tmp_path, ["1", "0.0001", "100"], head_spec)]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "left out: ε = 0.0001" in done.stderr
    everything = pd.read_csv(tmp_path / "dpsgd.csv")
    assert list(everything.columns) == [
        "dataset", "mechanism", "eps", "delta", "repeat", "noise_scale", "sensitivity_norm", "sensitivity",
        "guarantee_kind", "guarantee", "clean_accuracy", "accuracy", "utility_loss", "n_test", "decisions",
        "noise_multiplier", "sample_rate", "steps", "eps_spent", "dpsgd_lr", "dpsgd_epochs", "dpsgd_batch_size",
        "dpsgd_clip_norm", "dpsgd_momentum", "clean_decisions", "best_clean_decisions"]
    assert len(everything) == 3 * SPEC.repeats  # (reached ε + the noise-free limit) × repeats
    limit, table = everything[everything.eps == math.inf], everything[everything.eps < math.inf]
    assert (limit.noise_scale == 0).all() and (limit.guarantee_kind == "none").all()
    assert (limit.eps_spent == math.inf).all() and (limit.steps == 8).all()
    assert sorted(set(table.eps)) == [1.0, 100.0]
    assert (table.mechanism == "dpsgd").all() and (table.guarantee_kind == "approx_dp").all()
    assert (table.sensitivity == SPEC.clip_norm).all()
    # each ε trained with its own tuned settings: 4 steps an epoch, 2 epochs at ε = 1 and 3 at ε = 100
    assert table.groupby("eps").steps.unique().to_dict() == {1.0: [8], 100.0: [12]}
    assert table.groupby("eps").dpsgd_epochs.unique().to_dict() == {1.0: [2], 100.0: [3]}
    assert (table.sample_rate == 0.25).all()
    assert (table.eps_spent <= table.eps).all() and (table.noise_scale == table.noise_multiplier).all()
    assert table.groupby("eps").noise_scale.first()[1.0] > table.groupby("eps").noise_scale.first()[100.0]
    assert everything.clean_accuracy.nunique() == 1
    heads = torch.load(tmp_path / "dpsgd.pt", weights_only=True)
    assert set(heads) == {"method", "flat", "eps", "noise_scale", "shapes", "clip_norm", "specs"}
    assert [s["epochs"] for s in heads["specs"]] == [2, 3]
    shapes = parameter_shapes(HeadSpec(**head_spec), 6, N_CLASSES)
    assert heads["method"] == "dpsgd" and heads["clip_norm"] is None and heads["shapes"] == shapes
    assert heads["flat"].dtype == torch.float64
    assert heads["flat"].shape == (2, SPEC.repeats, sum(torch.Size(s).numel() for s in shapes.values()))
    assert heads["eps"].tolist() == [1.0, 100.0]
    assert heads["noise_scale"].tolist() == table.groupby("eps").noise_scale.first().tolist()
    # the CSV's accuracies are those of the saved heads
    x_test, y_test = blobs(30, seed=5)
    acc = accuracy(unflatten(heads["flat"].reshape(-1, heads["flat"].shape[-1]), shapes), x_test, y_test)
    assert acc.tolist() == pytest.approx(table.accuracy.tolist(), abs=1e-12)
    # the draws differ, within and across repeats
    assert not torch.equal(heads["flat"][0, 0], heads["flat"][0, 1])


def test_script_fails_and_writes_nothing_when_no_eps_is_reachable(tmp_path, monkeypatch):
    # in process (the end-to-end test above covers the subprocess): exit with the reason, no files
    script = runpy.run_path(str(ROOT / "scripts" / "protect_dpsgd.py"), run_name="protect_dpsgd")
    head_spec = {"architecture": "linear", "epochs": 50, "lr": 0.05}
    monkeypatch.setattr(sys, "argv", ["protect_dpsgd.py", *script_arguments(tmp_path, ["0.0001"], head_spec)])
    with pytest.raises(SystemExit) as exit_:
        script["main"]()
    message = str(exit_.value.code)
    assert "no ε of [0.0001] is reachable" in message and "privacy budget is too low" in message
    assert not (tmp_path / "dpsgd.csv").exists() and not (tmp_path / "dpsgd.pt").exists()
