"""privssl.accounting.wor_rdp against dp_accounting's RDP accountant for a batch sampled without
replacement (its public path: a SampledWithoutReplacementDpEvent composed into an RdpAccountant),
the bound that wor_rdp computes faster and that dpcl.epsilon composes."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant

from privssl.accounting import wor_rdp
from privssl.accounting.rdp import RDP_ORDERS

# the orders dpcl uses (fractional ones interpolated, 512 and 1024 beyond the differences) and
# a few more: an order just above an integer, the last exact one, one between 256 and 512
ORDERS = sorted(set(RDP_ORDERS) | {1.01, 2.0, 3.5, 63.9, 255.5, 300.0})


def library_rdp(q_numerator: int, n: int, sigma: float, orders) -> np.ndarray:
    accountant = RdpAccountant(orders=list(orders), neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    accountant.compose(dp_accounting.SampledWithoutReplacementDpEvent(n, q_numerator, dp_accounting.GaussianDpEvent(sigma)))
    return np.asarray(accountant.rdp)


@pytest.mark.parametrize("batch_size, n, sigma", [
    (128, 50_000, 0.4021),  # DPCL's paper setting
    (1, 10_000, 2.0),  # q = 1e-4
    (20, 1000, 1.0),
    (50, 100, 5.0),  # q = 1/2
    (100, 1000, 30.0),  # large σ: the log-space differences have lost most digits to cancellation
    (90, 100, 100.0),
])
def test_rdp_equals_dp_accountings_bound_at_every_order(batch_size, n, sigma):
    ours = wor_rdp.rdp(batch_size / n, sigma, ORDERS)
    np.testing.assert_allclose(ours, library_rdp(batch_size, n, sigma, ORDERS), rtol=1e-12, atol=0)


def test_without_sampling_or_without_a_batch_the_bound_is_the_gaussians_or_zero():
    orders = np.array([1.5, 2.0, 7.0, 300.0])
    np.testing.assert_allclose(wor_rdp.rdp(1.0, 2.0, orders), orders / 8, rtol=1e-15)  # α / (2σ²)
    none = wor_rdp.rdp(0.0, 2.0, orders)
    assert none.shape == orders.shape and not none.any()


def test_orders_all_beyond_the_differences_take_the_library_bound_without_them():
    orders = [300.0, 512.0, 1024.0]
    np.testing.assert_allclose(wor_rdp.rdp(0.01, 1.5, orders), library_rdp(10, 1000, 1.5, orders), rtol=1e-12)


def test_an_infinite_order_has_infinite_rdp_and_leaves_the_others_alone():
    with_inf = wor_rdp.rdp(0.01, 1.0, [2.0, math.inf, 20.0])
    assert math.isinf(with_inf[1])
    np.testing.assert_array_equal(with_inf[[0, 2]], wor_rdp.rdp(0.01, 1.0, [2.0, 20.0]))


@pytest.mark.parametrize("q, sigma, orders, named", [
    (1.2, 1.0, [2.0], "1.2"), (-0.1, 1.0, [2.0], "-0.1"),
    (0.1, 0.0, [2.0], "got 0.0"), (0.1, -1.0, [2.0], "got -1.0"),
    (0.1, 1.0, [0.5, 2.0], "[0.5]"), (0.1, 1.0, [1.0, 2.0], "> 1, got [1.0]"),
])
def test_bad_arguments_are_refused_naming_the_value(q, sigma, orders, named):
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        wor_rdp.rdp(q, sigma, orders)
