"""Certified output perturbation (Chaudhuri, Monteleoni & Sarwate 2011): the proven Δ2 bounds
the distance of heads trained on neighbouring sets, the solver finds the regularised minimiser
(checked against scikit-learn, a tight L-BFGS and torch autograd) after a fixed, data-independent
number of accelerated gradient steps whose sufficiency rests on the smoothness β (checked against
the numeric Hessian) and Nesterov's rate (checked on every iterate), unreasonable specs are
refused up front, a head above the tolerance releases nothing, the rule script's files, and the
Gamma-norm noise the ε-DP release adds."""

import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats
from scipy.optimize import minimize
from scipy.special import log_softmax
from sklearn.linear_model import LogisticRegression
from warm_scripts import script_python

from privssl.release.certified import (
    MAX_ITERATIONS,
    CertifiedSpec,
    ConvergenceError,
    accelerated_gradient,
    certified_sensitivity,
    fit_certified_head,
    train_certified_head,
)
from privssl.release.mechanisms import L2Gamma
from privssl.release.protection import head_inputs
from privssl.training.heads import flatten, head_logits

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "certified_head.py"
RECORD_KEYS = {"sampling", "sensitivity_kind", "delta2", "delta1", "lipschitz", "clip_norm", "l2", "tolerance",
               "beta", "iterations", "finetune_size", "adjacency", "statement"}


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
    unclipped = CertifiedSpec(clip_norm=100.0, l2=1.0, tolerance=1e-6)  # rows of norm ~4.5 stay as they are
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


def beta(spec):
    """β = (R² + 1)/2 + λ, written out independently of the module."""
    return (spec.clip_norm ** 2 + 1) / 2 + spec.l2


def objective(w, x, onehot, l2):
    """J and ∇J on W̃ flattened (F + 1, C), numpy, independent of the module's solver."""
    weights = w.reshape(x.shape[1], onehot.shape[1])
    log_p = log_softmax(x @ weights, axis=1)
    value = -(onehot * log_p).sum() / len(x) + 0.5 * l2 * (w @ w)
    return value, (x.T @ (np.exp(log_p) - onehot) / len(x) + l2 * weights).ravel()


def reference_minimiser(x, y, n_classes, spec):
    """W̃* by scipy L-BFGS to a gradient norm far below g, with its gradient norm."""
    xa, onehot = clipped_augmented(x, spec.clip_norm).numpy(), np.eye(n_classes)[y.numpy()]
    result = minimize(objective, np.zeros(xa.shape[1] * n_classes), args=(xa, onehot, spec.l2), jac=True,
                      method="L-BFGS-B", options={"maxiter": 100_000, "maxfun": 200_000, "ftol": 0.0,
                                                  "gtol": 1e-13, "maxcor": 30})
    return result.x, float(np.linalg.norm(objective(result.x, xa, onehot, spec.l2)[1]))


def adversarial_sets(generator, n=40, n_features=5, n_classes=3, clip_norm=1.0):
    """Data sets a data-dependent stopping rule might stall on, and a random one."""
    x, y = synthetic(n, generator, n_features, n_classes)
    at_clip = x / x.norm(dim=1, keepdim=True) * clip_norm  # every row exactly at the clip norm
    separable = at_clip.clone()
    separable[:, 0] = torch.where(y == 0, 1.0, -1.0) * clip_norm  # class 0 apart from the others
    return {
        "random": (x, y),
        "all labels one class": (x, torch.zeros(n, dtype=torch.long)),
        "duplicated rows": (x[:1].repeat(n, 1), y),
        "duplicated rows, one class": (x[:1].repeat(n, 1) * 50, torch.full((n,), 2)),
        "features at the clip norm": (at_clip, y),
        "separable at the clip norm": (separable, (y == 0).long()),
        "n = 1": (x[:1], y[:1]),
        "zero features": (torch.zeros(n, n_features, dtype=torch.float64), y),
    }


SPECS = [CertifiedSpec(clip_norm=1.0, l2=0.01, tolerance=1e-6), CertifiedSpec(clip_norm=2.0, l2=1e-4, tolerance=1e-6),
         CertifiedSpec(clip_norm=0.5, l2=0.3, tolerance=1e-3)]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"R{s.clip_norm:g}-l{s.l2:g}-g{s.tolerance:g}")
def test_released_point_within_g_over_lambda_of_a_tight_solver_on_adversarial_sets(spec):
    generator = torch.Generator().manual_seed(17)
    for name, (x, y) in adversarial_sets(generator, clip_norm=spec.clip_norm).items():
        fit = fit_certified_head(x, y, 3, spec)
        assert fit.gradient_norm <= spec.tolerance, name
        assert fit.iterations == spec.iterations(3), name
        reference, reference_gradient = reference_minimiser(x, y, 3, spec)
        assert reference_gradient <= spec.tolerance / 100, name  # much tighter than the solver under test
        ours = torch.cat([fit.params["weight"][0], fit.params["bias"]], dim=0).numpy().ravel()
        # ‖W − W*‖ ≤ ‖∇J(W)‖/λ ≤ g/λ, and the reference is within its own ‖∇J‖/λ of W*.
        distance = np.linalg.norm(ours - reference)
        assert distance <= (spec.tolerance + reference_gradient) / spec.l2, name
        assert distance <= (fit.gradient_norm + reference_gradient) / spec.l2 * (1 + 1e-6) + 1e-12, name


def test_iteration_count_depends_only_on_the_spec_and_classes():
    spec = CertifiedSpec(clip_norm=1.0, l2=0.01, tolerance=1e-6)
    generator = torch.Generator().manual_seed(23)
    easy_x, easy_y = torch.zeros(30, 4, dtype=torch.float64), torch.zeros(30, dtype=torch.long)  # J* at once
    hard_x, hard_y = synthetic(30, generator, n_features=4, n_classes=4, scale=10.0)
    counts = {fit_certified_head(x, y, 4, spec).iterations for x, y in ((easy_x, easy_y), (hard_x, hard_y))}
    assert counts == {spec.iterations(4)}
    assert spec.iterations(4) == 274  # smallest k with 2β(1 − √(λ/β))^k ln 4 ≤ g², β = 1.01
    # The count is the smallest one the bound allows: k − 1 steps would not be proven enough.
    rate = 1 - math.sqrt(spec.l2 / beta(spec))
    phi = min(2 * (spec.clip_norm ** 2 + 1) / spec.l2, math.log(4))
    for k, enough in ((spec.iterations(4), True), (spec.iterations(4) - 1, False)):
        assert (2 * beta(spec) * rate ** k * phi <= spec.tolerance ** 2) is enough
    # Without C the bound uses Φ0 ≤ L²/λ: at least the count for every C.
    assert spec.iterations() >= max(spec.iterations(c) for c in (2, 10, 1000))


def j_hessian(x, y, n_classes, l2, weights):
    """The (P, P) Hessian of J at W̃ by autograd, P = (F + 1)·C."""
    def j(w):
        return F.cross_entropy(x @ w.reshape(x.shape[1], n_classes), y) + 0.5 * l2 * w.pow(2).sum()
    return torch.autograd.functional.hessian(j, weights.reshape(-1))


def test_smoothness_beta_bounds_the_numeric_hessian():
    generator = torch.Generator().manual_seed(29)
    for clip_norm, l2, n_classes in ((1.0, 0.01, 3), (2.0, 0.1, 2), (0.5, 1e-4, 5)):
        spec = CertifiedSpec(clip_norm=clip_norm, l2=l2)
        assert spec.smoothness == pytest.approx(beta(spec), rel=1e-15)
        largest = []
        for trial in range(20):
            x, y = synthetic(int(torch.randint(1, 30, (1,), generator=generator)), generator, 4, n_classes)
            if trial % 4 == 0:
                x = x[:1].repeat(len(x), 1)  # identical rows: the data term's Hessian is rank-deficient
            xa = clipped_augmented(x, clip_norm)
            weights = torch.randn(xa.shape[1], n_classes, generator=generator, dtype=torch.float64) * (trial % 3)
            eigenvalues = torch.linalg.eigvalsh(j_hessian(xa, y, n_classes, l2, weights))
            assert eigenvalues.min().item() >= l2 * (1 - 1e-9)  # λ-strongly convex
            largest.append(eigenvalues.max().item())
        assert max(largest) <= beta(spec) * (1 + 1e-12)
    # The bound is attained: two classes, every row the same at the clip norm, W̃ = 0 (p = ½, ½).
    spec = CertifiedSpec(clip_norm=1.5, l2=0.01)
    x = torch.zeros(7, 3, dtype=torch.float64)
    x[:, 0] = spec.clip_norm
    hessian = j_hessian(clipped_augmented(x, spec.clip_norm), torch.zeros(7, dtype=torch.long), 2, spec.l2,
                        torch.zeros(4, 2, dtype=torch.float64))
    assert torch.linalg.eigvalsh(hessian).max().item() == pytest.approx(beta(spec), rel=1e-12)


def test_nesterov_rate_holds_on_every_iterate_of_j():
    """J(W_k) − J* ≤ (1 − √(λ/β))^k Φ0 with Φ0 = J(0) − J* + (λ/2)‖W*‖² ≤ min(L²/λ, ln C)."""
    generator = torch.Generator().manual_seed(31)
    spec = CertifiedSpec(clip_norm=2.0, l2=1e-3, tolerance=1e-6)
    for name, (x, y) in adversarial_sets(generator, n_classes=4, clip_norm=spec.clip_norm).items():
        xa, onehot = clipped_augmented(x, spec.clip_norm).numpy(), np.eye(4)[y.numpy()]
        reference, reference_gradient = reference_minimiser(x, y, 4, spec)
        # J* from the reference, lowered by its own suboptimality bound ‖∇J‖²/(2λ)
        optimum = objective(reference, xa, onehot, spec.l2)[0] - reference_gradient ** 2 / (2 * spec.l2)
        potential = objective(np.zeros_like(reference), xa, onehot, spec.l2)[0] - optimum \
            + 0.5 * spec.l2 * (reference @ reference)
        lipschitz_squared = 2 * (spec.clip_norm ** 2 + 1)
        assert potential <= min(lipschitz_squared / spec.l2, math.log(4)) + 1e-12, name
        rate = 1 - math.sqrt(spec.l2 / beta(spec))
        gaps = []

        def gradient(w_t):  # the solver's layout: W̃ᵀ, (C, F + 1)
            return objective(w_t.T.ravel(), xa, onehot, spec.l2)[1].reshape(xa.shape[1], 4).T

        accelerated_gradient(gradient, np.zeros((4, xa.shape[1])), beta(spec), spec.l2, 400,
                             callback=lambda k, w_t: gaps.append((k, objective(w_t.T.ravel(), xa, onehot, spec.l2)[0])))
        assert [k for k, _ in gaps] == list(range(1, 401))
        for k, value in gaps:
            assert value - optimum <= rate ** k * potential + 1e-13, (name, k)


def test_nesterov_rate_holds_on_ill_conditioned_quadratics():
    """f(x) = ½ xᵀAx, spectrum in [μ, L] (endpoints included): f(x_k) ≤ (1 − √(μ/L))^k (f(x_0) + μ/2‖x_0‖²)."""
    rng = np.random.default_rng(37)
    for mu, smooth in ((1e-4, 1.0), (1e-2, 3.0), (0.5, 1.0)):
        for _ in range(5):
            basis = np.linalg.qr(rng.standard_normal((30, 30)))[0]
            spectrum = np.r_[mu, smooth, np.exp(rng.uniform(math.log(mu), math.log(smooth), 28))]
            matrix = basis @ np.diag(spectrum) @ basis.T
            start = rng.standard_normal(30)
            potential = 0.5 * start @ matrix @ start + 0.5 * mu * start @ start
            rate, values = 1 - math.sqrt(mu / smooth), []
            accelerated_gradient(lambda v: matrix @ v, start, smooth, mu, 3000,
                                 callback=lambda k, v: values.append(0.5 * v @ matrix @ v))
            bounds = rate ** np.arange(1, 3001) * potential
            assert np.all(np.array(values) <= bounds + 1e-14)


def test_unreasonable_spec_refused_before_any_work_naming_values():
    with pytest.raises(ValueError, match=rf"l2 λ = 1e-09.*needs up to \d+ solver iterations.*{MAX_ITERATIONS}"):
        CertifiedSpec(clip_norm=1.0, l2=1e-9, tolerance=1e-3)
    with pytest.raises(ValueError, match=r"tolerance g = 1e-300.*float64 cannot certify"):
        CertifiedSpec(clip_norm=1.0, l2=0.1, tolerance=1e-300)
    with pytest.raises(ValueError, match="clip_norm R = 1e\\+06"):
        CertifiedSpec(clip_norm=1e6, l2=1.0)
    # the configuration keys: an iteration cap is no setting any more
    with pytest.raises(ValueError, match="unknown field.*max_iter"):
        CertifiedSpec.from_config({"clip_norm": 1.0, "l2": 0.1, "tolerance": 1e-6, "max_iter": 1000})
    with pytest.raises(ValueError, match="l2"):
        CertifiedSpec.from_config({"clip_norm": 1.0})
    assert CertifiedSpec.from_config({"clip_norm": 1.0, "l2": 0.1}) == CertifiedSpec(1.0, 0.1, 1e-6)


def test_bad_fit_inputs_raise_before_any_work():
    x, y = synthetic(10, torch.Generator().manual_seed(41))
    spec = CertifiedSpec(clip_norm=1.0, l2=0.1)
    with pytest.raises(ValueError, match="labels in"):
        fit_certified_head(x, y, 2, spec)  # a label 2 with two classes
    with pytest.raises(ValueError, match="labels in"):
        fit_certified_head(x, -y, 3, spec)
    with pytest.raises(ValueError, match="finite"):
        fit_certified_head(x.clone().fill_(math.nan), y, 3, spec)
    with pytest.raises(ValueError, match="n ≥ 1"):
        fit_certified_head(x[:0], y[:0], 3, spec)


def test_a_point_above_the_tolerance_is_not_released(monkeypatch):
    """The theorem excludes it; were round-off to push the computed norm above g, nothing is released."""
    monkeypatch.setattr(CertifiedSpec, "iterations", lambda self, n_classes=None: 1)
    x, y = synthetic(40, torch.Generator().manual_seed(3))
    with pytest.raises(ConvergenceError, match=r"gradient norm .* tolerance g = 1e-06 after the 1 iterations"):
        train_certified_head(x, y, 3, CertifiedSpec(clip_norm=1.0, l2=0.1))


def save_features(path, generator, n=40, n_test=25, n_features=5):
    x, y = synthetic(n, generator, n_features=n_features)
    test_x, test_y = synthetic(n_test, generator, n_features=n_features)
    torch.save({"finetune": x.float(), "finetune_labels": y, "test": test_x.float(), "test_labels": test_y,
                "n_classes": 3}, path)
    return path


def run_script(tmp_path, certified, iterations=None):
    """The rule script in a child process; `iterations`: force the solver's step count (a stand-in
    for round-off, the only way its released point can miss the tolerance)."""
    outputs = {name: tmp_path / f"{name}.{ext}" for name, ext in
               (("head", "pt"), ("sensitivity", "json"), ("metrics", "json"))}
    python = script_python()  # first: its server's socket goes into os.environ (a `-c` launcher runs fresh)
    launcher = [str(SCRIPT)] if iterations is None else [
        "-c", "import runpy, sys; from privssl.release.certified import CertifiedSpec; "
              f"CertifiedSpec.iterations = lambda self, n_classes=None: {iterations}; "
              "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')", str(SCRIPT)]
    command = [python, *launcher, "--features", str(tmp_path / "features.pt"),
               "--certified", json.dumps(certified), "--out-head", str(outputs["head"]),
               "--out-sensitivity", str(outputs["sensitivity"]), "--out-metrics", str(outputs["metrics"]),
               "--threads", "1", "--device", "cpu"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120), outputs


def test_script_head_above_tolerance_exits_nonzero_writing_nothing(tmp_path):
    save_features(tmp_path / "features.pt", torch.Generator().manual_seed(5))
    result, outputs = run_script(tmp_path, {"clip_norm": 1.0, "l2": 0.1}, iterations=1)
    assert result.returncode != 0
    assert "tolerance" in result.stderr and "round-off" in result.stderr
    assert not any(path.exists() for path in outputs.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["features.pt"]  # no temporary files either


@pytest.mark.parametrize("certified, named", [({"clip_norm": 1.0, "l2": -0.5}, ["l2", "-0.5"]),
                                               ({"clip_norm": 1.0, "l2": 0.1, "max_iter": 10}, ["max_iter"]),
                                               ({"clip_norm": 1.0, "l2": 1e-9, "tolerance": 1e-3}, ["1e-09", "limit"])])
def test_script_rejects_bad_spec_naming_field(tmp_path, certified, named):
    save_features(tmp_path / "features.pt", torch.Generator().manual_seed(5))
    result, outputs = run_script(tmp_path, certified)
    assert result.returncode == 2 and all(word in result.stderr for word in named), result.stderr
    assert not any(path.exists() for path in outputs.values())


def test_script_writes_head_sensitivity_metrics_reproducing_accuracy(tmp_path):
    features = torch.load(save_features(tmp_path / "features.pt", torch.Generator().manual_seed(9)))
    certified = {"clip_norm": 1.0, "l2": 0.05, "tolerance": 1e-6}
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
    assert record["beta"] == pytest.approx(1.05, rel=1e-15) and record["n_classes"] == 3
    assert record["iterations"] == metrics["iterations"] == CertifiedSpec(**certified).iterations(3)

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


N_DRAWS, DIM = 5000, 20


@pytest.fixture(scope="module")
def gamma_noise():
    z = L2Gamma(None).sample((N_DRAWS, DIM), torch.Generator().manual_seed(1234)).numpy()
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
        return L2Gamma(None).sample((50, DIM), torch.Generator().manual_seed(seed))
    assert torch.equal(draw(42), draw(42))
    assert not torch.allclose(draw(42), draw(43))
