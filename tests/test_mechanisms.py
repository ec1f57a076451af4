"""Noise mechanisms: calibration formulas, budget checks, noise distributions, and the two
privacy-loss facts the calibrations rest on (logistic bound, analytic Gaussian equation)."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from privssl.release.calibration import analytic_gaussian_sigma, check_budget
from privssl.release.mechanisms import NOISE_FAMILIES, logistic_log_density, standard_noise
from privssl.release.protection import calibrate

N_SAMPLES = 20_000
REFERENCE = {"logistic": stats.logistic, "laplace": stats.laplace, "gaussian": stats.norm}
SENSITIVITY = {"sampling": "certified", "delta1": 0.37, "delta2": 0.052}


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 8.0])
def test_calibrate_formulas(eps):
    delta = 1e-5
    alm, laplace, gauss, pure = (calibrate(m, eps, delta, SENSITIVITY)
                                 for m in ("alm", "laplace", "gaussian", "certified_pure"))
    assert alm.noise_scale == pytest.approx(0.37 / eps, rel=1e-15)
    assert laplace.noise_scale == pytest.approx(0.37 / eps, rel=1e-15)
    assert gauss.noise_scale == pytest.approx(0.052 * math.sqrt(2 * math.log(1.25 / 1e-5)) / eps, rel=1e-12)
    assert pure.noise_scale == pytest.approx(0.052 / eps, rel=1e-15)  # θ of the Gamma(p, θ) norm
    assert (alm.sensitivity_norm, laplace.sensitivity_norm, gauss.sensitivity_norm) == ("l1", "l1", "l2")
    assert alm.delta == 0 and laplace.delta == 0 and gauss.delta == delta and pure.delta == 0
    assert (gauss.guarantee_kind == "none") == (eps >= 1)
    assert ("only for ε < 1" in gauss.guarantee) == (eps >= 1)


@pytest.mark.parametrize("eps", [0.0, -1.0, math.inf, math.nan])
def test_bad_eps_rejected_naming_value(eps):
    for call in (lambda: calibrate("alm", eps, 1e-5, SENSITIVITY), lambda: check_budget(eps)):
        with pytest.raises(ValueError, match=f"got {eps!r}"):
            call()


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, 2.0])
def test_bad_delta_rejected_naming_value(delta):
    with pytest.raises(ValueError, match=f"got {delta!r}"):
        calibrate("gaussian_analytic", 0.5, delta, SENSITIVITY)
    with pytest.raises(ValueError, match=f"got {delta!r}"):
        check_budget(1.0, delta)


def test_unknown_method_or_family_rejected_naming_value():
    with pytest.raises(ValueError, match="'cauchy'"):
        calibrate("cauchy", 1.0, 1e-5, SENSITIVITY)
    with pytest.raises(ValueError, match="'cauchy'"):
        standard_noise("cauchy", (3,), torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="'dpsgd'"):  # a registered method that adds no noise to a trained head
        calibrate("dpsgd", 1.0, 1e-5, SENSITIVITY)


@pytest.mark.parametrize("family", sorted(REFERENCE))
def test_standard_noise_distribution(family):
    noise = standard_noise(family, (N_SAMPLES,), torch.Generator().manual_seed(11)).numpy()
    assert stats.kstest(noise, REFERENCE[family].cdf).pvalue > 1e-3
    scale = 3.7
    assert stats.kstest(noise * scale, REFERENCE[family](scale=scale).cdf).pvalue > 1e-3
    # The test can fail: the wrong family is rejected at this sample size.
    wrong = stats.norm if family != "gaussian" else stats.laplace
    assert stats.kstest(noise, wrong(scale=REFERENCE[family].std()).cdf).pvalue < 1e-3


@pytest.mark.parametrize("family", NOISE_FAMILIES)
def test_standard_noise_seeded(family):
    a = standard_noise(family, (4, 5), torch.Generator().manual_seed(3))
    b = standard_noise(family, (4, 5), torch.Generator().manual_seed(3))
    c = standard_noise(family, (4, 5), torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_logistic_noise_finite_when_rand_returns_zero(monkeypatch, dtype):
    monkeypatch.setattr(torch, "rand", lambda shape, generator=None, dtype=None: torch.zeros(shape, dtype=dtype))
    noise = standard_noise("logistic", (100,), torch.Generator().manual_seed(0), dtype=dtype)
    assert torch.isfinite(noise).all()


def test_logistic_log_density_matches_scipy():
    x = np.linspace(-50, 50, 2001)
    for s in (0.01, 0.3, 1.0, 7.0):
        np.testing.assert_allclose(logistic_log_density(x, s), stats.logistic.logpdf(x, scale=s), rtol=1e-12)


@pytest.mark.parametrize("s", [0.05, 0.5, 2.0])
@pytest.mark.parametrize("delta", [0.01, 0.3, 1.0, 5.0])
def test_logistic_privacy_loss_bounded_by_delta_over_s(s, delta):
    x = np.linspace(-1000 * s, 1000 * s, 200_001)
    loss = np.abs(logistic_log_density(x, s) - logistic_log_density(x + delta, s))
    # 1e-9: rounding of the difference of two log densities of size ~1000
    assert loss.max() <= delta / s + 1e-9
    # tight: far in the tails the loss approaches Δ/s
    assert loss.max() >= delta / s - 1e-9


EPS_DELTA = [(1.0, 0.1, 1e-5), (1.0, 1.0, 1e-5), (1.0, 10.0, 1e-5), (0.3, 0.5, 1e-3), (4.0, 2.0, 1e-6)]


@pytest.mark.parametrize("l2, eps, delta", EPS_DELTA)
def test_analytic_gaussian_solves_defining_equation(l2, eps, delta):
    sigma = analytic_gaussian_sigma(l2, eps, delta)
    a, b = l2 / (2 * sigma), eps * sigma / l2
    achieved = stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b)
    assert achieved == pytest.approx(delta, rel=1e-6)


@pytest.mark.parametrize("eps", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("delta", [1e-3, 1e-5])
def test_analytic_gaussian_below_classical(eps, delta):
    classical = math.sqrt(2 * math.log(1.25 / delta)) / eps
    assert analytic_gaussian_sigma(1.0, eps, delta) < classical


def test_analytic_gaussian_decreasing_in_eps_and_linear_in_delta2():
    sigmas = [analytic_gaussian_sigma(1.0, eps, 1e-5) for eps in (0.05, 0.1, 0.5, 1, 2, 5, 10, 20)]
    assert all(a > b for a, b in zip(sigmas, sigmas[1:]))
    for eps in (0.1, 1.0, 10.0):
        base = analytic_gaussian_sigma(1.0, eps, 1e-5)
        for l2 in (1e-3, 0.25, 40.0):
            assert analytic_gaussian_sigma(l2, eps, 1e-5) == pytest.approx(l2 * base, rel=1e-9)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, None, "2"])
def test_bad_sensitivity_record_rejected_naming_the_key(bad):
    with pytest.raises(ValueError, match=f"delta1 = {bad!r}"):
        calibrate("alm", 1.0, 1e-5, {**SENSITIVITY, "delta1": bad})
