"""The gradient-canary audits of the DP-SGD head (privssl.audit.gradient_canary, .white_box, .gdp):
each piece against an independent computation (the momentum inverted by hand, μ-GDP's δ(ε), a
Gaussian shift of known μ, the likelihood ratio from the two densities, the claimed statistic's
shift by simulation), and the whole audit against planted bugs in the trainer, one in every term
of the claim (σ, q, T, C, the noise's independence between steps, the canary's own sampling), at
the Fashion-MNIST preset's 1000 trainings per world: each must stop the job (a bound above the
claim), the correct trainer must not, and a canary sampled below the accounted rate must leave
every bound below the ε it really has."""

import logging
import math

import numpy as np
import pytest
import torch
from scipy import stats

import privssl.release.dpsgd_batched as trainer
from privssl.accounting.dpsgd import accountant_epsilon, noise_multiplier
from privssl.audit.bounds import epsilon_lower_bound_split, epsilon_lower_bound_split_among
from privssl.audit.gdp import gdp_epsilon, gdp_fit
from privssl.audit.gradient_canary import (
    ClaimViolated,
    TrainerMismatch,
    audit_dpsgd,
    check_below_claim,
    quiet_coordinate,
    write_below_claim,
)
from privssl.audit.white_box import (
    GDP_CONFIDENCE,
    claimed_shift,
    observed_sums,
    run_statistics,
    step_log_likelihood_ratio,
    white_box_audit,
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


@pytest.mark.parametrize("mu", [0.5, 1.0, 3.0])
def test_gdp_epsilon_solves_the_gdp_tradeoff(mu):
    eps = gdp_epsilon(mu, DELTA)
    delta_at = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    assert delta_at == pytest.approx(DELTA, rel=1e-6)
    assert gdp_epsilon(mu * 1.1, DELTA) > eps  # more separation, more ε
    assert gdp_epsilon(0.0, DELTA) == 0.0 and gdp_epsilon(-1.0, DELTA) == 0.0


@pytest.mark.parametrize("mu", [30.0, 60.0])
def test_gdp_epsilon_of_a_large_shift_is_finite_and_solves_the_tradeoff(mu):
    """μ ≈ 30 asks for ε ≈ 580, beyond which e^ε overflows a float: the audit of a badly broken trainer
    must still return its bound (and stop the job for it), not an OverflowError."""
    eps = gdp_epsilon(mu, DELTA)
    delta_at = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps + stats.norm.logcdf(-eps / mu - mu / 2))
    assert math.isfinite(eps) and eps > 500 and delta_at == pytest.approx(DELTA, rel=1e-6)


def test_gdp_fit_recovers_a_known_shift():
    rng = np.random.default_rng(2)
    out, inn = rng.normal(0, 2, 20000), rng.normal(1.6, 2, 20000)  # μ = 0.8
    row = gdp_fit(inn, out, DELTA)
    pooled = math.sqrt((inn.var(ddof=1) + out.var(ddof=1)) / 2)
    assert row["mu_hat"] == pytest.approx((inn.mean() - out.mean()) / pooled) and abs(row["mu_hat"] - 0.8) < 0.05
    se = math.sqrt(2 / 20000 + row["mu_hat"] ** 2 / 80000)
    assert row["mu_lo"] == pytest.approx(row["mu_hat"] - stats.norm.ppf(0.95) * se)
    assert row["eps_lower_bound"] == pytest.approx(gdp_epsilon(row["mu_lo"], DELTA))


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


def test_the_canary_is_sampled_at_the_records_rate():
    x, y, classes = _data()
    spec = DPSGDSpec(clip_norm=1.0, batch_size=15, epochs=10, lr=0.2, momentum=0.5)
    q, steps = sampling_plan(len(y), spec)
    heads = 200
    canary = GradientCanary("weight", (2, 0), 10.0, torch.ones(heads, dtype=torch.bool))
    params = train_dpsgd_heads(x, y, torch.arange(len(y)).expand(heads, -1), classes, HeadSpec(architecture="linear"),
                               spec, torch.zeros(heads), 5, canary)
    drawn = observed_sums(params["canary_trace"], spec, int(len(y) * q)).round()
    assert set(drawn.unique().tolist()) <= {0.0, 1.0}
    # 8000 Bernoulli(q) draws: a two-sided binomial test at 1e-4 (a half or a double rate is 30 SE away)
    assert stats.binomtest(int(drawn.sum()), heads * steps, q).pvalue > 1e-4


def test_the_step_likelihood_ratio_is_that_of_the_two_densities():
    obs, sigma, q = np.linspace(-4, 5, 19), 1.7, 0.3
    with_canary = (1 - q) * stats.norm.pdf(obs, 0, sigma) + q * stats.norm.pdf(obs, 1, sigma)
    np.testing.assert_allclose(step_log_likelihood_ratio(obs, sigma, q),
                               np.log(with_canary / stats.norm.pdf(obs, 0, sigma)), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(step_log_likelihood_ratio(obs, sigma, 1.0), (obs - 0.5) / sigma ** 2, rtol=1e-12)


def test_the_claimed_shift_is_that_of_the_simulated_claim():
    rng = np.random.default_rng(4)
    sigma, q, steps, runs = 2.0, 0.2, 50, 40000
    out = rng.normal(0, sigma, (runs, steps))
    inn = rng.normal(0, sigma, (runs, steps)) + (rng.random((runs, steps)) < q)
    fit = gdp_fit(run_statistics(inn, sigma, q)["likelihood_ratio"], run_statistics(out, sigma, q)["likelihood_ratio"],
                  DELTA)
    se = math.sqrt(2 / runs)
    assert abs(claimed_shift(sigma, q, steps) - fit["mu_hat"]) < 4 * se


@pytest.mark.parametrize(("q", "steps"), [(1 / 3, 90), (1 / 4, 40), (0.05, 600), (1.0, 30)])
@pytest.mark.parametrize("eps", [1.0, 10.0])
def test_the_white_box_fit_of_a_correct_claim_stays_below_the_claim(q, steps, eps):
    """The GDP summary of the claimed statistic never shows more than the accountant's ε: otherwise the
    parametric white-box bound would stop a correct training. At q = 1 the step is a Gaussian mechanism,
    exactly μ-GDP, and the summary is the claim."""
    sigma = noise_multiplier(eps, DELTA, q, steps, "pld").noise_multiplier
    reach = gdp_epsilon(claimed_shift(sigma, q, steps), DELTA)
    claim = accountant_epsilon(sigma, q, steps, DELTA, "pld")
    assert reach <= claim * (1 + 1e-3)
    assert reach > 0.7 * claim  # and it comes close: the statistic is the claim's most powerful one


def test_the_split_test_chooses_the_statistic_on_the_selection_half():
    rng = np.random.default_rng(5)
    member = np.repeat([True, False], 200)
    blind = {"a": rng.normal(size=400), "b": rng.normal(size=400) + 3 * member}
    blind_eval = {"a": rng.normal(size=400), "b": rng.normal(size=400) + 3 * member}
    found = epsilon_lower_bound_split_among(blind, member, blind_eval, member, DELTA)
    assert found["statistic"] == "b"
    alone = epsilon_lower_bound_split(blind["b"], member, blind_eval["b"], member, DELTA)
    assert {k: found[k] for k in alone} == alone
    # the evaluation half never chooses: a statistic that separates there only is not taken
    found = epsilon_lower_bound_split_among({"a": blind["a"], "b": blind["a"]}, member,
                                            {"a": blind_eval["a"], "b": blind_eval["b"]}, member, DELTA)
    assert found["statistic"] == "a"


@pytest.fixture(scope="module")
def calibrated():
    x, y, classes = _data()
    spec = DPSGDSpec(clip_norm=1.0, batch_size=15, epochs=10, lr=0.2, momentum=0.5)
    q, steps = sampling_plan(len(y), spec)
    return x, y, classes, spec, noise_multiplier(2.0, DELTA, q, steps, "pld").noise_multiplier


PRESET_RUNS = 1000  # configs/fashion.yaml: audit.canary.runs


def _audit(calibrated, runs=PRESET_RUNS, check_trainer=True):
    x, y, classes, spec, sigma = calibrated
    return audit_dpsgd(x, y, classes, HeadSpec(architecture="linear"), spec, sigma, 2.0, DELTA, runs=runs, seed=3,
                       check_trainer=check_trainer)


def test_the_audit_of_a_correct_trainer_stays_below_the_claim_and_near_its_reach(calibrated):
    rows = _audit(calibrated)
    check_below_claim([{**r, "method": "dpsgd"} for r in rows])
    by = {r["audit"]: r for r in rows}
    assert set(by) == {"white_box_gdp", "white_box_test", "final_model_gdp", "final_model_test"}
    white = by["white_box_gdp"]
    assert white["threat_model"] == "white_box_all_updates" and white["coordinate_clean"]
    assert white["trainer"] == "privssl.release.dpsgd_batched" and white["confidence"] == GDP_CONFIDENCE
    assert white["n"] == 2 * PRESET_RUNS and by["white_box_test"]["n"] == PRESET_RUNS  # half evaluates
    # the bound lands near what the claim predicts for this many trainings (μ̂ within 4 SE of μ*)
    assert abs(white["mu_hat"] - white["mu_reach"]) < 4 * math.sqrt(2 / PRESET_RUNS)
    assert 0.5 * white["eps_reach"] < white["eps_lower_bound"] < 2.0
    # the noise check: σ̂ is the release's σ and the clipped canary's step is C
    assert white["sigma_hat"] == pytest.approx(calibrated[4], rel=0.03) and white["canary_step"] == pytest.approx(1.0)
    final = by["final_model_gdp"]
    assert final["threat_model"] == "final_model" and final["mu_lo"] > 0 and final["eps_lower_bound"] > 0


def _every_batch(original, n):
    def mask(generator, heads, records, rate, device):
        drawn = original(generator, heads, records, rate, device)
        if records == n + 1:  # the canary's column
            drawn[:, -1] = True
        return drawn
    return mask


def _noise_drawn_once(original):
    kept = {}

    def noise(generator, shape, device):
        return kept.setdefault(tuple(shape), original(generator, shape, device))
    return noise


PLANTED = {  # bug: (what to patch in the trainer, the patch)
    "sigma_halved": ("gaussian_noise", lambda f, n: lambda g, shape, d: 0.5 * f(g, shape, d)),
    "canary_in_every_batch": ("poisson_mask", _every_batch),
    "sample_rate_doubled": ("poisson_mask", lambda f, n: lambda g, h, r, rate, d: f(g, h, r, 2 * rate, d)),
    "clip_norm_doubled": ("clip_factor", lambda f, n: lambda norm_sq, clip: f(norm_sq, 2 * clip)),
    "steps_doubled": ("sampling_plan", lambda f, n: lambda size, spec: (f(size, spec)[0], 2 * f(size, spec)[1])),
    "noise_reused_every_step": ("gaussian_noise", lambda f, n: _noise_drawn_once(f)),
}


@pytest.mark.parametrize("bug", list(PLANTED))
def test_a_planted_bug_in_the_trainer_is_caught_by_a_white_box_bound(calibrated, monkeypatch, bug):
    """The bounds alone, without the trainer's consistency check: each bug lifts one above the claim."""
    name, patch = PLANTED[bug]
    monkeypatch.setattr(trainer, name, patch(getattr(trainer, name), len(calibrated[1])))
    rows = _audit(calibrated, check_trainer=False)
    # the white box sees every update, so it alone must catch each bug (the final model catches some too)
    with pytest.raises(ClaimViolated, match=r"dpsgd at ε = 2: the white_box_(gdp|test) audit proves ε ≥"):
        check_below_claim([{**r, "method": "dpsgd"} for r in rows if r["threat_model"] == "white_box_all_updates"])


BELOW_THE_BOUNDS = {  # bugs the bounds miss at 1000 trainings (ε 2.64 against 2 for the first) and the check sees
    "noise_scaled_0.8": ("gaussian_noise", lambda f, n: lambda g, shape, d: 0.8 * f(g, shape, d),
                         r"the noise of a step is σ̂ = 2\.7"),
    "momentum_0.9_not_0.5": ("train_dpsgd_heads", None, r"a noise-free training moved the canary's coordinate"),
}
CHECKED = {"sigma_halved": r"the noise of a step is σ̂ = 1\.7", "clip_norm_doubled": "by 2 C in a step",
           "steps_doubled": "the trainings took 80 steps, the claim accounts for 40"}


@pytest.mark.parametrize("bug", [*CHECKED, *BELOW_THE_BOUNDS])
def test_updates_of_another_trainer_stop_the_audit_before_any_bound(calibrated, monkeypatch, bug):
    """The consistency check: a noise 20 % small (which no bound catches here), a momentum other than the
    accounted one, and the planted bugs above that change the noise, the clipping or the steps (the
    canary's own sampling only the bounds see)."""
    if bug == "momentum_0.9_not_0.5":
        x, y, classes, spec, sigma = calibrated
        wrong = DPSGDSpec(clip_norm=spec.clip_norm, batch_size=spec.batch_size, epochs=spec.epochs, lr=spec.lr,
                          momentum=0.9)
        original = trainer.train_dpsgd_heads
        monkeypatch.setattr("privssl.audit.gradient_canary.train_dpsgd_heads",
                            lambda f, l, sets, c, h, s, *rest: original(f, l, sets, c, h, wrong, *rest))
        message = BELOW_THE_BOUNDS[bug][2]
    else:
        name, patch, message = BELOW_THE_BOUNDS[bug] if bug in BELOW_THE_BOUNDS else (*PLANTED[bug], CHECKED[bug])
        monkeypatch.setattr(trainer, name, patch(getattr(trainer, name), len(calibrated[1])))
    with pytest.raises(TrainerMismatch, match=message):
        _audit(calibrated)


def test_a_canary_sampled_below_the_accounted_rate_leaves_every_bound_below_its_true_epsilon(calibrated, monkeypatch):
    """The canary joins at q/2 while the claim uses q: the training is more private than claimed (ε of
    q/2), and a lower bound must stay below that ε — the audit's bounds come from the runs, not the claim."""
    original, n = trainer.poisson_mask, len(calibrated[1])

    def half_rate(generator, heads, records, rate, device):
        drawn = original(generator, heads, records, rate, device)
        if records == n + 1:
            drawn[:, -1] &= torch.rand(heads, generator=generator, dtype=torch.float64) < 0.5
        return drawn
    monkeypatch.setattr(trainer, "poisson_mask", half_rate)
    x, y, classes, spec, sigma = calibrated
    q, steps = sampling_plan(len(y), spec)
    true_eps = accountant_epsilon(sigma, q / 2, steps, DELTA, "pld")
    assert max(r["eps_lower_bound"] for r in _audit(calibrated)) < true_eps < 2.0


def test_without_a_clean_coordinate_the_white_box_rows_are_zero(calibrated):
    x, y, classes, spec, sigma = calibrated
    x = x.clone()
    x[0, 2] = 0.5  # no dead feature left: records' gradients reach the canary's coordinate
    rows = audit_dpsgd(x, y, classes, HeadSpec(architecture="linear"), spec, sigma, 2.0, DELTA, runs=50)
    white = [r for r in rows if r["threat_model"] == "white_box_all_updates"]
    assert len(white) == 2 and all(r["eps_lower_bound"] == 0.0 and not r["coordinate_clean"] for r in white)


def test_any_bound_above_its_claim_stops_the_audit():
    row = {"method": "dpsgd", "claimed_eps": 1.0, "audit": "final_model_gdp"}
    check_below_claim([{**row, "eps_lower_bound": 1.0}])  # at the claim: tight, not violated
    with pytest.raises(ClaimViolated, match=r"dpsgd at ε = 1: the final_model_gdp audit proves ε ≥ 1.010"):
        check_below_claim([{**row, "eps_lower_bound": 0.5}, {**row, "eps_lower_bound": 1.01}])


def test_an_audit_above_its_claim_stops_the_script_and_writes_nothing(tmp_path):
    rows = [{"method": "dpsgd", "audit": "white_box_gdp", "claimed_eps": 1.0, "eps_lower_bound": 0.9}]
    path = tmp_path / "ok.csv"
    write_below_claim(rows, path, logging.getLogger("test"), "audit.py")
    assert path.read_text().splitlines() == ["method,audit,claimed_eps,eps_lower_bound",
                                             "dpsgd,white_box_gdp,1.0,0.9"]
    over = rows + [{"method": "certified_gaussian", "audit": "crafted_pair_gdp", "claimed_eps": 1.0,
                    "eps_lower_bound": 1.2}]
    with pytest.raises(SystemExit, match="audit.py: error: certified_gaussian at ε = 1: the crafted_pair_gdp audit"):
        write_below_claim(over, tmp_path / "over.csv", logging.getLogger("test"), "audit.py")
    assert not (tmp_path / "over.csv").exists()


@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_the_split_tests_two_error_rates_hold_jointly_at_the_stated_confidence(confidence):
    """The in-versus-out test bounds FPR and FNR each at 1 − (1 − c) / 2, so that both hold at c
    (union bound): its ceiling, the bound with every decision right, is scipy's Clopper–Pearson
    with 0 events at that level on the evaluation half's counts (a bound per rate at c would give
    a ceiling above it, the pair holding only at 2c − 1)."""
    rng = np.random.default_rng(4)
    obs_in, obs_out = rng.normal(0.3, 1.0, (60, 5)), rng.normal(0.0, 1.0, (60, 5))
    rows = white_box_audit(obs_in, obs_out, 1.0, 0.5, 1e-5, confidence)
    row = next(r for r in rows if r["audit"] == "white_box_test")
    per_rate = 1 - (1 - confidence) / 2
    n = row["n"] // 2  # the evaluation half: as many trainings with the canary as without
    upper = stats.beta.ppf(per_rate, 1, n)  # Clopper–Pearson's upper end with 0 events of n
    assert row["n"] == 60 and row["eps_ceiling"] == pytest.approx(math.log((1 - 1e-5 - upper) / upper), rel=1e-9)
