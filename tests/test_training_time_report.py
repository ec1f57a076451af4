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

from privssl.attacks.repeated import proportion  # noqa: E402
from privssl.io import pack_decisions  # noqa: E402
from privssl.release.methods import KIND_LINESTYLE, TRAINING_TIME_METHODS  # noqa: E402
from privssl.reports.training_time_report import (  # noqa: E402
    PAPER_TABLE1,
    POST_HOC,
    accounting_markdown,
    figure,
)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    alpha = 1 - confidence
    lo = stats.beta.ppf(alpha / 2, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, k + 1, n - k) if k < n else 1.0
    return lo, hi


# The DPAdapter table, comparisons, verdicts and Markdown: tests/test_dpadapter_report.py.


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
N_MEMBERS = 100


@pytest.fixture(scope="module")
def frames() -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """utility.csv and mia.csv rows built from per-record 0/1 decisions, and those decisions:
    decided[(dataset, mechanism, ε, "test" | "attack")] is the (draws, records) array of a release."""
    rng = np.random.default_rng(0)
    utility, mia, decided = [], [], {}
    for dataset, n_test in N_TEST.items():
        clean = rng.random(n_test) < 0.9
        mechanisms = list(KINDS) if dataset == "digits" else ["alm", "dpcl"]
        for repeat in range(2):
            bits = rng.random(2 * N_MEMBERS) < 0.7
            mia.append({"dataset": dataset, "mechanism": "none", "eps": np.nan, "repeat": repeat,
                        "attack": "shadow_mlp", "adaptive": True, "accuracy": bits.mean(), "auc": 0.75,
                        "n_members": N_MEMBERS, "n_nonmembers": N_MEMBERS, "decisions": pack_decisions(bits)})
        for mechanism in mechanisms:
            post_hoc = mechanism not in TRAINING_TIME_METHODS  # training-time rows carry no clean decisions
            for eps in EPS:
                test = decided[(dataset, mechanism, eps, "test")] = rng.random((2, n_test)) < rng.uniform(0.3, 0.9)
                attack = decided[(dataset, mechanism, eps, "attack")] = rng.random((2, 2 * N_MEMBERS)) < 0.6
                kind = KINDS[mechanism]
                for repeat in range(2):
                    utility.append({"dataset": dataset, "mechanism": mechanism, "eps": eps, "delta": 1e-5,
                                    "repeat": repeat, "noise_scale": 1.0, "sensitivity_norm": "l2", "sensitivity": 1.0,
                                    "guarantee_kind": kind, "guarantee": f"{kind} at ε = {eps:g}",
                                    "clean_accuracy": clean.mean(), "accuracy": test[repeat].mean(),
                                    "utility_loss": 1 - test[repeat].mean() / clean.mean(), "n_test": n_test,
                                    "decisions": pack_decisions(test[repeat]),
                                    "clean_decisions": pack_decisions(clean) if post_hoc else np.nan,
                                    "best_clean_decisions": pack_decisions(clean) if post_hoc else np.nan})
                    # a reader of the wrong rows (not adaptive, another attack) would see the opposite decisions
                    for attack_name, adaptive, bits in (("shadow_mlp", True, attack[repeat]),
                                                        ("shadow_mlp", False, ~attack[repeat]),
                                                        ("confidence", True, ~attack[repeat])):
                        mia.append({"dataset": dataset, "mechanism": mechanism, "eps": eps, "repeat": repeat,
                                    "attack": attack_name, "adaptive": adaptive, "accuracy": bits.mean(),
                                    "auc": 0.6, "n_members": N_MEMBERS, "n_nonmembers": N_MEMBERS,
                                    "decisions": pack_decisions(bits)})
        # ε = ∞: a method's noise-free limit, not a release: never a point of the figure
        utility.append({**utility[-1], "eps": math.inf, "guarantee_kind": "none", "noise_scale": 0.0})
    return pd.DataFrame(utility), pd.DataFrame(mia), decided


def method_lines(ax) -> dict[str, object]:
    return {line.get_gid(): line for line in ax.get_lines() if line.get_gid() and ":" in line.get_gid()}


def band_edges(ax, gid: str) -> dict[float, tuple[float, float]]:
    """{ε: (lower, upper)} of the band drawn for the segment `gid` ('method:kind')."""
    (band,) = [c for c in ax.collections if c.get_gid() == f"band/{gid}"]
    vertices = np.concatenate([path.vertices for path in band.get_paths()])
    return {float(x): (float(vertices[vertices[:, 0] == x, 1].min()), float(vertices[vertices[:, 0] == x, 1].max()))
            for x in np.unique(vertices[:, 0])}


def test_figure_has_two_rows_per_dataset_and_a_line_per_shown_method(frames):
    utility, mia, _ = frames
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
        assert top.get_title().startswith(dataset)
        # what the band is, over how many records and draws
        assert f"band: 95 % CI, clustered by record,\n{N_TEST[dataset]} test records × 2 draws" in top.get_title()
        assert f"band: 95 % CI, clustered by record,\n{2 * N_MEMBERS} queried records × 2 draws" in bottom.get_title()
        assert set(method_lines(top)) == expected and set(method_lines(bottom)) == expected
        for gid, line in method_lines(top).items():
            assert line.get_linestyle() == KIND_LINESTYLE[gid.split(":")[1]]
    plt.close(fig)


def test_figure_draws_record_clustered_test_and_adaptive_mia_accuracies_and_dash_dots_dpcl(frames):
    utility, mia, decided = frames
    fig = figure(utility, mia, N_TEST)
    for col, dataset in enumerate(N_TEST):
        top, bottom = method_lines(fig.axes[col]), method_lines(fig.axes[len(N_TEST) + col])
        for panel, lines, what in ((fig.axes[col], top, "test"), (fig.axes[len(N_TEST) + col], bottom, "attack")):
            for gid, line in lines.items():
                mechanism = gid.split(":")[0]
                layouts = [decided[(dataset, mechanism, e, what)] for e in EPS]
                np.testing.assert_allclose(line.get_xdata(), EPS)  # ε = ∞ is no point
                np.testing.assert_allclose(line.get_ydata(), [layout.mean() for layout in layouts], rtol=1e-12)
                edges = band_edges(panel, gid)
                assert sorted(edges) == list(EPS)
                for eps, layout in zip(EPS, layouts):
                    reference = proportion(layout)
                    assert edges[eps] == pytest.approx((reference.lo, reference.hi))
        assert top["dpcl:heuristic_dp"].get_linestyle() == "-."
        assert bottom["dpcl:heuristic_dp"].get_linestyle() == "-."
        assert all(line.get_linestyle() != "-." for gid, line in top.items() if not gid.startswith("dpcl:"))
    plt.close(fig)


def test_figure_draws_each_methods_noise_free_limit_on_the_accuracy_panel_only(frames):
    utility, mia, _ = frames
    fig = figure(utility, mia, N_TEST)
    for col, dataset in enumerate(N_TEST):
        top, bottom = fig.axes[col], fig.axes[len(N_TEST) + col]
        limits = utility[(utility.dataset == dataset) & np.isinf(utility.eps)]
        drawn = {line.get_gid(): line.get_ydata()[0] for line in top.get_lines()
                 if (line.get_gid() or "").startswith("noise_free/")}
        assert drawn == {f"noise_free/{m}": pytest.approx(a) for m, a in zip(limits.mechanism, limits.accuracy)}
        assert not [line for line in bottom.get_lines() if (line.get_gid() or "").startswith("noise_free/")]
    plt.close(fig)


def test_figure_refuses_releases_that_decided_other_records_than_the_test_split(frames):
    utility, mia, _ = frames
    with pytest.raises(ValueError, match=r"digits: the releases decided \[300\] test records, its test split has 299"):
        figure(utility, mia, {**N_TEST, "digits": 299})


def test_a_training_time_run_at_eps_infinity_is_its_noise_free_limit_and_claims_nothing():
    """utility_rows: a run at ε = ∞ (σ = 0) is the method's noise-free limit, with no claim and no
    noise; one at a finite ε keeps its accountant's claim; a 'limit' trained with noise is refused."""
    from privssl.release.methods import NOISE_FREE
    from privssl.release.training_time import utility_rows

    about = {"sensitivity": 2.0, "sensitivity_statement": "gradient Δ = 2", "mechanisms": "the gradient",
             "sample_rate": 0.1, "steps": 10}
    runs = [{**about, "eps": 1.0, "repeat": 0, "correct": [True, False, True, True], "noise_multiplier": 1.3,
             "eps_spent": 0.98},
            {**about, "eps": math.inf, "repeat": 0, "correct": [True, True, True, False], "noise_multiplier": 0.0,
             "eps_spent": math.inf}]
    rows = utility_rows("digits", "dpadapter", runs, 1e-5, clean_accuracy=0.8)
    private, limit = rows.iloc[0], rows.iloc[1]
    assert (private.guarantee_kind, limit.guarantee_kind) == ("approx_dp", "none")
    assert private.guarantee.startswith("(0.98, 1e-05)-DP") and limit.guarantee == NOISE_FREE
    assert (limit.eps, limit.noise_scale, limit.accuracy) == (math.inf, 0.0, 0.75)
    assert limit.utility_loss == pytest.approx(1 - 0.75 / 0.8)
    with pytest.raises(ValueError, match="a noise-free run"):
        utility_rows("digits", "dpadapter", [{**runs[1], "noise_multiplier": 0.5}], 1e-5, clean_accuracy=0.8)
