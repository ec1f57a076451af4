#!/usr/bin/env python
"""Benchmark: DPCL's RDP accounting for batches sampled without replacement, privssl's
`accounting.wor_rdp` (dp_accounting's forward differences once per σ, every order's sum in numpy)
against dp_accounting's RdpAccountant on the same events (the differences recomputed per order).

Timed, in one process and alternating (`--repeats` times each, medians and ratios reported):
- one ε evaluation at `RDP_ORDERS` of each DPCL paper setting (n = 50000, |B| = 128, the paper's σ);
- one `calibrate` of the paper's SimCLR DPCL setting to ε = 1000 (what `paper_settings_rows` and
  the `dpcl_train` rule do), ours against the same search on dp_accounting's accountant.
Both must agree: the largest relative difference of ε is printed and must stay below 1e-12.

    python benchmarks/wor_rdp.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import dp_accounting
from dp_accounting.rdp import RdpAccountant

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from privssl.accounting import dpcl  # noqa: E402
from privssl.accounting.rdp import RDP_ORDERS  # noqa: E402

DELTA = 1e-5


def library_epsilon(phases, delta: float) -> float:
    """ε of the phases as dp_accounting events, composed into its RdpAccountant."""
    accountant = RdpAccountant(orders=RDP_ORDERS, neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    for p in phases:
        gaussians = dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(s) for s in p.noise_multipliers])
        accountant.compose(dp_accounting.SelfComposedDpEvent(
            dp_accounting.SampledWithoutReplacementDpEvent(p.n, p.batch_size, gaussians), p.steps))
    return float(accountant.get_epsilon(delta))


def alternate(ours, library, repeats: int, label: str) -> tuple[float, float, object, object]:
    """Runs both in turn, `repeats` times each, caches cleared; medians and the last results."""
    ours_t, lib_t = [], []
    for r in range(repeats):
        dpcl._epsilon.cache_clear()
        start = time.perf_counter()
        ours_result = ours()
        ours_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        lib_result = library()
        lib_t.append(time.perf_counter() - start)
        print(f"  {label} run {r + 1}/{repeats}: wor_rdp {ours_t[-1]:.3f} s, dp_accounting {lib_t[-1]:.3f} s", flush=True)
    return statistics.median(ours_t), statistics.median(lib_t), ours_result, lib_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    worst = 0.0
    for (objective, variant), (epochs, sigmas) in dpcl.PAPER.items():
        steps = -(-epochs * dpcl.PAPER_N // dpcl.PAPER_BATCH_SIZE)
        phases = [dpcl.Phase(dpcl.PAPER_N, dpcl.PAPER_BATCH_SIZE, steps, tuple(sigmas.values()))]
        ours, lib, e_ours, e_lib = alternate(lambda: dpcl.epsilon(phases, DELTA), lambda: library_epsilon(phases, DELTA),
                                             args.repeats, f"{objective}/{variant} ε")
        worst = max(worst, abs(e_ours - e_lib) / e_lib)
        print(f"{objective}/{variant}: one ε evaluation {ours:.3f} s vs {lib:.3f} s ({lib / ours:.1f}x); ε = {e_ours:.6g}")
    epochs, sigmas = dpcl.PAPER["simclr", "dpcl"]
    phase = dpcl.Phase(dpcl.PAPER_N, dpcl.PAPER_BATCH_SIZE, -(-epochs * dpcl.PAPER_N // dpcl.PAPER_BATCH_SIZE),
                       tuple(sigmas.values()))

    def calibrate_on_library():
        with mock.patch.object(dpcl, "_epsilon", lambda phases, delta: library_epsilon(phases, delta)):
            return dpcl.calibrate(1000.0, DELTA, [phase])

    ours, lib, c_ours, c_lib = alternate(lambda: dpcl.calibrate(1000.0, DELTA, [phase]), calibrate_on_library,
                                         args.repeats, "calibrate")
    worst = max(worst, abs(c_ours.scale - c_lib.scale) / c_lib.scale)
    print(f"calibrate (SimCLR DPCL to ε = 1000): {ours:.3f} s vs {lib:.3f} s ({lib / ours:.1f}x); "
          f"scale {c_ours.scale:.10g} vs {c_lib.scale:.10g}")
    print(f"largest relative difference (ε, scale): {worst:.2e}")
    if worst > 1e-12:
        sys.exit(f"wor_rdp and dp_accounting disagree by {worst:.2e} > 1e-12")


if __name__ == "__main__":
    main()
