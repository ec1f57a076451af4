"""Certified output perturbation (Chaudhuri, Monteleoni & Sarwate 2011): the proven Δ2 bounds
the distance of heads trained on neighbouring sets, the solver finds the regularised minimiser
(checked against scikit-learn and torch autograd), a solver that misses the tolerance releases
nothing, the rule script's files, and the Gamma-norm noise the ε-DP release adds."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats
from sklearn.linear_model import LogisticRegression

from privssl.release.certified import (
    CertifiedSpec,
    ConvergenceError,
    certified_sensitivity,
    fit_certified_head,
    train_certified_head,
)
from privssl.release.mechanisms import standard_noise
from privssl.release.protection import head_inputs
from privssl.training.heads import flatten, head_logits

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "certified_head.py"
RECORD_KEYS = {"sampling", "sensitivity_kind", "delta2", "delta1", "lipschitz", "clip_norm", "l2", "tolerance",
               "finetune_size", "adjacency", "statement"}


def synthetic(n, generator, n_features=5, n_classes=3, scale=2.0):
    """Features of norm ~ scale·√F, well above R = 1, so most rows are clipped; random labels."""
    x = torch.randn(n, n_features, generator=generator, dtype=torch.float64) * scale
    y = torch.randint(0, n_classes, (n,), generator=generator)
    return x, y


def expected_delta2(n, spec):
    """Δ2 = 2L/(nλ) + 2g/λ with L = √2·√(R²+1), written out independently of the module."""
    lipschitz = math.sqrt(2 * (spec.clip_norm ** 2 + 1))
    return 2 * lipschitz / (n * spec.l2) + 2 * spec.tolerance / spec.l2


def clipped_augmented(x, clip_norm):
    """[x · min(1, R/‖x‖), 1], computed here without protection.head_inputs."""
    norms = x.norm(dim=1, keepdim=True)
    clipped = x * torch.minimum(torch.ones_like(norms), clip_norm / norms)
    return torch.cat([clipped, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)


def test_certified_bound_holds_on_random_neighbouring_pairs():
    spec = CertifiedSpec(clip_norm=1.0, l2=1.0, tolerance=1e-6)
    unclipped = CertifiedSpec(clip_norm=1e6, l2=1.0, tolerance=1e-6)
    generator = torch.Generator().manual_seed(2011)
    ratios, unclipped_ratios = [], []
    for pair in range(200):
        n = int(torch.randint(30, 61, (1,), generator=generator))
        x, y = synthetic(n + 1, generator)
        d, neighbour = torch.arange(n), torch.arange(n)
        neighbour[int(torch.randint(0, n, (1,), generator=generator))] = n  # substitute one record
        bound = expected_delta2(n, spec)
        assert certified_sensitivity(n, 3, spec)["delta2"] == pytest.approx(bound, rel=1e-12)
        distance = (flatten(train_certified_head(x[d], y[d], 3, spec))
                    - flatten(train_certified_head(x[neighbour], y[neighbour], 3, spec))).norm().item()
        ratios.append(distance / bound)
        if pair < 20:  # the same pairs without clipping: the R = 1 bound must not cover them
            distance = (flatten(train_certified_head(x[d], y[d], 3, unclipped))
                        - flatten(train_certified_head(x[neighbour], y[neighbour], 3, unclipped))).norm().item()
            unclipped_ratios.append(distance / bound)
    assert max(ratios) <= 1.0, f"Δ2 violated: max distance / bound = {max(ratios):.4f}"
    # Not vacuous: random substitutions reach ~0.4 of the worst case here (0.25 leaves margin).
    assert max(ratios) >= 0.25, f"bound far from tight: max distance / bound = {max(ratios):.4f}"
    # The check has power: unclipped features (norm ~ 4.5 > R) break the R = 1 bound.
    assert max(unclipped_ratios) > 1.0


def test_solution_matches_sklearn_logistic_regression():
    generator = torch.Generator().manual_seed(7)
    x, y = synthetic(80, generator, n_features=6, n_classes=4, scale=1.0)
    spec = CertifiedSpec(clip_norm=1.5, l2=0.5, tolerance=1e-7)
    params = train_certified_head(x, y, 4, spec)
    ours = torch.cat([params["weight"][0], params["bias"]], dim=0).T.numpy()  # (C, F + 1)
    # sklearn minimises C·Σ CE + ½‖W‖², i.e. J/λ with C = 1/(nλ): the same minimiser.
    reference = LogisticRegression(C=1 / (80 * spec.l2), fit_intercept=False, tol=1e-12, max_iter=100_000)
    reference.fit(clipped_augmented(x, spec.clip_norm).numpy(), y.numpy())
    assert np.abs(reference.coef_).max() > 0.1  # a non-trivial solution
    np.testing.assert_allclose(ours, reference.coef_, atol=1e-5, rtol=0)


def test_gradient_norm_at_solution_below_tolerance_by_autograd():
    generator = torch.Generator().manual_seed(11)
    x, y = synthetic(60, generator)
    for spec in (CertifiedSpec(clip_norm=1.0, l2=0.01), CertifiedSpec(clip_norm=2.0, l2=1.0, tolerance=1e-7)):
        fit = fit_certified_head(x, y, 3, spec)
        weights = torch.cat([fit.params["weight"][0], fit.params["bias"]], dim=0).requires_grad_(True)
        objective = (F.cross_entropy(clipped_augmented(x, spec.clip_norm) @ weights, y)
                     + 0.5 * spec.l2 * weights.pow(2).sum())
        (gradient,) = torch.autograd.grad(objective, weights)
        assert gradient.norm().item() <= spec.tolerance
        assert fit.gradient_norm == pytest.approx(gradient.norm().item(), abs=1e-10)
        assert fit.iterations >= 1


def test_non_convergence_refused_naming_tolerance():
    generator = torch.Generator().manual_seed(3)
    x, y = synthetic(40, generator)
    with pytest.raises(ConvergenceError, match=r"tolerance g = 1e-06.*max_iter = 1\b"):
        train_certified_head(x, y, 3, CertifiedSpec(clip_norm=1.0, l2=0.1, max_iter=1))
    with pytest.raises(ConvergenceError, match="gradient norm"):
        train_certified_head(x, y, 3, CertifiedSpec(clip_norm=1.0, l2=0.1, tolerance=1e-300))


def save_features(path, generator, n=40, n_test=25, n_features=5):
    x, y = synthetic(n, generator, n_features=n_features)
    test_x, test_y = synthetic(n_test, generator, n_features=n_features)
    torch.save({"finetune": x.float(), "finetune_labels": y, "test": test_x.float(), "test_labels": test_y,
                "n_classes": 3}, path)
    return path


def run_script(tmp_path, certified):
    outputs = {name: tmp_path / f"{name}.{ext}" for name, ext in
               (("head", "pt"), ("sensitivity", "json"), ("metrics", "json"))}
    command = [sys.executable, str(SCRIPT), "--features", str(tmp_path / "features.pt"),
               "--certified", json.dumps(certified), "--out-head", str(outputs["head"]),
               "--out-sensitivity", str(outputs["sensitivity"]), "--out-metrics", str(outputs["metrics"]),
               "--threads", "1", "--device", "cpu"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120), outputs


def test_script_non_convergence_exits_nonzero_writing_nothing(tmp_path):
    save_features(tmp_path / "features.pt", torch.Generator().manual_seed(5))
    result, outputs = run_script(tmp_path, {"clip_norm": 1.0, "l2": 0.1, "max_iter": 1})
    assert result.returncode != 0
    assert "tolerance" in result.stderr
    assert not any(path.exists() for path in outputs.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["features.pt"]  # no temporary files either


def test_script_rejects_bad_spec_naming_field(tmp_path):
    save_features(tmp_path / "features.pt", torch.Generator().manual_seed(5))
    result, outputs = run_script(tmp_path, {"clip_norm": 1.0, "l2": -0.5})
    assert result.returncode == 2 and "l2" in result.stderr and "-0.5" in result.stderr
    assert not any(path.exists() for path in outputs.values())


def test_script_writes_head_sensitivity_metrics_reproducing_accuracy(tmp_path):
    features = torch.load(save_features(tmp_path / "features.pt", torch.Generator().manual_seed(9)))
    certified = {"clip_norm": 1.0, "l2": 0.05, "tolerance": 1e-6, "max_iter": 1000}
    result, outputs = run_script(tmp_path, certified)
    assert result.returncode == 0, result.stderr
    head = torch.load(outputs["head"], weights_only=True)
    record = json.loads(outputs["sensitivity"].read_text())
    metrics = json.loads(outputs["metrics"].read_text())

    assert head["params"]["weight"].shape == (1, 5, 3) and head["params"]["bias"].shape == (1, 3)
    assert head["params"]["weight"].dtype == torch.float64
    assert head["shapes"] == {"weight": (5, 3), "bias": (3,)}
    assert head["spec"]["architecture"] == "linear" and head["spec"]["certified"]["l2"] == 0.05
    assert head["n_classes"] == 3 and head["clip_norm"] == 1.0

    assert RECORD_KEYS <= set(record)
    assert record["sampling"] == "certified" and record["sensitivity_kind"] == "proven"
    assert record["delta1"] is None and record["finetune_size"] == 40
    assert record["adjacency"] == "substitution of one record of d (|d| fixed)"
    assert record["delta2"] == pytest.approx(expected_delta2(40, CertifiedSpec(**certified)), rel=1e-12)
    assert f"{record['delta2']:.6g}" in record["statement"]

    for split, key in (("finetune", "train_accuracy"), ("test", "test_accuracy")):
        logits = head_logits(head["params"], head_inputs(features[split].double(), head["clip_norm"]))
        measured = (logits[0].argmax(-1) == features[f"{split}_labels"]).double().mean().item()
        assert metrics[key] == pytest.approx(measured, abs=1e-12)
    assert metrics["train_accuracy"] > 1 / 3  # it learned something on its own training set
    assert 0 < metrics["gradient_norm"] <= 1e-6 and metrics["iterations"] >= 1 and metrics["finetune_size"] == 40


@pytest.mark.parametrize("field", ["clip_norm", "l2", "tolerance"])
@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf])
def test_bad_spec_values_raise_naming_field(field, value):
    good = {"clip_norm": 1.0, "l2": 0.1, "tolerance": 1e-6}
    with pytest.raises(ValueError, match=f"{field} .*{value!r}"):
        CertifiedSpec(**{**good, field: value})
    with pytest.raises(ValueError, match=field):
        CertifiedSpec.from_config({**good, field: value})


def test_bad_max_iter_and_missing_field_raise_naming_field():
    with pytest.raises(ValueError, match="max_iter"):
        CertifiedSpec(clip_norm=1.0, l2=0.1, max_iter=0)
    with pytest.raises(ValueError, match="l2"):
        CertifiedSpec.from_config({"clip_norm": 1.0})


N_DRAWS, DIM = 5000, 20


@pytest.fixture(scope="module")
def gamma_noise():
    z = standard_noise("l2_gamma", (N_DRAWS, DIM), torch.Generator().manual_seed(1234)).numpy()
    norms = np.linalg.norm(z, axis=1)
    return z / norms[:, None], norms


def test_gamma_noise_norms_follow_gamma_p(gamma_noise):
    _, norms = gamma_noise
    assert stats.kstest(norms, stats.gamma(a=DIM).cdf).pvalue > 1e-3
    assert stats.kstest(norms, stats.gamma(a=DIM + 3).cdf).pvalue < 1e-6  # the check can fail
    assert stats.kstest(norms, stats.gamma(a=DIM - 1).cdf).pvalue < 1e-3


def test_gamma_noise_direction_uniform(gamma_noise):
    directions, _ = gamma_noise
    beta = stats.beta((DIM - 1) / 2, (DIM - 1) / 2)
    assert stats.kstest((directions[:, 0] + 1) / 2, beta.cdf).pvalue > 1e-3
    assert stats.kstest((directions[:, -1] + 1) / 2, beta.cdf).pvalue > 1e-3
    # The check can fail: a direction with a doubled first coordinate is not uniform.
    skewed = directions * np.r_[2.0, np.ones(DIM - 1)]
    skewed /= np.linalg.norm(skewed, axis=1, keepdims=True)
    assert stats.kstest((skewed[:, 0] + 1) / 2, beta.cdf).pvalue < 1e-6
    # Mean direction: each coordinate has variance 1/p, so N·‖mean‖² ≈ 1 in expectation.
    assert np.linalg.norm(directions.mean(0)) < 3 / math.sqrt(N_DRAWS)


def test_gamma_noise_direction_independent_of_norm(gamma_noise):
    directions, norms = gamma_noise
    standard_error = 1 / math.sqrt(N_DRAWS)
    for coordinate in (0, DIM // 2):
        assert abs(np.corrcoef(np.abs(directions[:, coordinate]), norms)[0, 1]) < 4 * standard_error
    # Same |u₁| law among the short and the long vectors.
    short = norms < np.median(norms)
    assert stats.ks_2samp(np.abs(directions[short, 0]), np.abs(directions[~short, 0])).pvalue > 1e-3


def test_gamma_noise_seeded_draws_reproduce():
    def draw(seed):
        return standard_noise("l2_gamma", (50, DIM), torch.Generator().manual_seed(seed))
    assert torch.equal(draw(42), draw(42))
    assert not torch.allclose(draw(42), draw(43))
