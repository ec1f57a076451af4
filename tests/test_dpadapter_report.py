"""The DPAdapter table and the verdicts on the paper's Table 1 order (privssl.reports.training_time_report)
from synthetic results rows whose decision cells are packed from known 0/1 arrays: accuracy over
the repeats with the test record as the unit, DPAdapter − SAM and SAM − standard paired on the test
records (recomputed here from the arrays), each verdict in clear cases both ways, and the Markdown."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privssl.io import pack_decisions
from privssl.reports.training_time_report import (
    PAPER_TABLE1,
    dpadapter_comparisons,
    dpadapter_markdown,
    dpadapter_table,
    dpadapter_verdicts,
)
from privssl.reports.verdicts import CONTRADICTED, REPRODUCED, UNRESOLVED

N_TEST = 400
RADII = (0.05, 0.5)


def cp(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else stats.beta.ppf(0.025, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(0.975, k + 1, n - k)
    return float(lo), float(hi)


def bits(p: float, seed: int) -> np.ndarray:
    """N_TEST decisions with exactly round(p N_TEST) right, at positions drawn from `seed`."""
    out = np.zeros(N_TEST, bool)
    out[np.random.default_rng(seed).choice(N_TEST, round(p * N_TEST), replace=False)] = True
    return out


def gained(base: np.ndarray, count: int, seed: int) -> np.ndarray:
    """`base` with `count` of its wrong decisions made right (a near copy)."""
    out = base.copy()
    out[np.random.default_rng(seed).choice(np.flatnonzero(~base), count, replace=False)] = True
    return out


def scenario() -> dict:
    """{(dataset, pre-training, ρ, ε): [decisions per repeat]} on the same N_TEST test records.

    ε = 1, ρ = 0.05: DPAdapter 0.90 > SAM 0.75 > standard 0.60 (the paper's order, clearly);
    ε = 1, ρ = 0.5: DPAdapter 0.45 below SAM 0.60, SAM as good as standard (equal counts);
    ε = 10, ρ = 0.05: SAM 0.65 below standard 0.80, DPAdapter as good as SAM;
    ε = 10, ρ = 0.5: SAM 0.90 above standard, DPAdapter SAM's first repeat with 20 more right (+0.05).
    Repeat 1 of every setting is repeat 0 with one record won and another lost (no draw effect)."""
    seeds = iter(range(100, 10_000))

    def two(p: float, first: np.ndarray | None = None) -> list[np.ndarray]:
        first = bits(p, next(seeds)) if first is None else first
        second = gained(first, 1, next(seeds))
        second[np.random.default_rng(next(seeds)).choice(np.flatnonzero(first), 1)] = False
        return [first, second]

    values = {("digits", "standard", 0.0, 1.0): two(0.60), ("digits", "sam", 0.05, 1.0): two(0.75),
              ("digits", "dpadapter", 0.05, 1.0): two(0.90), ("digits", "sam", 0.5, 1.0): two(0.60),
              ("digits", "dpadapter", 0.5, 1.0): two(0.45), ("digits", "standard", 0.0, 10.0): two(0.80),
              ("digits", "sam", 0.05, 10.0): two(0.65), ("digits", "dpadapter", 0.05, 10.0): two(0.65),
              ("digits", "sam", 0.5, 10.0): two(0.90)}
    values["digits", "dpadapter", 0.5, 10.0] = two(0.95, gained(values["digits", "sam", 0.5, 10.0][0], 20, next(seeds)))
    return values


VALUES = scenario()


def results_of(values: dict) -> pd.DataFrame:
    """Results rows as scripts/dpadapter_train.py writes them, shuffled (the report must not rely on
    row order)."""
    rows = []
    for (dataset, kind, rho, eps), repeats in values.items():
        for repeat, decisions in enumerate(repeats):
            acc = decisions.mean()
            rows.append({"dataset": dataset, "pretraining": kind, "rho": rho, "eps": eps, "repeat": repeat,
                         "pretraining_seed": 0, "accuracy": acc, "n_test": N_TEST, "decisions": pack_decisions(decisions),
                         "robust_accuracy": acc - 0.1 + 0.01 * repeat, "pretrain_accuracy": 0.5 + rho,
                         "pretrain_robust_accuracy": 0.4 + rho, "robust_noise": 0.05, "robust_draws": 10,
                         "noise_multiplier": 10.0 / eps, "eps_spent": 0.999 * eps})
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0).reset_index(drop=True)


@pytest.fixture(scope="module")
def results() -> pd.DataFrame:
    return results_of(VALUES)


@pytest.fixture(scope="module")
def table(results) -> pd.DataFrame:
    return dpadapter_table(results)


@pytest.fixture(scope="module")
def verdicts(results) -> pd.DataFrame:
    return dpadapter_verdicts(results)


def expected_paired(a: list[np.ndarray], b: list[np.ndarray]) -> tuple[float, float, float]:
    """mean(a) − mean(b) with the t interval of the per-record differences of the record means
    on n − 1 df: the paired interval where no layout has a draw effect beyond its error (checked)."""
    for layout in (np.stack(a), np.stack(b)):
        cells, grand = layout.astype(float), layout.mean()
        ms_draws = layout.shape[1] * ((cells.mean(1) - grand) ** 2).sum() / (layout.shape[0] - 1)
        residual = cells - cells.mean(0) - cells.mean(1)[:, None] + grand
        assert ms_draws <= (residual ** 2).sum() / ((layout.shape[0] - 1) * (layout.shape[1] - 1))
    per_record = np.stack(a).mean(0) - np.stack(b).mean(0)
    half = stats.t.ppf(0.975, N_TEST - 1) * per_record.std(ddof=1) / np.sqrt(N_TEST)
    d = np.stack(a).mean() - np.stack(b).mean()
    return d, d - half, d + half


def test_table_is_the_mean_decision_over_repeats_one_row_per_setting_in_the_papers_order(results, table):
    assert len(table) == len(VALUES)
    assert list(zip(table.eps, table.pretraining, table.rho)) == [
        (eps, kind, rho) for eps in (1.0, 10.0) for kind, rho in
        (("standard", 0.0), ("sam", 0.05), ("sam", 0.5), ("dpadapter", 0.05), ("dpadapter", 0.5))]
    for row in table.itertuples(index=False):
        layout = np.stack(VALUES[row.dataset, row.pretraining, row.rho, row.eps])
        assert (row.records, row.repeats) == (N_TEST, 2)  # the test records are the units
        assert row.accuracy == pytest.approx(layout.mean(), abs=1e-12)
        assert row.accuracy_lo < row.accuracy < row.accuracy_hi
        # the two repeats nearly agree record by record: about the one-repeat interval, not the pooled one
        single = cp(int(layout[0].sum()), N_TEST)
        assert (row.accuracy_hi - row.accuracy_lo) == pytest.approx(single[1] - single[0], rel=0.02)
        pooled = cp(int(layout.sum()), 2 * N_TEST)
        assert row.accuracy_hi - row.accuracy_lo > 1.3 * (pooled[1] - pooled[0])
        draws = results[(results.pretraining == row.pretraining) & (results.rho == row.rho) & (results.eps == row.eps)]
        robust = draws.robust_accuracy.mean()
        assert row.robust_accuracy == pytest.approx(robust, abs=1e-12)
        assert (row.robust_lo, row.robust_hi) == pytest.approx(cp(round(robust * N_TEST), N_TEST), abs=1e-12)
        assert row.pretrain_robust_accuracy == 0.4 + row.rho
        assert (row.pretrain_robust_lo, row.pretrain_robust_hi) == pytest.approx(
            cp(round((0.4 + row.rho) * N_TEST), N_TEST), abs=1e-12)
        assert row.noise_multiplier == pytest.approx(10.0 / row.eps) and row.robust_draws == 10


def test_every_repeat_counts_and_identical_repeats_give_the_one_repeat_interval():
    first, second = bits(0.6, 2), bits(0.7, 3)
    both = dpadapter_table(results_of({("digits", "sam", 0.05, 1.0): [first, second]})).iloc[0]
    assert both.accuracy == pytest.approx(0.65) and both.repeats == 2
    decisions = bits(0.7, 1)
    one = dpadapter_table(results_of({("digits", "sam", 0.05, 1.0): [decisions]})).iloc[0]
    two = dpadapter_table(results_of({("digits", "sam", 0.05, 1.0): [decisions, decisions]})).iloc[0]
    k = int(decisions.sum())
    assert (one.accuracy_lo, one.accuracy_hi) == pytest.approx(cp(k, N_TEST), abs=1e-12)
    assert two.accuracy == pytest.approx(k / N_TEST) and two.repeats == 2 and two.records == N_TEST
    assert (two.accuracy_lo, two.accuracy_hi) == pytest.approx(cp(k, N_TEST), abs=0.003)
    assert two.accuracy_hi - two.accuracy_lo > 1.3 * (lambda lo, hi: hi - lo)(*cp(2 * k, 2 * N_TEST))


def test_comparisons_take_sam_and_dpadapter_at_the_radius_and_standard_at_every_radius(results):
    seen = []
    for dataset, eps, rho, sides in dpadapter_comparisons(results):
        seen.append((eps, rho))
        assert set(sides["dpadapter"].rho) == {rho} and set(sides["sam"].rho) == {rho}
        assert set(sides["standard"].pretraining) == {"standard"} and set(sides["standard"].eps) == {eps}
        assert (set(sides["sam"].pretraining), set(sides["dpadapter"].pretraining)) == ({"sam"}, {"dpadapter"})
        assert all(len(side) == 2 for side in sides.values())
    assert seen == [(eps, rho) for eps in (1.0, 10.0) for rho in RADII]


@pytest.mark.parametrize("eps, rho, first, second, claim", [
    (1.0, 0.05, REPRODUCED, REPRODUCED, REPRODUCED),
    (1.0, 0.5, CONTRADICTED, UNRESOLVED, CONTRADICTED),
    (10.0, 0.05, UNRESOLVED, CONTRADICTED, CONTRADICTED),
    (10.0, 0.5, REPRODUCED, REPRODUCED, REPRODUCED)])
def test_verdicts_on_dpadapter_minus_sam_and_sam_minus_standard(verdicts, eps, rho, first, second, claim):
    assert len(verdicts) == 2 * len(RADII)
    (row,) = verdicts[(verdicts.eps == eps) & (verdicts.rho == rho)].itertuples(index=False)
    adapter, sam = VALUES["digits", "dpadapter", rho, eps], VALUES["digits", "sam", rho, eps]
    standard = VALUES["digits", "standard", 0.0, eps]
    expected = expected_paired(adapter, sam)
    assert (row.dpadapter_vs_sam, row.dpadapter_vs_sam_lo, row.dpadapter_vs_sam_hi) == pytest.approx(expected,
                                                                                                      abs=1e-12)
    expected = expected_paired(sam, standard)
    assert (row.sam_vs_standard, row.sam_vs_standard_lo, row.sam_vs_standard_hi) == pytest.approx(expected,
                                                                                                   abs=1e-12)
    assert (row.dpadapter_vs_sam_verdict, row.sam_vs_standard_verdict, row.claim) == (first, second, claim)


def test_a_small_gain_on_the_same_records_is_shown_by_the_pairing(verdicts, table):
    """ε = 10, ρ = 0.5: DPAdapter is SAM with 20 of 400 test records more right. The two accuracies'
    own intervals overlap; the paired difference's lies above 0."""
    sides = table[(table.eps == 10.0) & (table.rho == 0.5)].set_index("pretraining")
    assert sides.loc["dpadapter"].accuracy_lo < sides.loc["sam"].accuracy_hi
    (row,) = verdicts[(verdicts.eps == 10.0) & (verdicts.rho == 0.5)].itertuples(index=False)
    assert row.dpadapter_vs_sam == pytest.approx(0.05) and row.dpadapter_vs_sam_lo > 0


def test_markdown_has_every_row_the_verdicts_and_the_papers_table1(table, verdicts):
    text = dpadapter_markdown(table, verdicts)
    for r in table.itertuples(index=False):
        assert (f"| {r.dataset} | {r.eps:g} | {r.pretraining} | {r.rho:g} | {r.accuracy:.3f} "
                f"[{r.accuracy_lo:.3f}, {r.accuracy_hi:.3f}] ({N_TEST} × 2) | {r.robust_accuracy:.3f} ") in text
    assert set(verdicts.pretrainings) == {1}  # two fine-tunings of one pre-training (seed 0) per arm
    for r in verdicts.itertuples(index=False):
        assert (f"| {r.dataset} | {r.eps:g} | {r.rho:g} | 1 | {r.dpadapter_vs_sam:+.3f} [{r.dpadapter_vs_sam_lo:+.3f}, "
                f"{r.dpadapter_vs_sam_hi:+.3f}] ({r.dpadapter_vs_sam_verdict}) | {r.sam_vs_standard:+.3f} "
                f"[{r.sam_vs_standard_lo:+.3f}, {r.sam_vs_standard_hi:+.3f}] ({r.sam_vs_standard_verdict}) "
                f"| {r.claim} |") in text
    for kind, (a, b) in PAPER_TABLE1.items():
        assert f"{kind} {a:.4f} / {b:.4f}" in text
    assert "std 0.05 on every weight" in text and "over 10 noise draws" in text
    assert "fewer than 3 independent pre-trainings per arm unresolved" in text
    assert text.count("\n| digits |") == len(table) + len(verdicts)


def test_a_setting_whose_repeats_decided_different_test_sets_is_refused(results):
    bad = results.copy()
    bad.loc[bad.index[0], ["n_test", "decisions"]] = [N_TEST - 8, pack_decisions(np.ones(N_TEST - 8, bool))]
    with pytest.raises(ValueError, match="different numbers of records"):
        dpadapter_verdicts(bad)
