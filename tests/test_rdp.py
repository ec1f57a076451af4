"""The closed-form reachability check (privssl.accounting.rdp.reachable_by_bound) against Google's
dp_accounting — the unsampled Gaussian's RDP conversion and the without-replacement accountant
of privssl.accounting.dpcl — and the config check of the training-time branches
(privssl.config.check_training_time) that uses it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from dp_accounting.rdp import compute_epsilon

import privssl.accounting.dpcl
import privssl.accounting.rdp
from privssl.accounting.dpcl import epsilon
from privssl.accounting.dpcl_spec import dpcl_phases
from privssl.accounting.rdp import MAX_MULTIPLIER, RDP_ORDERS, Phase, reachable_by_bound
from privssl.config_checks import ConfigError, check_training_time

DELTA = 1e-5
ROOT = Path(__file__).resolve().parents[1]
SAMPLED = [Phase(n=150, batch_size=50, steps=6, noise_multipliers=(1.0, 1.0)),
           Phase(n=150, batch_size=50, steps=60, noise_multipliers=(1.0,))]


def scaled(phases, multiplier):
    return [Phase(p.n, p.batch_size, p.steps, tuple(multiplier * r for r in p.noise_multipliers)) for p in phases]


def bound_value(phases, multiplier, delta=DELTA) -> float:
    """The smallest ε that reachable_by_bound accepts, by bisection in log ε (it is monotone in ε)."""
    lo, hi = 1e-12, 1e12
    assert not reachable_by_bound(lo, delta, phases, multiplier) and reachable_by_bound(hi, delta, phases, multiplier)
    while hi / lo > 1 + 1e-12:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if reachable_by_bound(mid, delta, phases, multiplier) else (mid, hi)
    return hi


def unsampled_rdp_epsilon(phases, multiplier, delta=DELTA) -> float:
    """dp_accounting's conversion of the Gaussians' RDP without subsampling, Σ steps α/(2σ²)."""
    orders = np.array(RDP_ORDERS)
    rdp = sum(p.steps * sum(orders / (2 * (multiplier * r) ** 2) for r in p.noise_multipliers) for p in phases)
    return compute_epsilon(orders, rdp, delta)[0]


# --------------------------------------------------------------------------- reachable_by_bound


def test_huge_multiplier_reaches_eps_1_and_a_tiny_one_does_not():
    assert reachable_by_bound(1.0, DELTA, SAMPLED, MAX_MULTIPLIER)
    assert reachable_by_bound(1.0, DELTA, SAMPLED, 1e3)
    assert not reachable_by_bound(1.0, DELTA, SAMPLED, 1e-2)
    assert not reachable_by_bound(1000.0, DELTA, SAMPLED, 1e-2)


@pytest.mark.parametrize("phases, multiplier", [
    ([Phase(100, 100, 50, (2.0,))], 1.0),
    ([Phase(100, 100, 50, (2.0,))], 7.0),
    ([Phase(2000, 2000, 500, (4.0, 8.0)), Phase(300, 300, 20, (12.0,))], 0.5),
    (SAMPLED, 3.0),
])
def test_bound_is_the_unsampled_gaussians_rdp_conversion(phases, multiplier):
    """Away from dp_accounting's KL branch (ε = 0 for RDP below ≈ δ²) the closed form is exactly its
    Proposition-12 conversion of the unsampled Gaussians' RDP α·Σ steps/(2σ²)."""
    assert bound_value(phases, multiplier) == pytest.approx(unsampled_rdp_epsilon(phases, multiplier), rel=1e-9)


@pytest.mark.parametrize("phases, multiplier", [(SAMPLED, 1.0), (SAMPLED, 4.0),
                                                ([Phase(1000, 50, 300, (1.1, 2.0)), Phase(600, 20, 80, (0.9,))], 1.5)])
def test_bound_is_at_least_the_without_replacement_accountants_epsilon(phases, multiplier):
    """Subsampling only lowers the RDP: wherever the bound says reachable, the accountant agrees,
    and an ε below the accountant's own is never called reachable."""
    accountant = epsilon(scaled(phases, multiplier), DELTA)
    bound = bound_value(phases, multiplier)
    assert math.isfinite(bound) and accountant <= bound
    assert accountant < 0.9 * bound  # sampling 1/3 or less of the records amplifies: the bound is loose here
    assert reachable_by_bound(bound, DELTA, phases, multiplier)
    assert not reachable_by_bound(0.99 * accountant, DELTA, phases, multiplier)
    assert not reachable_by_bound(0.99 * bound, DELTA, phases, multiplier)


def test_bound_equals_the_accountant_for_full_batches():
    phases = [Phase(100, 100, 50, (2.0,)), Phase(40, 40, 10, (3.0, 5.0))]
    accountant = epsilon(scaled(phases, 1.5), DELTA)
    assert bound_value(phases, 1.5) == pytest.approx(accountant, rel=1e-9)
    assert reachable_by_bound(accountant * (1 + 1e-9), DELTA, phases, 1.5)
    assert not reachable_by_bound(accountant * (1 - 1e-6), DELTA, phases, 1.5)


def test_bound_scales_every_mechanism_with_the_multiplier():
    """Ratios (1, 2) at multiplier m are the Gaussians σ = m and 2m: c = steps (1/m² + 1/(4m²)) / 2."""
    ratios = [Phase(100, 100, 10, (1.0, 2.0))]
    single = [Phase(100, 100, 10, ((1 + 1 / 4) ** -0.5,))]  # one Gaussian of the same RDP
    for m in (0.7, 3.0):
        assert bound_value(ratios, m) == pytest.approx(bound_value(single, m), rel=1e-9)
        assert bound_value(ratios, m) == pytest.approx(unsampled_rdp_epsilon(ratios, m), rel=1e-9)


@pytest.mark.parametrize("phases, multiplier", [(SAMPLED, 3.0), ([Phase(100, 100, 50, (2.0,))], 7.0)])
def test_an_eps_equal_to_the_bound_is_reachable_and_one_ulp_below_is_not(phases, multiplier):
    """True where "ε ≤ eps is certain" includes eps equal to the bound. The bound is the docstring's
    formula, min_α α·c + log(1 − 1/α) − (log δ + log α)/(α − 1), evaluated in the same floating-point
    operations (c's sums by fsum, log(1 − 1/α) as log1p: equal to the last bit) and checked against
    dp_accounting's conversion; so the threshold is pinned to the ulp: inclusive."""
    c = math.fsum(p.steps * math.fsum(1 / (2 * (multiplier * r) ** 2) for r in p.noise_multipliers) for p in phases)
    bound = min(a * c + math.log1p(-1 / a) - (math.log(DELTA) + math.log(a)) / (a - 1) for a in RDP_ORDERS)
    assert bound == pytest.approx(unsampled_rdp_epsilon(phases, multiplier), rel=1e-9)
    assert reachable_by_bound(bound, DELTA, phases, multiplier)
    assert not reachable_by_bound(math.nextafter(bound, 0.0), DELTA, phases, multiplier)


# --------------------------------------------------------------------------- the config check


@pytest.fixture
def config() -> dict:
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert "dpcl" in cfg and "dpadapter" in cfg and cfg["datasets"]
    return cfg


def test_the_shipped_config_passes(config):
    check_training_time(config)


def test_an_unreachable_dpcl_eps_is_refused_naming_the_key(config, monkeypatch):
    """At a largest multiplier of 1 every ε below the accountant's ε at σ = 1 is unreachable, and
    only those are named; check_training_time reads MAX_MULTIPLIER from privssl.accounting.rdp at call time,
    the accountant's fallback `reachable` has its default bound at import, so both are patched."""
    monkeypatch.setattr(privssl.accounting.rdp, "MAX_MULTIPLIER", 1.0)
    original = privssl.accounting.dpcl.reachable
    monkeypatch.setattr(privssl.accounting.dpcl, "reachable",
                        lambda eps, delta, phases, max_multiplier=None: original(eps, delta, phases, 1.0))
    config["dpcl"]["variants"] = ["dpcl"]
    del config["dpadapter"]
    n = min(min(e["splits"]["finetune"], e["splits"]["shadow"] // 2) for e in config["datasets"].values())
    at_one = epsilon(dpcl_phases(config["dpcl"], "dpcl", n, 1.0), config["protect"]["delta"])
    low, high = round(0.5 * at_one, 3), round(2 * at_one, 3)
    config["dpcl"]["eps"] = [high, low]
    with pytest.raises(ConfigError, match=rf"config key 'dpcl\.eps': ε = {low} cannot be reached .* multiplier 1 "):
        check_training_time(config)
    config["dpcl"]["eps"] = [high]
    check_training_time(config)


def test_an_unreachable_dpadapter_eps_is_refused_naming_the_key(config, monkeypatch):
    monkeypatch.setattr(privssl.accounting.rdp, "MAX_MULTIPLIER", 1e-3)
    original = privssl.accounting.dpcl.reachable
    monkeypatch.setattr(privssl.accounting.dpcl, "reachable",
                        lambda eps, delta, phases, max_multiplier=None: original(eps, delta, phases, 1e-3))
    del config["dpcl"]
    with pytest.raises(ConfigError, match=r"config key 'dpadapter\.eps': ε = 1, 10, 100, 1000 cannot be reached"):
        check_training_time(config)


def test_too_many_steps_make_a_small_eps_unreachable_even_at_the_largest_multiplier(config):
    """Unpatched: 2000 encoder epochs on |d| = 150 make ε = 0.001 unreachable at σ = 1e6."""
    config["dpcl"].update(eps=[0.001], variants=["naive"])
    config["dpcl"]["encoder"]["epochs"] = 2000
    del config["dpadapter"]
    with pytest.raises(ConfigError, match=r"config key 'dpcl\.eps': ε = 0\.001 cannot be reached .* 1e\+06"):
        check_training_time(config)


@pytest.mark.parametrize("stage", ["encoder", "head"])
def test_a_dpcl_batch_larger_than_the_smallest_private_set_is_refused(config, stage):
    d = min(e["splits"]["finetune"] for e in config["datasets"].values())
    config["dpcl"][stage]["batch_size"] = d + 1
    with pytest.raises(ConfigError, match=rf"config key 'dpcl\.{stage}\.batch_size': .*= {d + 1} .*at most {d}"):
        check_training_time(config)


def test_the_attackers_shadow_half_bounds_the_batch_too(config):
    for entry in config["datasets"].values():
        entry["splits"]["shadow"] = 80  # shadow half 40 < batch 50 ≤ |d|
    with pytest.raises(ConfigError, match=r"config key 'dpcl\.encoder\.batch_size': .*at most 40"):
        check_training_time(config)


def test_a_dpadapter_fine_tune_batch_larger_than_d_is_refused(config):
    config["dpadapter"]["fine_tune"]["batch_size"] = 10_000
    del config["dpcl"]
    with pytest.raises(ConfigError, match=r"config key 'dpadapter\.fine_tune\.batch_size'"):
        check_training_time(config)


@pytest.mark.parametrize("eps, sigma", [([1, 10], 1.5), (None, None)])
def test_dpcl_needs_exactly_one_of_eps_and_noise_multiplier(config, eps, sigma):
    config["dpcl"].update(eps=eps, noise_multiplier=sigma)
    with pytest.raises(ConfigError, match=r"config keys 'dpcl\.eps' and 'dpcl\.noise_multiplier'"):
        check_training_time(config)


def test_a_fixed_noise_multiplier_without_eps_passes(config):
    config["dpcl"].update(eps=None, noise_multiplier=1.5)
    check_training_time(config)


@pytest.mark.parametrize("batch", ["perturb_batch", "update_batch"])
def test_a_dpadapter_pretraining_batch_larger_than_the_public_split_is_refused(config, batch):
    public = min(e["splits"]["pretrain"] for e in config["datasets"].values())
    config["dpadapter"]["pretrain"][batch] = public + 1
    with pytest.raises(ConfigError, match=rf"config key 'dpadapter\.pretrain\.{batch}': {public + 1} is larger "
                                          rf"than the labelled images of digits's public split.*1\.\.{public}"):
        check_training_time(config)
    config["dpadapter"]["pretrain"][batch] = public
    check_training_time(config)


def test_a_release_radius_outside_the_radii_is_refused(config):
    config["dpadapter"]["release_radius"] = 0.123
    with pytest.raises(ConfigError, match=r"config key 'dpadapter\.release_radius': 0\.123 is not among"):
        check_training_time(config)


def test_training_time_sections_need_an_image_dataset(config):
    config["datasets"] = {}
    with pytest.raises(ConfigError, match=r"config key 'dpcl': the branch needs an image dataset"):
        check_training_time(config)
    del config["dpcl"], config["dpadapter"]
    check_training_time(config)  # without the sections there is nothing to check


def test_a_phase_takes_a_batch_of_one_and_refuses_a_noiseless_mechanism():
    # a batch of one record is a phase (sampling rate 1/n); a noise multiplier of 0 releases the
    # clipped sum itself, which no (ε, δ) bounds: refused, not accounted as infinitely private
    assert Phase(n=5, batch_size=1, steps=3, noise_multipliers=(1.0,)).batch_size == 1
    with pytest.raises(ValueError, match="noise_multipliers must be a non-empty tuple of finite values > 0"):
        Phase(n=5, batch_size=2, steps=3, noise_multipliers=(1.0, 0.0))
