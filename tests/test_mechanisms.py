"""Noise mechanisms: calibration formulas, budget checks, noise distributions, and the two
privacy-loss facts the calibrations rest on (logistic bound, analytic Gaussian equation)."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from privssl.release.calibration import analytic_gaussian_sigma, check_budget
from privssl.release.mechanisms import NOISE_FAMILIES, Logistic
from privssl.release.methods import REGISTRY
from privssl.release.protection import calibrate

N_SAMPLES = 20_000
REFERENCE = {"logistic": stats.logistic, "laplace": stats.laplace, "gaussian": stats.norm}
SENSITIVITY = {"sampling": "certified", "delta1": 0.37, "delta2": 0.052}
FAMILY = {family.name: family(None) for family in NOISE_FAMILIES}  # the samplers and densities, no calibration


def standard_noise(name: str, shape: tuple[int, ...], generator: torch.Generator, dtype=None) -> torch.Tensor:
    return FAMILY[name].sample(shape, generator, dtype)


def logistic_log_density(x, scale: float) -> np.ndarray:
    """The family's log-density of each value of x as a one-coordinate release, constant restored
    (−log s, the one term a likelihood ratio at one scale drops)."""
    rows = torch.as_tensor(np.asarray(x))[:, None]
    return Logistic(None).log_density(rows, scale).numpy() - math.log(scale)


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


@pytest.mark.parametrize("family", sorted(FAMILY))
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


@pytest.mark.parametrize("method, family, other", [("alm", stats.logistic, stats.laplace),
                                                   ("laplace", stats.laplace, stats.logistic)])
def test_a_release_adds_its_own_family_at_the_calibrated_scale(method, family, other):
    """ALM releases ω + logistic noise of scale s = Δ1/ε (Theorem 4.1), the Laplace method ω +
    Laplace(Δ1/ε): the noise a release adds, over 20000 weights, passes a KS test against its own
    family at the scale computed here and fails against the other family — at the same scale and
    at the other family's scale of equal variance (so that drawing Laplace for ALM is caught)."""
    from privssl.release.protection import protected_heads

    released = torch.linspace(-3, 3, N_SAMPLES, dtype=torch.float64)
    eps_grid = [0.5, 4.0]
    noisy, _ = protected_heads(released, method, eps_grid, 1, 1e-5, SENSITIVITY, seed=21)
    for e, eps in enumerate(eps_grid):
        scale = 0.37 / eps  # Δ1 / ε
        noise = (noisy[e, 0] - released).numpy()
        assert stats.kstest(noise, family(scale=scale).cdf).pvalue > 1e-3
        assert stats.kstest(noise, other(scale=scale).cdf).pvalue < 1e-6
        same_variance = scale * family.std() / other.std()
        assert stats.kstest(noise, other(scale=same_variance).cdf).pvalue < 1e-6
        assert stats.kstest(noise, family(scale=1.1 * scale).cdf).pvalue < 1e-3  # the scale is s, not near it


def test_standard_logistic_and_laplace_noise_are_told_apart():
    """Unit logistic noise is not unit Laplace noise (nor Laplace of the same variance), and back."""
    logistic = standard_noise("logistic", (N_SAMPLES,), torch.Generator().manual_seed(12)).numpy()
    laplace = standard_noise("laplace", (N_SAMPLES,), torch.Generator().manual_seed(12)).numpy()
    assert stats.kstest(logistic, stats.laplace(scale=stats.logistic.std() / stats.laplace.std()).cdf).pvalue < 1e-6
    assert stats.kstest(laplace, stats.logistic(scale=stats.laplace.std() / stats.logistic.std()).cdf).pvalue < 1e-6
    assert stats.kstest(laplace, stats.laplace.cdf).pvalue > 1e-3 and stats.kstest(logistic, stats.logistic.cdf).pvalue > 1e-3


@pytest.mark.parametrize("p", [1, 3, 15])
def test_l2_gamma_noise_has_a_gamma_norm_and_a_uniform_direction(p):
    """Density ∝ exp(−‖z‖) on R^p: the norm is Gamma(p, 1), the direction uniform on the sphere
    (each coordinate of z/‖z‖ has mean 0 and second moment 1/p; for p = 1, the sign is fair)."""
    z = standard_noise("l2_gamma", (8000, p), torch.Generator().manual_seed(13)).numpy()
    norms = np.linalg.norm(z, axis=1)
    assert stats.kstest(norms, stats.gamma(p).cdf).pvalue > 1e-3
    assert stats.kstest(norms, stats.gamma(p + 1).cdf).pvalue < 1e-6
    direction = z / norms[:, None]
    np.testing.assert_allclose(direction.mean(0), 0, atol=4 / np.sqrt(8000))
    np.testing.assert_allclose((direction ** 2).mean(0), 1 / p, atol=0.03)
    rows = standard_noise("l2_gamma", (2, 5, p), torch.Generator().manual_seed(13))
    assert rows.shape == (2, 5, p) and rows.dtype == torch.float64
    single = standard_noise("l2_gamma", (2, 5, p), torch.Generator().manual_seed(13), dtype=torch.float32)
    assert single.dtype == torch.float32


def test_l2_gamma_noise_normalises_each_vector_along_its_last_dimension():
    """A stack of (40, 50) vectors of p = 3: each vector's norm is Gamma(3, 1) (normalising along
    another dimension, or reading p from another one, gives other norms)."""
    z = standard_noise("l2_gamma", (40, 50, 3), torch.Generator().manual_seed(14))
    norms = z.norm(dim=-1).flatten().numpy()
    assert stats.kstest(norms, stats.gamma(3).cdf).pvalue > 1e-3


def test_l2_gamma_norms_of_independent_generators_are_independent():
    """Each generator seeds its own Gamma draws (from 2^62 seeds): 300 generators give 300
    different norms, never the same stream twice."""
    norms = {f"{float(standard_noise('l2_gamma', (1, 4), torch.Generator().manual_seed(s)).norm()):.10g}"
             for s in range(300)}  # to 10 digits: a repeated Gamma draw differs only in the direction's rounding
    assert len(norms) == 300


def test_logistic_log_density_computes_in_double_precision_whatever_the_input():
    x = np.linspace(-20, 20, 401).astype(np.float32)
    density = logistic_log_density(x, 0.3)
    assert density.dtype == np.float64
    np.testing.assert_allclose(density, stats.logistic.logpdf(x.astype(np.float64), scale=0.3), rtol=1e-12)
    np.testing.assert_allclose(logistic_log_density([0, 1, 2], 2.0), stats.logistic.logpdf([0, 1, 2], scale=2.0),
                               rtol=1e-12)


@pytest.mark.parametrize("family, reference", [("logistic", stats.logistic), ("laplace", stats.laplace),
                                               ("gaussian", stats.norm)])
def test_each_coordinate_family_scores_a_release_by_its_own_density(family, reference):
    """log f of a release of 7 coordinates at scale 0.4, up to a constant: the sum of scipy's
    per-coordinate log-pdfs, shifted by one constant for every release (a likelihood ratio at one
    scale needs no more). Another family's density is not (the scores are told apart)."""
    noise = torch.tensor(np.random.default_rng(5).normal(scale=2.0, size=(50, 7)))
    scale = 0.4
    ours = FAMILY[family].log_density(noise, scale).numpy()
    expected = reference.logpdf(noise.numpy(), scale=scale).sum(axis=1)
    np.testing.assert_allclose(ours - ours[0], expected - expected[0], rtol=1e-9, atol=1e-9)
    for other in {"logistic", "laplace", "gaussian"} - {family}:
        theirs = FAMILY[other].log_density(noise, scale).numpy()
        assert not np.allclose(theirs - theirs[0], expected - expected[0], rtol=1e-3)


def test_the_l2_gamma_density_falls_with_the_norm_alone():
    """Density ∝ exp(−‖z‖/θ): releases of equal norm score alike whatever their direction, and the
    score falls by 1 per θ of norm."""
    theta = 0.3
    direction = torch.nn.functional.normalize(torch.randn(4, 6, generator=torch.Generator().manual_seed(1),
                                                          dtype=torch.float64), dim=-1)
    norms = torch.tensor([[1.0], [1.0], [1.3], [1.6]], dtype=torch.float64)
    scores = FAMILY["l2_gamma"].log_density(direction * norms, theta)
    np.testing.assert_allclose(scores.numpy(), [-1 / theta, -1 / theta, -1.3 / theta, -1.6 / theta], rtol=1e-12)


def test_every_noisy_release_method_holds_a_family_and_its_calibration():
    """The registry entry's noise is the object the release draws from: its sampler and density
    exist, and its scale is the entry's calibration at (Δ, ε, δ)."""
    for name, method in REGISTRY.items():
        if method.release != "output_perturbation":
            assert method.noise is None, name
            continue
        assert isinstance(method.noise, NOISE_FAMILIES), name
        uses = 1e-5 if method.uses_delta else None
        assert method.noise.scale(0.5, 2.0, uses) == method.noise.calibrate(0.5, 2.0, uses), name
        assert calibrate(name, 2.0, 1e-5, SENSITIVITY).noise_scale == method.noise.scale(
            SENSITIVITY[method.sensitivity_key()], 2.0, uses), name
