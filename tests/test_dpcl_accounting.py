"""DPCL accounting (privssl.dpcl_accounting): ε of without-replacement sampled Gaussian phases
against Google's dp_accounting driven by hand, the effective noise multiplier, amplification,
the common-scale calibration, Phase validation and the paper's CIFAR-10 settings."""

import math
from collections import Counter

import dp_accounting
import numpy as np
import pytest
from dp_accounting import ComposedDpEvent, GaussianDpEvent, SampledWithoutReplacementDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant, compute_epsilon

from privssl.dpcl_accounting import PAPER, Phase, calibrate, effective_noise_multiplier, epsilon, paper_settings_rows
from privssl.rdp import RDP_ORDERS, UnreachableEpsilon

DELTA = 1e-5
REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE
# For the calibration's properties: full batches (closed-form RDP, instant where the without-
# replacement bound takes ≈ 0.3 s an evaluation); the paper rows calibrate sampled phases.
SCHEDULE = [Phase(n=2000, batch_size=2000, steps=500, noise_multipliers=(4.0, 8.0)),
            Phase(n=300, batch_size=300, steps=20, noise_multipliers=(12.0,))]


def direct_epsilon(events, delta=DELTA) -> float:
    """ε of the events, each composed on its own into dp_accounting's RDP accountant."""
    accountant = RdpAccountant(orders=dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS,
                               neighboring_relation=REPLACE_ONE)
    for event in events:
        accountant.compose(event)
    return accountant.get_epsilon(delta)


def schedule_events(phases):
    """The phases as dp_accounting events, built step by step from the paper's description."""
    return [SelfComposedDpEvent(SampledWithoutReplacementDpEvent(
        source_dataset_size=p.n, sample_size=p.batch_size,
        event=ComposedDpEvent([GaussianDpEvent(s) for s in p.noise_multipliers])), count=p.steps) for p in phases]


def test_epsilon_reproduces_dp_accounting_for_a_two_phase_schedule():
    phases = [Phase(n=1000, batch_size=50, steps=300, noise_multipliers=(1.1, 2.0)),
              Phase(n=600, batch_size=20, steps=80, noise_multipliers=(0.9,))]
    assert epsilon(phases, DELTA) == pytest.approx(direct_epsilon(schedule_events(phases)), rel=1e-12)


def test_two_mechanisms_in_a_step_equal_one_at_the_effective_noise_multiplier():
    assert effective_noise_multiplier([3.0, 4.0]) == pytest.approx(2.4, rel=1e-15)  # (1/9 + 1/16)^-1/2 = 12/5
    assert effective_noise_multiplier([0.5]) == 0.5
    both = epsilon([Phase(n=5000, batch_size=100, steps=1000, noise_multipliers=(1.5, 2.0))], DELTA)
    one = direct_epsilon([SelfComposedDpEvent(SampledWithoutReplacementDpEvent(5000, 100, GaussianDpEvent(1.2)),
                                              1000)])
    assert both == pytest.approx(one, rel=1e-12)


def test_full_batch_equals_the_gaussian_rdp_closed_form():
    sigma, steps = 2.0, 50
    orders = np.array(RDP_ORDERS)
    closed_form, _ = compute_epsilon(orders, steps * orders / (2 * sigma ** 2), DELTA)
    assert epsilon([Phase(n=100, batch_size=100, steps=steps, noise_multipliers=(sigma,))], DELTA) == \
        pytest.approx(closed_form, rel=1e-12)


def test_sampling_without_replacement_amplifies():
    full = epsilon([Phase(n=1000, batch_size=1000, steps=100, noise_multipliers=(1.0,))], DELTA)
    sampled = epsilon([Phase(n=1000, batch_size=10, steps=100, noise_multipliers=(1.0,))], DELTA)
    assert sampled < full / 10


@pytest.fixture(scope="module")
def calibrations():
    return {eps: calibrate(eps, DELTA, SCHEDULE) for eps in (2.0, 8.0)}


def test_calibrated_epsilon_is_at_most_and_within_0_2_percent_of_the_target(calibrations):
    for eps, cal in calibrations.items():
        phases = [Phase(p.n, p.batch_size, p.steps, sigmas)
                  for p, sigmas in zip(SCHEDULE, cal.noise_multipliers, strict=True)]
        reached = direct_epsilon(schedule_events(phases))
        assert reached == pytest.approx(cal.eps_at, rel=1e-12)
        assert 0.998 * eps <= reached <= eps


def test_calibration_is_monotone_and_keeps_the_ratios(calibrations):
    assert calibrations[2.0].scale > calibrations[8.0].scale
    for cal in calibrations.values():
        for phase, sigmas in zip(SCHEDULE, cal.noise_multipliers, strict=True):
            assert sigmas == pytest.approx(tuple(cal.scale * r for r in phase.noise_multipliers), rel=1e-15)


def test_unreachable_epsilon_is_reported():
    phases = [Phase(n=100, batch_size=100, steps=10_000, noise_multipliers=(1.0,))]
    with pytest.raises(UnreachableEpsilon, match="1e-06") as err:
        calibrate(1e-6, DELTA, phases, max_multiplier=10.0)
    assert err.value.eps == 1e-6
    for eps in (0.0, math.inf, math.nan):
        with pytest.raises(UnreachableEpsilon):
            calibrate(eps, DELTA, phases)


@pytest.mark.parametrize("fields, name", [
    ({"n": 10, "batch_size": 11, "steps": 1, "noise_multipliers": (1.0,)}, "batch_size"),
    ({"n": 10, "batch_size": 5, "steps": 1, "noise_multipliers": (1.0, -1.0)}, "noise_multipliers"),
    ({"n": 10, "batch_size": 5, "steps": 1, "noise_multipliers": (math.nan,)}, "noise_multipliers"),
    ({"n": 10, "batch_size": 5, "steps": 1, "noise_multipliers": ()}, "noise_multipliers"),
    ({"n": 10, "batch_size": 5, "steps": -1, "noise_multipliers": (1.0,)}, "steps"),
    ({"n": 0, "batch_size": 0, "steps": 1, "noise_multipliers": (1.0,)}, "n"),
])
def test_phase_validation_names_the_field(fields, name):
    with pytest.raises(ValueError, match=rf"\b{name} ="):
        Phase(**fields)


@pytest.mark.parametrize("delta", [0.0, 1.0, math.nan])
def test_delta_outside_0_1_is_refused(delta):
    with pytest.raises(ValueError, match="δ"):
        epsilon([Phase(n=10, batch_size=10, steps=1, noise_multipliers=(1.0,))], delta)


@pytest.fixture(scope="module")
def paper_rows():
    rows = paper_settings_rows()
    assert len(rows) == len(PAPER)
    return {(row["objective"], row["variant"]): row for row in rows}


def test_paper_rows_reach_the_paper_budget(paper_rows):
    assert set(paper_rows) == {(o, v) for o in ("simclr", "barlow_twins") for v in ("naive", "dpcl")} == set(PAPER)
    for row in paper_rows.values():
        assert len(row["mechanisms"].split("; ")) == len(row["paper_noise_multipliers"].split("; "))
        assert 998.0 <= row["eps_at"] <= 1000.0
    for objective in ("simclr", "barlow_twins"):  # the reported (rounded) multipliers stay within the budget
        row = paper_rows[objective, "dpcl"]
        sigmas = tuple(float(s) for s in row["noise_multipliers"].split("; "))
        phase = Phase(row["n"], row["batch_size"], row["steps"], sigmas)
        assert 998.0 <= direct_epsilon(schedule_events([phase])) <= 1000.0 * (1 + 1e-6)


def test_paper_naive_sigmas_match_ours_and_dpcl_sigmas_do_not(paper_rows):
    for objective in ("simclr", "barlow_twins"):
        naive, dpcl = paper_rows[objective, "naive"], paper_rows[objective, "dpcl"]
        # naive DP-SGD: the paper's σ reaches ε = 1000 in our accounting too (to its 4 digits)
        assert float(naive["noise_multipliers"]) == pytest.approx(float(naive["paper_noise_multipliers"]), rel=5e-4)
        assert naive["eps_at_paper_multipliers"] == pytest.approx(1000.0, rel=5e-3)
        # DPCL: the mechanisms share a batch, so only their effective σ counts — the same as naive's
        assert dpcl["effective_noise_multiplier"] == pytest.approx(naive["effective_noise_multiplier"], rel=2e-4)
        paper, ours = ([float(s) for s in dpcl[key].split("; ")] for key in ("paper_noise_multipliers",
                                                                             "noise_multipliers"))
        assert all(o > 1.3 * p for o, p in zip(ours, paper, strict=True))
        assert np.allclose(np.divide(ours, paper), ours[0] / paper[0], rtol=1e-6)  # the paper's ratios
        assert dpcl["eps_at_paper_multipliers"] > 100_000


def test_paper_dpcl_sigmas_reach_1000_when_each_mechanism_is_amplified_alone():
    """What the paper composes (§4.2.2, §4.3.2): the RDPs of separately subsampled mechanisms,
    as if each drew its own batch."""
    for objective in ("simclr", "barlow_twins"):
        epochs, sigmas = PAPER[objective, "dpcl"]
        separate = ComposedDpEvent([
            SelfComposedDpEvent(SampledWithoutReplacementDpEvent(50_000, 128, GaussianDpEvent(s)), count)
            for s, count in Counter(sigmas.values()).items()])
        steps = math.ceil(epochs * 50_000 / 128)
        assert direct_epsilon([SelfComposedDpEvent(separate, steps)]) == pytest.approx(1000.0, rel=2e-3)
