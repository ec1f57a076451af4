"""The gradient-canary audits of the DP-SGD head (privssl.audit.gradient_canary): each piece against
an independent computation (the momentum inverted by hand, the χ² bound, μ-GDP's δ(ε), a
Gaussian shift of known μ), and the whole audit against a planted bug: the head trained at half
the calibrated σ must be caught, at the calibrated σ it must not be, and must come close."""

import logging
import math

import numpy as np
import pytest
import torch
from scipy import stats

from privssl.accounting.dpsgd import accountant_epsilon, noise_multiplier
from privssl.audit.gradient_canary import (
    WHITE_BOX_CONFIDENCE,
    ClaimViolated,
    audit_dpsgd,
    check_below_claim,
    final_model_gdp,
    gdp_epsilon,
    observed_sums,
    quiet_coordinate,
    subsampled_gaussian_epsilon_lower,
    white_box_fit,
    write_below_claim,
)
from privssl.release.dpsgd_batched import GradientCanary, train_dpsgd_heads
from privssl.release.dpsgd_spec import DPSGDSpec, sampling_plan
from privssl.training.heads import HeadSpec

DELTA = 1e-5


def test_observed_sums_invert_sgd_with_momentum():
    spec = DPSGDSpec(clip_norm=0.5, batch_size=10, epochs=1, lr=0.3, momentum=0.9)
    rng = np.random.default_rng(0)
    sums = rng.normal(size=(3, 12))  # the noisy gradient sums on u, in units of C
    theta, m = np.zeros((3, 13)), np.zeros(3)
    for t in range(12):  # SGD with momentum on g_t = sum_t · C / expected batch
        g = sums[:, t] * spec.clip_norm / 40
        m = g if t == 0 else spec.momentum * m + g
        theta[:, t + 1] = theta[:, t] - spec.lr * m
    np.testing.assert_allclose(observed_sums(torch.tensor(theta), spec, 40).numpy(), sums, atol=1e-10)


def test_white_box_fit_is_the_chi_square_bound_and_the_noise_free_step():
    rng = np.random.default_rng(1)
    out = rng.normal(0, 2.0, (50, 40))
    fit = white_box_fit(torch.tensor(out), torch.tensor([[0.0, 1.0, 0.0, 1.0]]), confidence=0.9)
    n = out.size
    expected = math.sqrt((n - 1) * out.var(ddof=1) / stats.chi2.ppf(0.1, n - 1))
    assert fit.sigma_hi == pytest.approx(expected) and fit.sigma_hi > fit.sigma
    assert fit.sensitivity == 1.0 and fit.n == n


@pytest.mark.parametrize("mu", [0.5, 1.0, 3.0])
def test_gdp_epsilon_solves_the_gdp_tradeoff(mu):
    eps = gdp_epsilon(mu, DELTA)
    delta_at = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    assert delta_at == pytest.approx(DELTA, rel=1e-6)
    assert gdp_epsilon(mu * 1.1, DELTA) > eps  # more separation, more ε
    assert gdp_epsilon(0.0, DELTA) == 0.0 and gdp_epsilon(-1.0, DELTA) == 0.0


def test_final_model_gdp_recovers_a_known_shift():
    rng = np.random.default_rng(2)
    out, inn = rng.normal(0, 2, 20000), rng.normal(1.6, 2, 20000)  # μ = 0.8
    row = final_model_gdp(inn, out, DELTA)
    pooled = math.sqrt((inn.var(ddof=1) + out.var(ddof=1)) / 2)
    assert row["mu_hat"] == pytest.approx((inn.mean() - out.mean()) / pooled) and abs(row["mu_hat"] - 0.8) < 0.05
    se = math.sqrt(2 / 20000 + row["mu_hat"] ** 2 / 80000)
    assert row["mu_lo"] == pytest.approx(row["mu_hat"] - stats.norm.ppf(0.95) * se)
    assert row["eps_lower_bound"] == pytest.approx(gdp_epsilon(row["mu_lo"], DELTA))


def test_the_optimistic_pld_is_below_the_accountants_epsilon_and_close():
    lower = subsampled_gaussian_epsilon_lower(1.5, 0.1, 100, DELTA)
    upper = accountant_epsilon(1.5, 0.1, 100, DELTA, "pld")
    assert upper * 0.97 < lower <= upper


def test_no_white_box_bound_without_a_clean_coordinate():
    from privssl.audit.gradient_canary import WhiteBoxFit, white_box_epsilon

    fit = WhiteBoxFit(sigma=1.0, sigma_hi=1.05, sensitivity=1.0, n=1000)
    assert white_box_epsilon(fit, 0.1, 100, DELTA) == pytest.approx(subsampled_gaussian_epsilon_lower(1.05, 0.1, 100,
                                                                                                      DELTA))
    assert white_box_epsilon(fit, 0.1, 100, DELTA, clean=False) == 0.0


def test_the_quiet_coordinate_is_a_dead_feature():
    x = torch.rand(30, 6)
    x[:, 4] = 0.0
    coordinate = quiet_coordinate(x, mlp=False)
    assert (coordinate.name, coordinate.index, coordinate.clean) == ("weight", (4, 0), True)
    x[0, 4] = 0.1
    assert not quiet_coordinate(x, mlp=True).clean and quiet_coordinate(x, mlp=True).name == "weight1"


def _data(n=60, features=5, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, features, generator=g, dtype=torch.float64)
    x[:, 2] = 0.0  # a dead unit: the canary's coordinate sees no record's gradient
    return x, torch.randint(0, classes, (n,), generator=g), classes


def test_the_canary_moves_only_its_coordinate_by_its_clipped_norm():
    x, y, classes = _data()
    spec = DPSGDSpec(clip_norm=0.7, batch_size=15, epochs=2, lr=0.2, momentum=0.5)
    head = HeadSpec(architecture="linear")
    sets = torch.arange(len(y)).expand(2, -1)
    canary = GradientCanary("weight", (2, 0), 10 * spec.clip_norm, torch.tensor([True, False]))
    params = train_dpsgd_heads(x, y, sets, classes, head, spec, torch.zeros(2), 0, canary)
    sums = observed_sums(params["canary_trace"], spec, int(len(y) * sampling_plan(len(y), spec)[0]))
    # without noise: the canary's step is C (units of C: 1) when sampled, 0 otherwise; never in the other head
    assert set(np.round(sums[0].numpy(), 6)) <= {0.0, 1.0} and sums[0].max() == pytest.approx(1.0, abs=1e-6)
    assert sums[1].abs().max() < 1e-12


@pytest.fixture(scope="module")
def calibrated():
    x, y, classes = _data()
    spec = DPSGDSpec(clip_norm=1.0, batch_size=15, epochs=10, lr=0.2, momentum=0.5)
    q, steps = sampling_plan(len(y), spec)
    return x, y, classes, spec, noise_multiplier(2.0, DELTA, q, steps, "pld").noise_multiplier


def test_the_audit_comes_close_to_a_correct_claim_and_stays_below_it(calibrated):
    x, y, classes, spec, sigma = calibrated
    rows = audit_dpsgd(x, y, classes, HeadSpec(architecture="linear"), spec, sigma, 2.0, DELTA, runs=100)
    check_below_claim([{**r, "method": "dpsgd"} for r in rows])
    white = next(r for r in rows if r["audit"] == "white_box_all_updates")
    assert white["threat_model"] == "white_box_all_updates" and white["coordinate_clean"]
    assert white["confidence"] == WHITE_BOX_CONFIDENCE and white["n"] == 100 * 40  # runs × steps without the canary
    assert white["eps_lower_bound"] > 0.85 * 2.0
    assert white["sigma_hat"] == pytest.approx(sigma, rel=0.05) and white["sensitivity"] == pytest.approx(1.0)
    # the final model: the canary pushed its coordinate down in the runs it was in, a clearly positive shift
    final = next(r for r in rows if r["audit"] == "final_model_gdp")
    assert final["threat_model"] == "final_model" and final["mu_lo"] > 0 and final["eps_lower_bound"] > 0


def test_a_planted_half_sigma_is_caught(calibrated):
    x, y, classes, spec, sigma = calibrated
    rows = audit_dpsgd(x, y, classes, HeadSpec(architecture="linear"), spec, sigma / 2, 2.0, DELTA, runs=100)
    with pytest.raises(ClaimViolated, match=r"dpsgd at ε = 2: the white_box_all_updates audit proves ε ≥"):
        check_below_claim([{**r, "method": "dpsgd"} for r in rows])


def test_any_bound_above_its_claim_stops_the_audit():
    row = {"method": "dpsgd", "claimed_eps": 1.0, "audit": "final_model_gdp"}
    check_below_claim([{**row, "eps_lower_bound": 1.0}])  # at the claim: tight, not violated
    with pytest.raises(ClaimViolated, match=r"dpsgd at ε = 1: the final_model_gdp audit proves ε ≥ 1.010"):
        check_below_claim([{**row, "eps_lower_bound": 0.5}, {**row, "eps_lower_bound": 1.01}])


def test_an_audit_above_its_claim_stops_the_script_and_writes_nothing(tmp_path):
    rows = [{"method": "dpsgd", "audit": "white_box_all_updates", "claimed_eps": 1.0, "eps_lower_bound": 0.9}]
    path = tmp_path / "ok.csv"
    write_below_claim(rows, path, logging.getLogger("test"), "audit.py")
    assert path.read_text().splitlines() == ["method,audit,claimed_eps,eps_lower_bound",
                                             "dpsgd,white_box_all_updates,1.0,0.9"]
    over = rows + [{"method": "certified_gaussian", "audit": "crafted_pair_gdp", "claimed_eps": 1.0,
                    "eps_lower_bound": 1.2}]
    with pytest.raises(SystemExit, match="audit.py: error: certified_gaussian at ε = 1: the crafted_pair_gdp audit"):
        write_below_claim(over, tmp_path / "over.csv", logging.getLogger("test"), "audit.py")
    assert not (tmp_path / "over.csv").exists()
