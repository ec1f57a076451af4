"""The crafted-pair audits of the certified heads (privssl.audit.crafted_pair): the pair against an
independent solver and the proof's bound, the test statistic against its closed form, the
Gaussian-DP conversion against the release's own calibration, and the whole audit against planted
bugs: a sensitivity record that claims half (Gaussian) or a tenth (Gamma-norm) of the proven Δ2
must be caught; the true one must not be, and must come close to what the pair can show."""

import math

import numpy as np
import pytest
import torch
from scipy import optimize, special

from privssl.artefacts.audits import crafted_pair_audit_rows as crafted_pair_audit
from privssl.audit.crafted_pair import (
    CraftedPair,
    PairDesign,
    audit_certified,
    craft_pair,
    design_sets,
    likelihood_ratio,
    pair_designs,
)
from privssl.audit.gradient_canary import ClaimViolated, check_below_claim
from privssl.release.certified import CertifiedSpec, certified_sensitivity
from privssl.release.mechanisms import Gaussian, L2Gamma, Laplace
from privssl.release.protection import head_inputs

DELTA = 1e-5
N, WIDTH, CLASSES = 500, 8, 3
SPEC = CertifiedSpec(clip_norm=1.0, l2=0.01)


@pytest.fixture(scope="module")
def pair():
    return craft_pair(N, WIDTH, CLASSES, SPEC)


def record(factor=1.0):
    """The certified sensitivity record of the pair's sets, its Δ2 scaled by `factor` (a planted bug)."""
    rec = certified_sensitivity(N, CLASSES, SPEC)
    return rec | {"delta2": rec["delta2"] * factor}


def test_design_sets_are_a_substitution_of_one_record_at_the_clip_norm():
    (x, y), (x2, y2) = design_sets(PairDesign(0, 1, 2), 6, 4, 1.5)
    assert x.shape == x2.shape == (6, 4) and y.shape == y2.shape == (6,)
    assert torch.equal(x[:-1], x2[:-1]) and torch.equal(y[:-1], y2[:-1])  # n − 1 records shared
    assert not torch.equal(x[-1], x2[-1]) and (y[-1], y2[-1]) == (1, 2)
    # the substituted records lie on the clip sphere: the head sees them unchanged, at the largest norm
    for row in (x[-1:], x2[-1:]):
        assert torch.equal(head_inputs(row, 1.5), row) and float(row.norm()) == pytest.approx(1.5)
    assert torch.equal(x[-1], -x2[-1]) and not x[:-1].any() and (y[:-1] == 0).all()


def _exact_minimiser(x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """argmin of J(W̃) = mean CE + (λ/2)‖W̃‖² by scipy's L-BFGS on x̃ = [clip(x), 1]: an independent solver."""
    xt = np.hstack([head_inputs(x, SPEC.clip_norm).numpy(), np.ones((len(y), 1))])
    onehot = np.eye(CLASSES)[y.numpy()]

    def objective(w):
        weights = w.reshape(xt.shape[1], CLASSES)
        logits = xt @ weights
        loss = np.mean(special.logsumexp(logits, axis=1) - (logits * onehot).sum(1)) + SPEC.l2 / 2 * w @ w
        grad = xt.T @ (special.softmax(logits, axis=1) - onehot) / len(y) + SPEC.l2 * weights
        return loss, grad.ravel()

    fit = optimize.minimize(objective, np.zeros(xt.shape[1] * CLASSES), jac=True, method="L-BFGS-B",
                            options={"gtol": 1e-13, "ftol": 1e-15, "maxiter": 10_000})
    return fit.x


def test_the_pair_is_the_farthest_design_by_an_independent_solver_and_within_the_proof(pair):
    distances = {}
    for design in pair_designs(CLASSES):
        (x, y), (x2, y2) = design_sets(design, N, WIDTH, SPEC.clip_norm)
        distances[design.name] = float(np.linalg.norm(_exact_minimiser(x, y) - _exact_minimiser(x2, y2)))
    assert pair.design == max(distances, key=distances.get)
    assert pair.distance == pytest.approx(distances[pair.design], rel=1e-5)
    assert pair.sensitivity == certified_sensitivity(N, CLASSES, SPEC)["delta2"]
    # below the proven Δ2, and near the R/√(R² + 1) = 0.71 the shared constant coordinate allows
    assert 0.62 < pair.fraction < 1 / math.sqrt(2)


def test_at_a_small_clip_norm_the_pair_changes_the_label_too():
    """Where R is small the bias carries most of the move, and a substituted record with another
    label moves it further than one with the same label can: beyond R/√(R² + 1) = 0.29 at R = 0.3."""
    assert [d.other_label for d in pair_designs(CLASSES)] == [1, 2] and len(pair_designs(2)) == 1
    small = craft_pair(N, WIDTH, CLASSES, CertifiedSpec(clip_norm=0.3, l2=0.01))
    assert small.design == PairDesign(0, 1, 2).name and small.fraction > 0.3 / math.sqrt(0.3 ** 2 + 1)


def test_the_crafted_pair_moves_the_head_further_than_a_substitution_of_labels(pair):
    """The naive worst case, one point relabelled, moves the head about half as far."""
    relabelled = PairDesign(0, 1, 0)
    (x, y), (x2, _) = design_sets(relabelled, N, WIDTH, SPEC.clip_norm)
    y2 = y.clone()
    y2[-1] = 2
    naive = float(np.linalg.norm(_exact_minimiser(x, y) - _exact_minimiser(x, y2)))
    assert pair.distance > 1.5 * naive


def test_the_likelihood_ratio_is_each_density_in_closed_form(pair):
    rng = np.random.default_rng(0)
    releases = pair.first + torch.tensor(rng.normal(size=(5, pair.first.numel())))
    first, second = pair.first.numpy(), pair.second.numpy()
    o = releases.numpy()
    sigma, theta = 0.7, 0.3
    # Gaussian: linear in o, ⟨o − (W + W')/2, W' − W⟩ / σ²
    gaussian = (o - (first + second) / 2) @ (second - first) / sigma ** 2
    np.testing.assert_allclose(likelihood_ratio(releases, pair, Gaussian(None), sigma).numpy(), gaussian, rtol=1e-9)
    # density ∝ exp(−‖b‖/θ): (‖o − W‖ − ‖o − W'‖) / θ
    gamma = (np.linalg.norm(o - first, axis=1) - np.linalg.norm(o - second, axis=1)) / theta
    np.testing.assert_allclose(likelihood_ratio(releases, pair, L2Gamma(None), theta).numpy(), gamma, rtol=1e-9)
    # Laplace, density ∝ exp(−‖b‖₁/b): (‖o − W‖₁ − ‖o − W'‖₁) / b
    laplace = (np.abs(o - first).sum(1) - np.abs(o - second).sum(1)) / theta
    np.testing.assert_allclose(likelihood_ratio(releases, pair, Laplace(None), theta).numpy(), laplace, rtol=1e-9)


def test_a_pair_at_the_proven_sensitivity_has_the_claimed_epsilon():
    """The analytic Gaussian is μ-GDP with μ = Δ2/σ: on a pair exactly Δ2 apart, the ε the audit
    reports for the pair is the release's claim (two independent computations: the calibration's
    and the GDP tradeoff's)."""
    rec = record()
    first = torch.zeros((WIDTH + 1) * CLASSES, dtype=torch.float64)
    second = first.clone()
    second[3] = rec["delta2"]
    at_bound = CraftedPair("Δ2 apart", first, second, rec["delta2"], rec["delta2"])
    for eps in (1.0, 10.0):
        (gdp, _) = audit_certified(at_bound, "certified_gaussian", eps, DELTA, rec, 200, seed=1)
        assert gdp["eps_of_pair"] == pytest.approx(eps, rel=1e-6)


def test_the_gdp_fit_sees_the_pair_s_shift(pair):
    rows = audit_certified(pair, "certified_gaussian", 1.0, DELTA, record(), 20_000, seed=3)
    gdp = rows[0]
    mu = pair.distance / gdp["noise_scale"]
    se = math.sqrt(2 / 20_000 + mu ** 2 / 80_000)
    assert abs(gdp["mu_hat"] - mu) < 4 * se
    assert gdp["mu_lo"] < gdp["mu_hat"] and gdp["n"] == 40_000 and gdp["runs_per_world"] == 20_000
    assert [r["audit"] for r in rows] == ["crafted_pair_gdp", "crafted_pair_test"]
    assert {r["threat_model"] for r in rows} == {"final_model"}
    assert rows[1]["eps_ceiling"] > 5  # 10,000 releases per world in the evaluation half


@pytest.mark.parametrize("method, factor", [("certified_gaussian", 0.5), ("certified_pure", 0.1)])
def test_a_planted_unsound_sensitivity_is_caught_and_the_sound_one_is_not(pair, method, factor):
    """A record claiming `factor` × the proven Δ2 (the substitution's factor 2 dropped, or worse)
    calibrates too little noise; the audit must prove more ε than the claim. With the true Δ2 no
    alarm, and the Gaussian's bound within 15 % of what the pair can show."""
    sound = audit_certified(pair, method, 1.0, DELTA, record(), 20_000, seed=5)
    check_below_claim(sound)
    assert {r["delta"] for r in sound} == {DELTA if method == "certified_gaussian" else 0.0}  # the claim's δ
    if method == "certified_gaussian":
        assert sound[0]["eps_lower_bound"] > 0.85 * sound[0]["eps_of_pair"] > 0.55
    unsound = audit_certified(pair, method, 1.0, DELTA, record(factor), 20_000, seed=5)
    with pytest.raises(ClaimViolated, match=f"{method} at ε = 1"):
        check_below_claim(unsound)


def test_only_the_certified_releases_are_audited(pair):
    with pytest.raises(ValueError, match="certified heads, not 'gaussian_analytic'"):
        audit_certified(pair, "gaussian_analytic", 1.0, DELTA, record(), 100)
    with pytest.raises(ValueError, match="at least 2 releases"):
        audit_certified(pair, "certified_gaussian", 1.0, DELTA, record(), 1)


def test_the_grid_has_the_gdp_fit_for_gaussian_noise_only():
    config = {"protect": {"mechanisms": ["alm", "certified_pure", "certified_gaussian", "dpsgd"]},
              "audit": {"canary": {"eps": [1, 10]}}}
    blocks = {b["method"][0]: b for b in crafted_pair_audit(config, "digits")}
    assert set(blocks) == {"certified_pure", "certified_gaussian"}
    assert blocks["certified_gaussian"]["audit"] == ["crafted_pair_gdp", "crafted_pair_test"]
    assert blocks["certified_pure"]["audit"] == ["crafted_pair_test"] and blocks["certified_pure"]["eps"] == [1, 10]
    assert crafted_pair_audit({"protect": {"mechanisms": ["alm"]}, "audit": {"canary": {"eps": [1]}}}, "d") == []
