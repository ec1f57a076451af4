"""The training-time report (privssl.reports.training_time_report) from small synthetic frames: pooled
accuracies and their Clopper–Pearson intervals against SciPy, the DPAdapter table's rows and
order, the verdicts on the paper's ordering in all three cases, the Markdown tables, and the
figure's panels and lines."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from scipy import stats  # noqa: E402

from privssl.attacks.statistics import accuracy_interval  # noqa: E402
from privssl.release.methods import KIND_LINESTYLE, TRAINING_TIME_METHODS  # noqa: E402
from privssl.reports.training_time_report import (  # noqa: E402
    PAPER_TABLE1,
    POST_HOC,
    accounting_markdown,
    dpadapter_markdown,
    dpadapter_table,
    dpadapter_verdicts,
    figure,
    pooled_test_accuracy,
)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    alpha = 1 - confidence
    lo = stats.beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    return lo, hi


# --------------------------------------------------------------------------- pooled_test_accuracy


@pytest.mark.parametrize("counts, n_test", [([150, 160, 170], 300), ([0, 0], 50), ([50, 50], 50), ([7], 10)])
def test_pooled_test_accuracy_is_the_clopper_pearson_interval_of_the_pooled_counts(counts, n_test):
    rows = pd.DataFrame({"accuracy": [c / n_test for c in counts]})
    pooled = pooled_test_accuracy(rows, n_test)
    k, n = sum(counts), n_test * len(counts)
    assert pooled["decisions"] == n
    assert pooled["mean"] == pytest.approx(k / n, rel=1e-15)
    lo, hi = clopper_pearson(k, n)
    assert (pooled["lo"], pooled["hi"]) == pytest.approx((lo, hi), rel=1e-12, abs=1e-15)
    assert (pooled["mean"], pooled["lo"], pooled["hi"]) == accuracy_interval(k, n)


# --------------------------------------------------------------------------- DPAdapter table and verdicts

RADII = (0.05, 0.5)


def dpadapter_results(accuracy: dict, n_test: int = 2000, repeats: int = 2) -> pd.DataFrame:
    """Results rows as scripts/dpadapter_train.py writes them; accuracy[(dataset, kind, rho, eps)]
    is each repeat's accuracy (repeat r gets +r/n_test, so pooling is visible)."""
    rows = []
    for (dataset, kind, rho, eps), acc in accuracy.items():
        for repeat in range(repeats):
            rows.append({"dataset": dataset, "pretraining": kind, "rho": rho, "eps": eps, "repeat": repeat,
                         "accuracy": acc + repeat / n_test, "n_test": n_test,
                         "robust_accuracy": acc - 0.1 + 0.01 * repeat, "pretrain_accuracy": acc + 0.05,
                         "pretrain_robust_accuracy": acc - 0.02, "robust_noise": 0.05, "robust_draws": 10,
                         "noise_multiplier": 10.0 / eps, "eps_spent": 0.999 * eps})
    frame = pd.DataFrame(rows)
    return frame.sample(frac=1.0, random_state=0).reset_index(drop=True)  # the table must not rely on row order


def grid(values: dict) -> dict:
    """{(dataset, eps): (standard, {rho: sam}, {rho: dpadapter})} -> the accuracy dict."""
    out = {}
    for (dataset, eps), (standard, sam, adapter) in values.items():
        out[(dataset, "standard", 0.0, eps)] = standard
        for rho in RADII:
            out[(dataset, "sam", rho, eps)] = sam[rho]
            out[(dataset, "dpadapter", rho, eps)] = adapter[rho]
    return out


VALUES = {
    # ε = 1: at ρ = 0.05 the paper's order, clearly; at ρ = 0.5 DPAdapter ≈ SAM
    ("digits", 1.0): (0.60, {0.05: 0.70, 0.5: 0.70}, {0.05: 0.80, 0.5: 0.705}),
    # ε = 10: at ρ = 0.05 DPAdapter below SAM; at ρ = 0.5 SAM below standard
    ("digits", 10.0): (0.70, {0.05: 0.80, 0.5: 0.60}, {0.05: 0.70, 0.5: 0.90}),
    # ε = 100: everything within the noise
    ("digits", 100.0): (0.75, {0.05: 0.755, 0.5: 0.75}, {0.05: 0.76, 0.5: 0.745}),
    # ε = 1000: DPAdapter's mean outside SAM's interval, but the intervals overlap
    ("digits", 1000.0): (0.70, {0.05: 0.70, 0.5: 0.70}, {0.05: 0.72, 0.5: 0.68}),
    ("cifar10", 1.0): (0.30, {0.05: 0.40, 0.5: 0.40}, {0.05: 0.50, 0.5: 0.50}),
}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return dpadapter_table(dpadapter_results(grid(VALUES)))


def test_dpadapter_table_pools_repeats_one_row_per_setting_in_the_papers_order(table):
    results = dpadapter_results(grid(VALUES))
    assert len(table) == len(grid(VALUES))
    keys = list(zip(table.dataset, table.pretraining, table.rho, table.eps))
    assert len(set(keys)) == len(keys) and set(keys) == set(grid(VALUES))
    order = [(d, e) for d, e in zip(table.dataset, table.eps)]
    assert order == sorted(order)  # by dataset, then ε
    for (dataset, eps), group in table.groupby(["dataset", "eps"], sort=False):
        assert list(zip(group.pretraining, group.rho)) == [("standard", 0.0), ("sam", 0.05), ("sam", 0.5),
                                                           ("dpadapter", 0.05), ("dpadapter", 0.5)]
    for row in table.itertuples(index=False):
        draws = results[(results.dataset == row.dataset) & (results.pretraining == row.pretraining)
                        & (results.rho == row.rho) & (results.eps == row.eps)]
        k = int(round((draws.accuracy * 2000).sum()))
        assert row.decisions == 4000 and row.repeats == 2
        assert row.accuracy == pytest.approx(k / 4000, rel=1e-14)
        assert (row.accuracy_lo, row.accuracy_hi) == pytest.approx(clopper_pearson(k, 4000), rel=1e-12)
        assert row.robust_accuracy == pytest.approx(draws.robust_accuracy.mean(), rel=1e-14)
        assert row.pretrain_accuracy == draws.pretrain_accuracy.iloc[0]
        assert row.pretrain_robust_accuracy == draws.pretrain_robust_accuracy.iloc[0]
        # robust intervals: test records × noise draws (× repeats downstream) as decisions
        k_robust = int(round((draws.robust_accuracy * 2000 * 10).sum()))
        assert (row.robust_lo, row.robust_hi) == pytest.approx(clopper_pearson(k_robust, 2 * 2000 * 10), rel=1e-12)
        k_pre = int(round(draws.pretrain_robust_accuracy.iloc[0] * 2000 * 10))
        assert (row.pretrain_robust_lo, row.pretrain_robust_hi) == pytest.approx(clopper_pearson(k_pre, 2000 * 10),
                                                                                 rel=1e-12)
        assert row.noise_multiplier == pytest.approx(10.0 / row.eps) and row.robust_noise == 0.05


def expected_claim(table: pd.DataFrame, dataset: str, eps: float, rho: float) -> tuple[str, str, str]:
    """The comparisons from scratch: '>' / '<' only where the 95 % intervals are disjoint."""
    def row(kind, r):
        sel = table[(table.dataset == dataset) & (table.eps == eps) & (table.pretraining == kind) & (table.rho == r)]
        assert len(sel) == 1
        return sel.iloc[0]

    def compare(a, b):
        return ">" if a.accuracy_lo > b.accuracy_hi else "<" if a.accuracy_hi < b.accuracy_lo else "≈"

    first, second = compare(row("dpadapter", rho), row("sam", rho)), compare(row("sam", rho), row("standard", 0.0))
    claim = "contradicted" if "<" in (first, second) else "shown" if first == second == ">" else "not resolved"
    return first, second, claim


def test_dpadapter_verdicts_shown_contradicted_and_not_resolved(table):
    verdicts = dpadapter_verdicts(table)
    assert len(verdicts) == sum(len(RADII) for _ in VALUES)
    got = {(r.dataset, r.eps, r.rho): (r.dpadapter_vs_sam, r.sam_vs_standard, r.claim)
           for r in verdicts.itertuples(index=False)}
    for (dataset, eps, rho), (first, second, claim) in got.items():
        want = expected_claim(table, dataset, eps, rho)
        assert (first, second) == want[:2] and claim.startswith(want[2])
    assert got[("digits", 1.0, 0.05)] == (">", ">", "shown")
    assert got[("digits", 1.0, 0.5)][:2] == ("≈", ">") and got[("digits", 1.0, 0.5)][2].startswith("not resolved")
    assert got[("digits", 10.0, 0.05)][:2] == ("<", ">") and got[("digits", 10.0, 0.05)][2] == "contradicted"
    assert got[("digits", 10.0, 0.5)][:2] == (">", "<") and got[("digits", 10.0, 0.5)][2] == "contradicted"
    assert got[("digits", 100.0, 0.05)][2].startswith("not resolved")
    for rho in RADII:
        assert got[("digits", 1000.0, rho)][:2] == ("≈", "≈")
    assert got[("cifar10", 1.0, 0.5)][2] == "shown"


def test_dpadapter_markdown_has_every_row_the_verdicts_and_the_papers_table1(table):
    verdicts = dpadapter_verdicts(table)
    text = dpadapter_markdown(table, verdicts)
    for r in table.itertuples(index=False):
        assert (f"| {r.dataset} | {r.eps:g} | {r.pretraining} | {r.rho:g} | {r.accuracy:.3f} "
                f"[{r.accuracy_lo:.3f}, {r.accuracy_hi:.3f}] ({r.decisions}) | {r.robust_accuracy:.3f} ") in text
    for r in verdicts.itertuples(index=False):
        assert (f"| {r.dataset} | {r.eps:g} | {r.rho:g} | {r.dpadapter_vs_sam} | {r.sam_vs_standard} "
                f"| {r.claim} |") in text
    for number in ("0.5677", "0.7292", "0.5961", "0.7625", "0.6142", "0.7709"):
        assert number in text
    assert "std 0.05 on every weight" in text


def test_paper_table1_is_the_mean_of_the_papers_three_datasets():
    """DPAdapter Table 1, DP-SGD rows: (CIFAR-10, SVHN, STL-10) at the two budgets."""
    per_dataset = {"standard": ((0.5928, 0.7822, 0.3282), (0.7210, 0.8970, 0.5695)),
                   "sam": ((0.6216, 0.8042, 0.3625), (0.7650, 0.9014, 0.6212)),
                   "dpadapter": ((0.6416, 0.8058, 0.3951), (0.7746, 0.9018, 0.6364))}
    assert list(PAPER_TABLE1) == ["standard", "sam", "dpadapter"]
    for kind, budgets in per_dataset.items():
        assert PAPER_TABLE1[kind] == pytest.approx(tuple(np.mean(b) for b in budgets), abs=6e-5)


def test_accounting_markdown_lists_our_rows_and_the_paper_settings():
    ours = pd.DataFrame([
        {"dataset": "digits", "method": "dpcl", "role": "target", "n": 150, "eps_target": 10.0,
         "noise_multiplier": 1.23456, "mechanisms": "gradient, similarity", "encoder_steps": 6, "encoder_batch": 50,
         "head_steps": 60, "head_batch": 50, "eps_rdp_without_replacement": 9.9912, "eps_pld_poisson": 7.25,
         "guarantee_kind": "heuristic_dp",
         "sensitivities": "gradient 4C; similarity 4√(2|B| − 1)"},
        {"dataset": "digits", "method": "dpcl_naive", "role": "shadow", "n": 150, "eps_target": math.nan,
         "noise_multiplier": 0.75, "mechanisms": "gradient", "encoder_steps": 6, "encoder_batch": 50,
         "head_steps": 60, "head_batch": 50, "eps_rdp_without_replacement": 123.4, "eps_pld_poisson": 31.5,
         "guarantee_kind": "approx_dp",
         "sensitivities": "gradient 4|B|C"}])
    paper = pd.DataFrame([{"objective": "simclr", "variant": "dpcl", "epochs": 200,
                           "eps_rdp_without_replacement": 123456.7, "eps_pld_poisson": 27.447,
                           "noise_multipliers": "0.41; 0.41"}])
    text = accounting_markdown(ours, paper)
    assert ("| digits | dpcl | target | 150 | 10 | 1.235 | gradient, similarity | 6 (50) | 60 (50) | 9.991 | 7.25 "
            "| heuristic_dp | gradient 4C; similarity 4√(2∣B∣ − 1) |") in text
    assert "| digits | dpcl_naive | shadow | 150 | — | 0.75 | gradient | 6 (50) | 60 (50) | 123.4 | 31.5 | approx_dp " \
           "| gradient 4∣B∣C |" in text  # '|' inside a cell would split it
    assert "| ε, RDP, without replacement (the claim) | ε, PLD, Poisson analogue |" in text
    assert ("| objective | variant | epochs | eps_rdp_without_replacement | eps_pld_poisson "
            "| noise_multipliers |") in text
    assert "| simclr | dpcl | 200 | 1.235e+05 | 27.45 | 0.41; 0.41 |" in text
    assert "Neither is a lower bound" in text and "as the mechanisms' privacy loss" in text


# --------------------------------------------------------------------------- figure

KINDS = {"alm": "random_dp", "certified_gaussian": "approx_dp", "dpsgd": "approx_dp", "laplace": "random_dp",
         "dpcl_naive": "approx_dp", "dpcl": "heuristic_dp", "dpadapter": "approx_dp"}
EPS = (1.0, 10.0, 100.0)
N_TEST = {"digits": 300, "cifar10": 200}


@pytest.fixture(scope="module")
def frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    utility, mia = [], []
    for dataset, n_test in N_TEST.items():
        mechanisms = list(KINDS) if dataset == "digits" else ["alm", "dpcl"]
        for repeat in range(2):
            mia.append({"dataset": dataset, "mechanism": "none", "eps": np.nan, "repeat": repeat,
                        "attack": "shadow_mlp", "adaptive": True, "accuracy": 0.7, "auc": 0.75,
                        "n_members": 100, "n_nonmembers": 100})
        for mechanism in mechanisms:
            for eps in EPS:
                for repeat in range(2):
                    correct = int(rng.integers(n_test // 3, n_test))
                    kind = KINDS[mechanism]
                    utility.append({"dataset": dataset, "mechanism": mechanism, "eps": eps, "delta": 1e-5,
                                    "repeat": repeat, "noise_scale": 1.0, "sensitivity_norm": "l2", "sensitivity": 1.0,
                                    "guarantee_kind": kind, "guarantee": f"{kind} at ε = {eps:g}",
                                    "clean_accuracy": 0.9, "accuracy": correct / n_test,
                                    "utility_loss": 1 - correct / n_test / 0.9})
                    for adaptive, offset in ((True, 0), (False, 40)):  # a reader of the wrong rows would be seen
                        hits = int(rng.integers(100, 140)) + offset
                        mia.append({"dataset": dataset, "mechanism": mechanism, "eps": eps, "repeat": repeat,
                                    "attack": "shadow_mlp", "adaptive": adaptive, "accuracy": hits / 200,
                                    "auc": 0.6, "n_members": 100, "n_nonmembers": 100})
                    mia.append({"dataset": dataset, "mechanism": mechanism, "eps": eps, "repeat": repeat,
                                "attack": "confidence", "adaptive": True, "accuracy": 0.99, "auc": 0.99,
                                "n_members": 100, "n_nonmembers": 100})
    return pd.DataFrame(utility), pd.DataFrame(mia)


def method_lines(ax) -> dict[str, object]:
    return {line.get_gid(): line for line in ax.get_lines() if line.get_gid() and ":" in line.get_gid()}


def test_figure_has_two_rows_per_dataset_and_a_line_per_shown_method(frames):
    utility, mia = frames
    fig = figure(utility, mia, N_TEST)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2 * len(N_TEST)
    assert all(ax.get_subplotspec().get_gridspec().get_geometry() == (2, 2) for ax in fig.axes)
    shown = set(POST_HOC) | set(TRAINING_TIME_METHODS)
    assert "laplace" not in shown and {"dpcl", "dpcl_naive", "dpadapter"} <= shown
    for col, dataset in enumerate(N_TEST):
        present = sorted(set(utility[utility.dataset == dataset].mechanism) & shown)
        expected = {f"{m}:{KINDS[m]}" for m in present}
        top, bottom = fig.axes[col], fig.axes[len(N_TEST) + col]
        assert dataset in top.get_title()
        assert set(method_lines(top)) == expected and set(method_lines(bottom)) == expected
        for gid, line in method_lines(top).items():
            assert line.get_linestyle() == KIND_LINESTYLE[gid.split(":")[1]]
    plt.close(fig)


def test_figure_draws_pooled_test_and_adaptive_mia_accuracies_and_dash_dots_dpcl(frames):
    utility, mia = frames
    fig = figure(utility, mia, N_TEST)
    for col, dataset in enumerate(N_TEST):
        top, bottom = method_lines(fig.axes[col]), method_lines(fig.axes[len(N_TEST) + col])
        for gid, line in top.items():
            mechanism = gid.split(":")[0]
            rows = utility[(utility.dataset == dataset) & (utility.mechanism == mechanism)]
            expected = [round((rows[rows.eps == e].accuracy * N_TEST[dataset]).sum()) / (2 * N_TEST[dataset])
                        for e in EPS]
            np.testing.assert_allclose(line.get_xdata(), EPS)
            np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-12)
        for gid, line in bottom.items():
            mechanism = gid.split(":")[0]
            rows = mia[(mia.dataset == dataset) & (mia.mechanism == mechanism) & (mia.attack == "shadow_mlp")
                       & mia.adaptive]
            expected = [(rows[rows.eps == e].accuracy * 200).round().sum() / 400 for e in EPS]
            np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-12)
        assert top["dpcl:heuristic_dp"].get_linestyle() == "-."
        assert bottom["dpcl:heuristic_dp"].get_linestyle() == "-."
        assert all(line.get_linestyle() != "-." for gid, line in top.items() if not gid.startswith("dpcl:"))
    plt.close(fig)
