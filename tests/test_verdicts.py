"""A claim's verdict from the interval of its difference (privssl.reports.verdicts), against
hand-computed cases: the boundaries (an interval touching 0 or the margin is unresolved), the
records a replication needs for 80 % power in closed form, and the equivalence test's four
outcomes (inside, wholly outside on either side, straddling one edge or both)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from privssl.attacks.repeated import Estimate
from privssl.reports.verdicts import (
    BARELY_MARGIN,
    CHANCE_MARGIN,
    NO_COST_MARGIN,
    at_most,
    combined,
    directional,
    largest_need,
    within,
)

R, C, U = "reproduced", "contradicted", "unresolved"
# z_.975 + z_.8 from the standard library (not scipy, which the code under test uses): 2.8015852...
Z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
N, VAR_RECORDS = 400, 4e-4  # se 0.02: a 95 % half-width of about 0.039


def est(value, lo, hi, var_draws=0.0, n=N, var_records=VAR_RECORDS, draws=1):
    return Estimate(value, lo, hi, n, draws, var_records, var_draws, n - 1.0)


def closed_form(d, var_draws=0.0, n=N, var_records=VAR_RECORDS):
    """n · var_records / ((d / (z_.975 + z_.8))² − var_draws), ceiled; +inf when the draws alone are too much."""
    room = (d / Z) ** 2 - var_draws
    return math.inf if room <= 0 else math.ceil(n * var_records / room)


def is_nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def test_the_closed_form_by_hand():
    assert Z == pytest.approx(2.8015852, abs=1e-7)
    assert closed_form(0.04) == 785  # 400 · 4e-4 / (0.04 / 2.80159)² = 784.89
    assert closed_form(0.04, var_draws=1e-4) == 1541  # 0.16 / (2.0385e-4 − 1e-4) = 1540.6
    assert closed_form(0.04, var_draws=3e-4) == math.inf


# --------------------------------------------------------------------------------- directional

def test_directional_reads_the_interval_not_the_estimate():
    verdict, need = directional(est(0.05, 0.011, 0.089))
    assert verdict == R and is_nan(need)
    verdict, need = directional(est(-0.05, -0.089, -0.011))
    assert verdict == C and is_nan(need)
    # the estimate above 0, the interval straddling it: not reproduced
    assert directional(est(0.02, -0.019, 0.059)) == (U, closed_form(0.02))


@pytest.mark.parametrize("lo, hi", [(0.0, 0.08), (-0.08, 0.0)])
def test_directional_an_interval_touching_zero_is_unresolved(lo, hi):
    value = (lo + hi) / 2
    verdict, need = directional(est(value, lo, hi))
    assert verdict == U
    assert need == closed_form(value) == 785  # |d| = 0.04, whichever side


def test_directional_need_counts_the_draws_share_and_is_inf_when_it_alone_is_too_large():
    assert directional(est(0.04, -0.001, 0.081, var_draws=1e-4)) == (U, 1541)
    assert directional(est(0.04, -0.03, 0.11, var_draws=3e-4)) == (U, math.inf)
    # the record count scales the need: a tenth of the records' variance at n = 4000 is the same design
    assert directional(est(0.04, -0.001, 0.081, n=4000, var_records=4e-5)) == (U, 785)


def test_directional_a_difference_of_exactly_zero_needs_no_n():
    verdict, need = directional(est(0.0, -0.039, 0.039))
    assert verdict == U and is_nan(need)


# --------------------------------------------------------------------------------- at_most

def test_at_most_reads_the_interval_against_the_margin():
    m = NO_COST_MARGIN
    assert m == 0.03
    verdict, need = at_most(est(-0.01, -0.05, 0.029), m)
    assert verdict == R and is_nan(need)
    verdict, need = at_most(est(0.07, 0.031, 0.11), m)
    assert verdict == C and is_nan(need)
    # the estimate below the margin, the interval across it: unresolved, the need of d − margin
    assert at_most(est(0.01, -0.029, 0.049), m) == (U, closed_form(0.01 - m)) == (U, 3140)


@pytest.mark.parametrize("lo, hi", [(-0.01, 0.03), (0.03, 0.07)])
def test_at_most_an_interval_touching_the_margin_is_unresolved(lo, hi):
    value = (lo + hi) / 2
    verdict, need = at_most(est(value, lo, hi), 0.03)
    assert verdict == U and need == closed_form(value - 0.03) == 3140


def test_at_most_an_estimate_on_the_margin_needs_no_n_and_a_negative_margin_is_refused():
    verdict, need = at_most(est(0.03, -0.01, 0.07), 0.03)
    assert verdict == U and is_nan(need)
    with pytest.raises(ValueError, match="margin"):
        at_most(est(0.0, -0.01, 0.01), -0.01)
    assert at_most(est(-0.05, -0.09, -0.01), 0.0)[0] == R  # margin 0 is "a does not exceed b"


# --------------------------------------------------------------------------------- within

def test_within_inside_the_band_reproduces():
    assert CHANCE_MARGIN == 0.05 and BARELY_MARGIN == 0.03
    verdict, need = within(est(0.0, -0.049, 0.049), 0.05)
    assert verdict == R and is_nan(need)


@pytest.mark.parametrize("lo, hi", [(-0.2, -0.1), (-0.2, -0.0501), (0.1, 0.2), (0.0501, 0.2)])
def test_within_wholly_outside_on_either_side_is_contradicted(lo, hi):
    """An attack reversed below 0.45 is not "at chance": contradicted, not unresolved forever."""
    verdict, need = within(est((lo + hi) / 2, lo, hi), 0.05)
    assert verdict == C and is_nan(need)


@pytest.mark.parametrize("lo, hi", [(-0.05, 0.04), (-0.04, 0.05)])
def test_within_touching_an_edge_from_inside_is_unresolved(lo, hi):
    verdict, need = within(est((lo + hi) / 2, lo, hi), 0.05)
    assert verdict == U and np.isfinite(need)


@pytest.mark.parametrize("lo, hi, edge", [(-0.2, -0.05, -0.05), (0.05, 0.2, 0.05)])
def test_within_touching_an_edge_from_outside_is_unresolved_with_that_edges_need(lo, hi, edge):
    value = (lo + hi) / 2  # ±0.125: outside the band, the interval's inner end on the edge
    assert within(est(value, lo, hi), 0.05) == (U, closed_form(value - edge))


def test_within_straddling_one_edge_takes_that_edges_need():
    # the estimate inside, the upper end across +0.05: the need of d − 0.05 = −0.02, not of d + 0.05 = 0.08
    assert within(est(0.03, -0.009, 0.069), 0.05) == (U, closed_form(0.03 - 0.05)) == (U, 3140)
    # mirrored: the lower end across −0.05
    assert within(est(-0.03, -0.069, 0.009), 0.05) == (U, closed_form(-0.03 + 0.05)) == (U, 3140)
    # the estimate outside, the interval back across the edge: the need to show it lies outside
    assert within(est(0.07, 0.031, 0.109), 0.05) == (U, closed_form(0.07 - 0.05))
    assert closed_form(0.03 + 0.05) < 3140  # the wrong edge would understate the need


def test_within_straddling_both_edges_takes_the_larger_need():
    d = est(0.01, -0.09, 0.11)
    expected = max(closed_form(0.01 + 0.05), closed_form(0.01 - 0.05))
    assert expected == closed_form(0.01 - 0.05) == 785
    assert within(d, 0.05) == (U, expected)


def test_within_needs_a_positive_margin():
    for margin in (0.0, -0.05):
        with pytest.raises(ValueError, match="margin"):
            within(est(0.0, -0.01, 0.01), margin)


# --------------------------------------------------------------------------------- several parts

@pytest.mark.parametrize("parts, expected", [
    ([R, R], R), ([R], R), ([R, U], U), ([U, U], U), ([R, C], C), ([U, C], C), ([C, R, U], C), ([C], C)])
def test_combined(parts, expected):
    assert combined(parts) == expected


@pytest.mark.parametrize("needs, expected", [
    ([100.0, 250.0], 250.0), ([250.0, 100.0], 250.0), ([100.0, math.inf], math.inf), ([np.nan, 50.0], 50.0),
    ([50.0, np.nan, 70.0], 70.0), ([np.nan, math.inf], math.inf)])
def test_largest_need(needs, expected):
    assert largest_need(needs) == expected


@pytest.mark.parametrize("needs", [[np.nan], [np.nan, np.nan], []])
def test_largest_need_without_a_finite_part_is_nan(needs):
    assert is_nan(largest_need(needs))


# --------------------------------------------------------------------------------- mutation-testing cases

def test_combined_refuses_a_claim_without_parts_naming_it():
    with pytest.raises(ValueError, match="^a claim needs at least one compared part$"):
        combined([])


def test_within_an_estimate_exactly_on_the_edge_needs_no_n():
    """|d| = margin with the interval across both edges: the estimate is on the edge, so no n
    shows it inside or outside (NaN), not the need of the far edge."""
    verdict, need = within(est(0.05, -0.06, 0.16), 0.05)
    assert verdict == U and is_nan(need)
    verdict, need = within(est(-0.05, -0.16, 0.06), 0.05)
    assert verdict == U and is_nan(need)


def test_within_an_asymmetric_interval_across_one_edge_takes_only_that_edges_need():
    """A Clopper–Pearson interval is asymmetric: the estimate −0.01 inside, the lower end −0.04
    inside the band, the upper end 0.06 across +0.05. Only the upper edge is violated: the need
    of d − 0.05 = −0.06, not the larger one of the nearer, unviolated lower edge (d + 0.05 = 0.04)."""
    assert within(est(-0.01, -0.04, 0.06), 0.05) == (U, closed_form(-0.06))
    assert closed_form(-0.06) < closed_form(0.04)
    # mirrored: the lower end across −0.05, the upper end inside
    assert within(est(0.01, -0.06, 0.04), 0.05) == (U, closed_form(0.06))
