"""Fig. 1-3 and Table 2 from small synthetic tidy CSVs: line styles follow the guarantee kinds,
Table 2 picks the nearest ε in log distance and its means match a direct computation."""

import os
import re
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from privssl.release.methods import KIND_LINESTYLE  # noqa: E402
from privssl.reports.plotting import figure1, figure2, figure3, graph_protection_figure, kind_runs, save_figure  # noqa: E402
from privssl.reports.release_table import TABLE2_COLUMNS, markdown, nearest_eps, table2  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GRID = [0.1, 0.3, 1.0, 3.0, 10.0]
DATASETS = ("digits", "cifar")
REPEATS = 3
CLEAN = {"digits": 0.9, "cifar": 0.6}


def kind_of(method: str, eps: float) -> str:
    """Kinds as the registry gives them: the classical Gaussian loses its proof at ε ≥ 1."""
    if method == "gaussian":
        return "random_dp" if eps < 1 else "none"
    return {"alm": "random_dp", "certified_pure": "pure_dp", "dpsgd": "approx_dp"}[method]


def grid_of(method: str) -> list[float]:
    return [e for e in GRID if e != 3.0] if method == "dpsgd" else GRID  # DP-SGD lacks ε = 3


@pytest.fixture(scope="module")
def frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    utility, mia = [], []
    for dataset in DATASETS:
        clean = CLEAN[dataset]
        for repeat in range(REPEATS):
            mia.append({"dataset": dataset, "mechanism": "none", "eps": np.nan, "repeat": repeat,
                        "attack": "shadow_mlp", "adaptive": True, "n_members": 150, "n_nonmembers": 150,
                        "accuracy": 0.7 + 0.01 * repeat, "auc": 0.75})
        for method in ("alm", "gaussian", "certified_pure", "dpsgd"):
            for eps in grid_of(method):
                for repeat in range(REPEATS):
                    acc = clean * (1 - 0.5 / (1 + eps)) + rng.normal(0, 0.01)
                    kind = kind_of(method, eps)
                    utility.append({"dataset": dataset, "mechanism": method, "eps": eps, "delta": 1e-5,
                                    "repeat": repeat, "noise_scale": 1.0 / eps, "sensitivity_norm": "l2",
                                    "sensitivity": 1.0, "guarantee_kind": kind, "guarantee": f"{kind} at ε = {eps:g}",
                                    "clean_accuracy": clean, "accuracy": acc, "utility_loss": 1 - acc / clean})
                    for attack, shift in (("shadow_mlp", 0.0), ("confidence", 0.05)):
                        # the non-adaptive rows are 0.1 off, so a reader that used them would be seen
                        for adaptive, offset in ((True, 0.0), (False, 0.1)):
                            attack_acc = 0.5 + shift + offset + 0.02 * np.log10(eps) + rng.normal(0, 0.01)
                            mia.append({"dataset": dataset, "mechanism": method, "eps": eps, "repeat": repeat,
                                        "attack": attack, "adaptive": adaptive, "n_members": 150,
                                        "n_nonmembers": 150, "accuracy": attack_acc,
                                        "auc": 0.55 + shift + offset + rng.normal(0, 0.01)})
    mia = pd.DataFrame(mia)
    for metric in ("accuracy", "auc"):  # intervals as the attack rule writes them (their width does not matter here)
        mia[f"{metric}_lo"], mia[f"{metric}_hi"] = (mia[metric] - 0.05).clip(0, 1), (mia[metric] + 0.05).clip(0, 1)
    return pd.DataFrame(utility), mia


def segments(ax) -> dict[str, list]:
    """The drawn method segments of an axes: gid 'method:kind' -> [(linestyle, x data), ...]."""
    found = {}
    for line in ax.get_lines():
        if line.get_gid() and ":" in line.get_gid():
            found.setdefault(line.get_gid(), []).append((line.get_linestyle(), list(line.get_xdata())))
    return found


def assert_styles_follow_kinds(ax) -> None:
    drawn = segments(ax)
    assert {g.split(":")[0] for g in drawn} == {"alm", "gaussian", "certified_pure", "dpsgd"}
    for gid, lines in drawn.items():
        method, kind = gid.split(":")
        for style, xs in lines:
            assert style == KIND_LINESTYLE[kind]
            assert all(kind_of(method, x) == kind for x in xs)
    # The classical Gaussian changes kind at ε = 1: two segments, dashed then dotted.
    assert drawn["gaussian:random_dp"] == [("--", [0.1, 0.3])]
    assert drawn["gaussian:none"] == [(":", [1.0, 3.0, 10.0])]
    assert drawn["dpsgd:approx_dp"] == [("-", [0.1, 0.3, 1.0, 10.0])]


def test_kind_runs_split_consecutive_kinds():
    assert kind_runs(["a", "a", "b", "a"]) == [("a", slice(0, 2)), ("b", slice(2, 3)), ("a", slice(3, 4))]
    assert kind_runs([]) == []


def test_figure1_line_styles_follow_guarantee_kinds(frames):
    utility, _ = frames
    fig = figure1(utility)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == list(DATASETS)
    for ax in axes:
        assert ax.get_xscale() == "log"
        assert_styles_follow_kinds(ax)
    key = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert any("random DP" in t for t in key) and any("no guarantee" in t for t in key)
    save_figure(fig, [])


def test_figure2_joins_kinds_and_draws_references(frames):
    utility, mia = frames
    fig = figure2(utility, mia)
    top, bottom = fig.axes[0], fig.axes[len(DATASETS)]  # row-major: the first dataset's two panels
    assert_styles_follow_kinds(top)
    assert {g for g in segments(bottom)} == set(segments(top))
    unprotected = [line for line in top.get_lines() if line.get_gid() == "unprotected"]
    expected = mia[(mia.dataset == "digits") & (mia.mechanism == "none") & (mia.attack == "shadow_mlp")].accuracy.mean()
    assert unprotected and unprotected[0].get_ydata()[0] == pytest.approx(expected)
    assert any(line.get_gid() == "chance" and line.get_ydata()[0] == 0.5 for line in top.get_lines())
    save_figure(fig, [])


def test_figure2_rejects_mia_rows_without_a_release(frames):
    utility, mia = frames
    with pytest.raises(ValueError, match="utility.csv lacks"):
        figure2(utility[utility.mechanism != "alm"], mia)


def test_figure3_reference_line_at_clean_accuracy(frames, tmp_path):
    utility, _ = frames
    fig = figure3(utility)
    for ax, dataset in zip(fig.axes, DATASETS):
        assert_styles_follow_kinds(ax)
        reference = [line for line in ax.get_lines() if line.get_gid() == "non_private"]
        assert len(reference) == 1 and reference[0].get_ydata()[0] == pytest.approx(CLEAN[dataset])
        mean = utility[(utility.dataset == dataset) & (utility.mechanism == "alm")].groupby("eps").accuracy.mean()
        (_, xs), = segments(ax)["alm:random_dp"]
        (alm,) = [line for line in ax.get_lines() if line.get_gid() == "alm:random_dp"]
        np.testing.assert_allclose(alm.get_ydata(), mean.loc[xs].to_numpy())
    paths = [tmp_path / "fig3.png", tmp_path / "fig3.pdf"]
    save_figure(fig, paths)
    assert all(p.stat().st_size > 0 for p in paths)


def test_graph_protection_figure_uses_registry_and_kinds(frames):
    utility, mia = frames
    links = pd.DataFrame([{"dataset": d, "mechanism": m, "eps": e, "attack": "attack-3", "distance": np.nan, "auc": 0.6}
                          for d in DATASETS for m, e in (("none", np.nan), ("alm", 1.0), ("alm", 10.0))])
    fig = graph_protection_figure(utility, mia, links)
    assert_styles_follow_kinds(fig.axes[0])
    save_figure(fig, [])


def test_nearest_eps_in_log_distance():
    assert nearest_eps([0.1, 3, 30], 1) == 3  # |log 3| = 0.48 < |log 0.1| = 1
    assert nearest_eps([0.1, 3, 30], 10) == 30  # |log 3| = 0.48 < |log 0.3| = 0.52
    assert nearest_eps([0.1, 10], 1) == 0.1  # a tie goes to the more private ε
    with pytest.raises(ValueError):
        nearest_eps([], 1)


def test_table2_matches_direct_computation(frames):
    utility, mia = frames
    table = table2(utility, mia, targets=(1, 2.5))
    assert list(table.columns) == TABLE2_COLUMNS
    # per dataset: the non-private head, then 4 methods at each of the 2 targets
    assert len(table) == len(DATASETS) * (1 + 2 * 4)
    none = table[(table.dataset == "cifar") & (table.method == "none")].iloc[0]
    assert none.accuracy_mean == pytest.approx(CLEAN["cifar"])
    shadow_none = mia[(mia.dataset == "cifar") & (mia.mechanism == "none") & (mia.attack == "shadow_mlp")]
    assert none.mia_accuracy == pytest.approx(shadow_none.accuracy.mean())
    for row in table[table.method != "none"].itertuples():
        # ε = 2.5 is nearest to 3 in log distance; DP-SGD has no 3, so it takes 1 (|log 2.5| < |log 4|)
        expected_eps = {1: 1.0, 2.5: 1.0 if row.method == "dpsgd" else 3.0}[row.eps_target]
        assert row.eps == expected_eps
        draws = utility[(utility.dataset == row.dataset) & (utility.mechanism == row.method) & (utility.eps == row.eps)]
        attacks = mia[(mia.dataset == row.dataset) & (mia.mechanism == row.method) & (mia.eps == row.eps)
                      & (mia.attack == "shadow_mlp") & mia.adaptive]
        assert row.accuracy_mean == pytest.approx(np.mean(draws.accuracy))
        assert row.accuracy_std == pytest.approx(np.std(draws.accuracy, ddof=1))
        assert row.utility_loss_mean == pytest.approx(np.mean(draws.utility_loss))
        # pooled over the draws' decisions (300 each): the mean up to rounding to whole decisions,
        # with the Clopper–Pearson interval of the pooled count
        decisions = 300 * REPEATS
        correct = round(float(np.sum(attacks.accuracy * 300)))
        assert row.mia_decisions == decisions
        assert row.mia_accuracy == pytest.approx(np.mean(attacks.accuracy), abs=0.5 / decisions)
        assert row.mia_accuracy_lo == pytest.approx(stats.beta.ppf(0.025, correct, decisions - correct + 1))
        assert row.mia_accuracy_hi == pytest.approx(stats.beta.ppf(0.975, correct + 1, decisions - correct))
        assert row.mia_auc_mean == pytest.approx(np.mean(attacks.auc))
        assert row.guarantee_kind == kind_of(row.method, row.eps)
        assert row.n_draws == REPEATS
    md = markdown(table)
    assert md.count("\n| digits |") == 1 + 2 * 4 and "random_dp" in md
    # a | inside a label or a claim ("4|B|C", "|d|") is escaped: every row has the header's cells
    labelled = table.assign(label=table.label + " (Δg = 4|B|C)", guarantee=table.guarantee + "; |d| fixed")
    rows = [line for line in markdown(labelled).splitlines() if line.startswith("|")]
    assert {len(re.split(r"(?<!\\)\|", line)) for line in rows} == {len(re.split(r"(?<!\\)\|", rows[0]))}


@pytest.mark.parametrize("break_input, message", [
    (lambda u, m: (u.iloc[:0], m), "utility.csv has no rows"),
    (lambda u, m: (u.drop(columns="guarantee_kind"), m), "lacks the column"),
    (lambda u, m: (u[u.dataset == "digits"], m), "differ from mia.csv datasets"),
    (lambda u, m: (u, m[m.mechanism != "none"]), "non-private head"),
    (lambda u, m: (u[~((u.mechanism == "alm") & (u.eps == 1.0))], m), "utility.csv lacks"),
    (lambda u, m: (u.assign(guarantee_kind="proven"), m), "unknown guarantee_kind"),
])
def test_table2_rejects_empty_or_mismatched_input(frames, break_input, message):
    with pytest.raises(ValueError, match=message):
        table2(*break_input(*frames))


def test_make_table2_script_writes_csv_and_md(frames, tmp_path):
    utility, mia = frames
    paths = {}
    for dataset in DATASETS:
        for name, frame in (("utility", utility), ("mia", mia)):
            paths.setdefault(name, []).append(str(tmp_path / f"{dataset}_{name}.csv"))
            frame[frame.dataset == dataset].to_csv(paths[name][-1], index=False)
    csv, md = tmp_path / "tables" / "table2.csv", tmp_path / "tables" / "table2.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_table2.py"), "--utility", *paths["utility"],
                    "--mia", *paths["mia"], "--csv", str(csv), "--md", str(md)], check=True, env=env)
    table = pd.read_csv(csv)
    assert list(table.columns) == TABLE2_COLUMNS
    assert sorted(table.eps_target.dropna().unique()) == [1.0, 10.0]
    assert "| digits |" in md.read_text() and "Guarantee kinds" in md.read_text()
    assert sorted(p.name for p in csv.parent.iterdir()) == ["table2.csv", "table2.md"]  # no temporary left


def test_plot_figures_script_writes_three_figures(frames, tmp_path, monkeypatch):
    # In-process (runpy): the script's own argument handling, without a second interpreter start.
    import runpy

    utility, mia = frames
    utility.to_csv(tmp_path / "utility.csv", index=False)
    mia.to_csv(tmp_path / "mia.csv", index=False)
    outputs = [tmp_path / f"fig{i}.png" for i in (1, 2, 3)]
    monkeypatch.setattr(sys, "argv", ["plot_figures.py", "--utility", str(tmp_path / "utility.csv"),
                                      "--mia", str(tmp_path / "mia.csv"), "--fig1", str(outputs[0]),
                                      "--fig2", str(outputs[1]), "--fig3", str(outputs[2])])
    runpy.run_path(str(ROOT / "scripts" / "plot_figures.py"), run_name="__main__")
    assert all(p.stat().st_size > 0 for p in outputs)


def test_each_methods_noise_free_limit_is_a_dotted_line_not_a_point_of_its_curve(frames):
    utility, _ = frames
    limits = {"alm": 0.81, "dpsgd": 0.62}  # the ε = ∞ rows the protect rules add: no noise, no claim
    rows = [{**utility.iloc[0].to_dict(), "mechanism": m, "eps": np.inf, "repeat": r, "noise_scale": 0.0,
             "guarantee_kind": "none", "accuracy": a + 0.01 * r, "utility_loss": 1 - (a + 0.01 * r) / 0.9}
            for m, a in limits.items() for r in range(REPEATS)]
    with_limits = pd.concat([utility, pd.DataFrame(rows)], ignore_index=True)
    dataset = utility.iloc[0].dataset
    for figure, column in ((figure3, "accuracy"), (figure1, "utility_loss")):
        ax = figure(with_limits).axes[DATASETS.index(dataset)]
        assert_styles_follow_kinds(ax)  # the curves are the finite ε only
        drawn = {line.get_gid(): line.get_ydata()[0] for line in ax.get_lines()
                 if str(line.get_gid()).startswith("noise_free/")}
        expected = pd.DataFrame(rows).groupby("mechanism")[column].mean()
        assert drawn == pytest.approx({f"noise_free/{m}": expected[m] for m in limits})


def test_table2_reads_releases_only_not_the_noise_free_limits(frames):
    utility, mia = frames
    limit = utility[utility.mechanism == "alm"].assign(eps=np.inf, noise_scale=0.0, guarantee_kind="none",
                                                       accuracy=0.99)
    with_limits = pd.concat([utility, limit], ignore_index=True)
    targets = (1.0, 1e6)
    pd.testing.assert_frame_equal(table2(with_limits, mia, targets=targets), table2(utility, mia, targets=targets))
