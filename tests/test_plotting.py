"""Fig. 1-3, the graph-protection figure and Table 2 from small synthetic tidy CSVs built from
known per-record 0/1 decisions: line styles follow the guarantee kinds, every release method
(training-time ones included) gets its 95 % interval clustered by record as a band, Table 2 picks
the nearest ε in log distance, and its values match a plain computation on the 0/1 arrays (the
intervals match privssl.attacks.repeated on the stacked arrays; draws that are identical copies
give the single-draw interval, not the pooled one)."""

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402
from scored_files import write_mia  # noqa: E402
from warm_scripts import script_python  # noqa: E402

from privssl.attacks.repeated import paired_ratio, proportion  # noqa: E402
from privssl.io import pack_decisions  # noqa: E402
from privssl.release.methods import KIND_LINESTYLE  # noqa: E402
from privssl.reports.plotting import figure1, figure2, figure3, graph_protection_figure, kind_runs, save_figure  # noqa: E402
from privssl.reports.release_table import TABLE2_COLUMNS, markdown, nearest_eps, table2  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GRID = [0.1, 0.3, 1.0, 3.0, 10.0]
DATASETS = ("digits", "cifar")
REPEATS = 3
N_TEST, N_MEMBERS = 60, 30  # per draw: test records; members (= non-members) queried by the attack
CLEAN_RATE = {"digits": 0.9, "cifar": 0.6}
SHOWN = ("alm", "gaussian", "certified_pure", "dpsgd", "dpcl")  # dpcl: a training-time release
COPIES = "certified_pure"  # its draws are identical copies of one draw (same decisions on every record)


def kind_of(method: str, eps: float) -> str:
    """Kinds as the registry gives them: the classical Gaussian loses its proof at ε ≥ 1."""
    if method == "gaussian":
        return "random_dp" if eps < 1 else "none"
    return {"alm": "random_dp", "certified_pure": "pure_dp", "dpsgd": "approx_dp", "dpcl": "heuristic_dp"}[method]


def grid_of(method: str) -> list[float]:
    return [e for e in GRID if e != 3.0] if method == "dpsgd" else GRID  # DP-SGD lacks ε = 3


@dataclass
class Frames:
    """The tables the figures read, and the 0/1 arrays they were built from (draws × records)."""

    utility: pd.DataFrame
    mia: pd.DataFrame
    clean: dict  # dataset -> the non-private head's decisions on the test records
    test: dict  # (dataset, method, ε) -> the release's decisions on the test records
    attack: dict  # (dataset, method, ε) -> the adaptive shadow-MLP attack's decisions; method "none": ε None
    auc: dict  # (dataset, method, ε) -> the adaptive shadow-MLP attack's AUC per draw
    best: dict  # dataset -> the tuning grid's best noise-free head's decisions on the test records


def _draws(rng, rate: float, records: int, copies: bool = False) -> np.ndarray:
    if copies:
        return np.tile(rng.random(records) < rate, (REPEATS, 1))
    return rng.random((REPEATS, records)) < rate


@pytest.fixture(scope="module")
def frames() -> Frames:
    rng = np.random.default_rng(0)
    utility, mia, clean, test, attack, auc, best = [], [], {}, {}, {}, {}, {}

    def mia_row(dataset, method, eps, repeat, name, adaptive, bits, area):
        mia.append({"dataset": dataset, "mechanism": method, "eps": eps, "repeat": repeat, "attack": name,
                    "adaptive": adaptive, "n_members": N_MEMBERS, "n_nonmembers": N_MEMBERS,
                    "accuracy": bits.mean(), "auc": area, "decisions": pack_decisions(bits)})

    for dataset in DATASETS:
        clean[dataset] = rng.random(N_TEST) < CLEAN_RATE[dataset]
        best[dataset] = clean[dataset] | (rng.random(N_TEST) < 0.3)  # right wherever the clean head is, and more
        attack[(dataset, "none", None)] = _draws(rng, 0.7, 2 * N_MEMBERS)
        for repeat, bits in enumerate(attack[(dataset, "none", None)]):
            mia_row(dataset, "none", np.nan, repeat, "shadow_mlp", True, bits, 0.75)
        for method in SHOWN:
            post_hoc = method != "dpcl"  # a training-time release carries no clean decisions
            for eps in grid_of(method):
                key = (dataset, method, eps)
                test[key] = _draws(rng, CLEAN_RATE[dataset] * (1 - 0.5 / (1 + eps)), N_TEST, method == COPIES)
                attack[key] = _draws(rng, 0.55 + 0.02 * np.log10(eps), 2 * N_MEMBERS, method == COPIES)
                auc[key] = 0.55 + 0.01 * np.arange(REPEATS)
                kind = kind_of(method, eps)
                for repeat in range(REPEATS):
                    right = test[key][repeat]
                    utility.append({"dataset": dataset, "mechanism": method, "eps": eps, "delta": 1e-5,
                                    "repeat": repeat, "noise_scale": 1.0 / eps, "sensitivity_norm": "l2",
                                    "sensitivity": 1.0, "guarantee_kind": kind, "guarantee": f"{kind} at ε = {eps:g}",
                                    "clean_accuracy": clean[dataset].mean(), "accuracy": right.mean(),
                                    "utility_loss": 1 - right.mean() / clean[dataset].mean(), "n_test": N_TEST,
                                    "decisions": pack_decisions(right),
                                    "clean_decisions": pack_decisions(clean[dataset]) if post_hoc else np.nan,
                                    "best_clean_decisions": pack_decisions(best[dataset]) if post_hoc else np.nan})
                    bits = attack[key][repeat]
                    mia_row(dataset, method, eps, repeat, "shadow_mlp", True, bits, auc[key][repeat])
                    # every other attack decides the opposite, so that a reader of the wrong rows is seen
                    mia_row(dataset, method, eps, repeat, "shadow_mlp", False, ~bits, 0.9)
                    mia_row(dataset, method, eps, repeat, "confidence", True, ~bits, 0.9)
    mia = pd.DataFrame(mia)
    for metric in ("accuracy", "auc"):  # intervals as the attack rule writes them (their width does not matter here)
        mia[f"{metric}_lo"], mia[f"{metric}_hi"] = (mia[metric] - 0.05).clip(0, 1), (mia[metric] + 0.05).clip(0, 1)
    return Frames(pd.DataFrame(utility), mia, clean, test, attack, auc, best)


def segments(ax) -> dict[str, list]:
    """The drawn method segments of an axes: gid 'method:kind' -> [(linestyle, x data), ...]."""
    found = {}
    for line in ax.get_lines():
        if line.get_gid() and ":" in line.get_gid():
            found.setdefault(line.get_gid(), []).append((line.get_linestyle(), list(line.get_xdata())))
    return found


def assert_styles_follow_kinds(ax) -> None:
    drawn = segments(ax)
    assert {g.split(":")[0] for g in drawn} == set(SHOWN)
    for gid, lines in drawn.items():
        method, kind = gid.split(":")
        for style, xs in lines:
            assert style == KIND_LINESTYLE[kind]
            assert all(kind_of(method, x) == kind for x in xs)
    # The classical Gaussian changes kind at ε = 1: two segments, dashed then dotted.
    assert drawn["gaussian:random_dp"] == [("--", [0.1, 0.3])]
    assert drawn["gaussian:none"] == [(":", [1.0, 3.0, 10.0])]
    assert drawn["dpsgd:approx_dp"] == [("-", [0.1, 0.3, 1.0, 10.0])]
    assert drawn["dpcl:heuristic_dp"] == [("-.", GRID)]


def bands(ax) -> dict[str, dict[float, tuple[float, float]]]:
    """The drawn bands of an axes: 'method:kind' -> {x: (lower edge, upper edge)}."""
    found = {}
    for collection in ax.collections:
        gid = collection.get_gid() or ""
        if gid.startswith("band/"):
            vertices = np.concatenate([path.vertices for path in collection.get_paths()])
            edges = {float(x): vertices[vertices[:, 0] == x, 1] for x in np.unique(vertices[:, 0])}
            found.setdefault(gid[len("band/"):], {}).update({x: (float(y.min()), float(y.max()))
                                                              for x, y in edges.items()})
    return found


def band_of(ax, method: str) -> dict[float, tuple[float, float]]:
    """A method's band over every ε, whatever the kind of each segment."""
    merged = {}
    for gid, edges in bands(ax).items():
        if gid.split(":")[0] == method:
            merged.update(edges)
    return merged


def test_kind_runs_split_consecutive_kinds():
    assert kind_runs(["a", "a", "b", "a"]) == [("a", slice(0, 2)), ("b", slice(2, 3)), ("a", slice(3, 4))]
    assert kind_runs([]) == []


def test_figure1_bands_are_the_record_clustered_intervals_of_every_method(frames):
    fig = figure1(frames.utility)
    assert [ax.get_title().split("\n")[0] for ax in fig.axes] == list(DATASETS)
    for ax, dataset in zip(fig.axes, DATASETS):
        assert ax.get_xscale() == "log"
        assert_styles_follow_kinds(ax)
        assert f"95 % CI, clustered by record,\n{N_TEST} test records × {REPEATS} draws" in ax.get_title()
        assert {gid.split(":")[0] for gid in bands(ax)} == set(SHOWN)  # the training-time release too
        clean = frames.clean[dataset]
        for eps in GRID:
            # post-hoc: the ratio to the clean head paired on the test records; 1 − ratio flips the interval
            ratio = paired_ratio(frames.test[(dataset, "alm", eps)], clean[None])
            assert band_of(ax, "alm")[eps] == pytest.approx((1 - ratio.hi, 1 - ratio.lo))
            # training-time (no clean decisions): the accuracy's interval through 1 − accuracy / clean accuracy
            accuracy = proportion(frames.test[(dataset, "dpcl", eps)])
            assert band_of(ax, "dpcl")[eps] == pytest.approx((1 - accuracy.hi / clean.mean(),
                                                              1 - accuracy.lo / clean.mean()))
        (alm,) = [line for line in ax.get_lines() if line.get_gid() == "alm:random_dp"]
        expected = [1 - frames.test[(dataset, "alm", e)].mean() / clean.mean() for e in GRID]
        np.testing.assert_allclose(alm.get_ydata(), expected)
    key = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert any("random DP" in t for t in key) and any("no guarantee" in t for t in key)
    plt.close(fig)


def test_figure2_joins_kinds_and_draws_references(frames):
    utility, mia = frames.utility, frames.mia
    fig = figure2(utility, mia)
    top, bottom = fig.axes[0], fig.axes[len(DATASETS)]  # row-major: the first dataset's two panels
    assert_styles_follow_kinds(top)
    assert {g for g in segments(bottom)} == set(segments(top))
    # the band's records per point and draws, not the decisions pooled
    assert f"{2 * N_MEMBERS} queried records × {REPEATS} draws" in top.get_title()
    unprotected = [line for line in top.get_lines() if line.get_gid() == "unprotected"]
    clean_attack = frames.attack[("digits", "none", None)]
    assert unprotected and unprotected[0].get_ydata()[0] == pytest.approx(clean_attack.mean())
    assert any(line.get_gid() == "chance" and line.get_ydata()[0] == 0.5 for line in top.get_lines())
    for eps in GRID:
        reference = proportion(frames.attack[("digits", "alm", eps)])
        assert band_of(top, "alm")[eps] == pytest.approx((reference.lo, reference.hi))
    (alm,) = [line for line in top.get_lines() if line.get_gid() == "alm:random_dp"]
    np.testing.assert_allclose(alm.get_ydata(), [frames.attack[("digits", "alm", e)].mean() for e in GRID])
    plt.close(fig)


def test_figure2_rejects_mia_rows_without_a_release(frames):
    with pytest.raises(ValueError, match="utility.csv lacks"):
        figure2(frames.utility[frames.utility.mechanism != "alm"], frames.mia)


def test_figure3_lines_bands_and_reference_line(frames, tmp_path):
    fig = figure3(frames.utility)
    for ax, dataset in zip(fig.axes, DATASETS):
        assert_styles_follow_kinds(ax)
        reference = [line for line in ax.get_lines() if line.get_gid() == "non_private"]
        assert len(reference) == 1 and reference[0].get_ydata()[0] == pytest.approx(frames.clean[dataset].mean())
        for method in ("alm", "dpcl"):
            (_, xs), = segments(ax)[f"{method}:{kind_of(method, 1.0)}"]
            (line,) = [line for line in ax.get_lines() if line.get_gid() == f"{method}:{kind_of(method, 1.0)}"]
            np.testing.assert_allclose(line.get_ydata(), [frames.test[(dataset, method, e)].mean() for e in xs])
            for eps in xs:
                estimate = proportion(frames.test[(dataset, method, eps)])
                assert band_of(ax, method)[eps] == pytest.approx((estimate.lo, estimate.hi))
    paths = [tmp_path / "fig3.png", tmp_path / "fig3.pdf"]
    save_figure(fig, paths)
    assert all(p.stat().st_size > 0 for p in paths)


def test_graph_protection_figure_uses_registry_kinds_and_the_record_clustered_intervals(frames):
    links = pd.DataFrame([{"dataset": d, "mechanism": m, "eps": e, "attack": "attack-3", "distance": np.nan, "auc": 0.6}
                          for d in DATASETS for m, e in (("none", np.nan), ("alm", 1.0), ("alm", 10.0))])
    fig = graph_protection_figure(frames.utility, frames.mia, links)
    loss_ax, mia_ax, link_ax = fig.axes[0], fig.axes[len(DATASETS)], fig.axes[2 * len(DATASETS)]
    assert_styles_follow_kinds(loss_ax)
    assert "bars: 95 % CI, clustered by record" in loss_ax.get_title()
    assert "bars: 95 % CI, clustered by record" in mia_ax.get_title()
    assert "mean ± 1 SD over runs" in link_ax.get_title()
    (bars,) = [c for c in mia_ax.collections if c.get_gid() == "bars/alm:random_dp"]
    tops = sorted(float(segment[:, 1].max()) for segment in bars.get_segments())
    assert tops == pytest.approx(sorted(proportion(frames.attack[("digits", "alm", e)]).hi for e in GRID))
    plt.close(fig)


def test_nearest_eps_in_log_distance():
    assert nearest_eps([0.1, 3, 30], 1) == 3  # |log 3| = 0.48 < |log 0.1| = 1
    assert nearest_eps([0.1, 3, 30], 10) == 30  # |log 3| = 0.48 < |log 0.3| = 0.52
    assert nearest_eps([0.1, 10], 1) == 0.1  # a tie goes to the more private ε
    with pytest.raises(ValueError):
        nearest_eps([], 1)


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    return stats.beta.ppf(0.025, k, n - k + 1), stats.beta.ppf(0.975, k + 1, n - k)


def test_table2_matches_a_plain_computation_on_the_decisions(frames):
    table = table2(frames.utility, frames.mia, targets=(1, 2.5))
    assert list(table.columns) == TABLE2_COLUMNS
    # per dataset: the non-private head, then every method at each of the 2 targets
    assert len(table) == len(DATASETS) * (1 + 2 * len(SHOWN))
    for dataset in DATASETS:
        none = table[(table.dataset == dataset) & (table.method == "none")].iloc[0]
        clean = frames.clean[dataset]
        assert none.accuracy == pytest.approx(clean.mean())
        assert (none.accuracy_lo, none.accuracy_hi) == pytest.approx(clopper_pearson(int(clean.sum()), N_TEST))
        assert none.test_records == N_TEST and none.utility_loss == 0
        best = frames.best[dataset]  # the released head's loss against the grid's best, paired by record
        assert none.utility_loss_best == pytest.approx(1 - clean.mean() / best.mean()) and none.utility_loss_best > 0
        ratio = paired_ratio(clean[None], best[None])
        assert (none.utility_loss_best_lo, none.utility_loss_best_hi) == pytest.approx((1 - ratio.hi, 1 - ratio.lo))
        unprotected = frames.attack[(dataset, "none", None)]
        assert none.mia_accuracy == pytest.approx(unprotected.mean())
        assert none.mia_records == 2 * N_MEMBERS
    for row in table[table.method != "none"].itertuples():
        # ε = 2.5 is nearest to 3 in log distance; DP-SGD has no 3, so it takes 1 (|log 2.5| < |log 4|)
        expected_eps = {1: 1.0, 2.5: 1.0 if row.method == "dpsgd" else 3.0}[row.eps_target]
        assert row.eps == expected_eps
        key = (row.dataset, row.method, row.eps)
        right, clean, attack = frames.test[key], frames.clean[row.dataset], frames.attack[key]
        assert row.accuracy == pytest.approx(right.mean())
        assert row.utility_loss == pytest.approx(1 - right.mean() / clean.mean())
        assert row.mia_accuracy == pytest.approx(attack.mean())
        assert row.mia_auc_mean == pytest.approx(frames.auc[key].mean())
        assert (row.test_records, row.mia_records, row.n_draws) == (N_TEST, 2 * N_MEMBERS, REPEATS)
        accuracy = proportion(right)
        assert (row.accuracy_lo, row.accuracy_hi) == pytest.approx((accuracy.lo, accuracy.hi))
        assert row.accuracy_lo <= row.accuracy <= row.accuracy_hi
        mia_accuracy = proportion(attack)
        assert (row.mia_accuracy_lo, row.mia_accuracy_hi) == pytest.approx((mia_accuracy.lo, mia_accuracy.hi))
        best = frames.best[row.dataset]
        assert row.utility_loss_best == pytest.approx(1 - right.mean() / best.mean())
        if row.method == "dpcl":  # no clean decisions: the accuracy's interval, mapped
            loss = (1 - accuracy.hi / clean.mean(), 1 - accuracy.lo / clean.mean())
            loss_best = (1 - accuracy.hi / best.mean(), 1 - accuracy.lo / best.mean())
        else:  # paired with the clean head on the same test records
            ratio, ratio_best = paired_ratio(right, clean[None]), paired_ratio(right, best[None])
            loss, loss_best = (1 - ratio.hi, 1 - ratio.lo), (1 - ratio_best.hi, 1 - ratio_best.lo)
        assert (row.utility_loss_lo, row.utility_loss_hi) == pytest.approx(loss)
        assert (row.utility_loss_best_lo, row.utility_loss_best_hi) == pytest.approx(loss_best)
        assert row.guarantee_kind == kind_of(row.method, row.eps)
    md = markdown(table)
    assert md.count("\n| digits |") == 1 + 2 * len(SHOWN) and "random_dp" in md
    # a | inside a label or a claim ("4|B|C", "|d|") is escaped: every row has the header's cells
    labelled = table.assign(label=table.label + " (Δg = 4|B|C)", guarantee=table.guarantee + "; |d| fixed")
    rows = [line for line in markdown(labelled).splitlines() if line.startswith("|")]
    assert {len(re.split(r"(?<!\\)\|", line)) for line in rows} == {len(re.split(r"(?<!\\)\|", rows[0]))}


def test_table2_draws_that_are_copies_give_the_single_draw_interval_not_the_pooled_one(frames):
    """COPIES's draws decide every record alike: one draw's information, whatever their number."""
    table = table2(frames.utility, frames.mia, targets=(1,))
    for row in table[table.method == COPIES].itertuples():
        one = frames.test[(row.dataset, COPIES, row.eps)][0]
        k = int(one.sum())
        single, pooled = clopper_pearson(k, N_TEST), clopper_pearson(REPEATS * k, REPEATS * N_TEST)
        assert row.accuracy == pytest.approx(one.mean())
        # the single draw's interval, up to repeated.proportion's n* = n − 1 and t quantile at n − 1 df
        # (at n = 60: a few per cent wider)
        assert row.accuracy_hi - row.accuracy_lo == pytest.approx(single[1] - single[0], rel=0.05)
        assert (row.accuracy_lo, row.accuracy_hi) == pytest.approx(single, abs=0.01)
        assert row.accuracy_hi - row.accuracy_lo > 1.5 * (pooled[1] - pooled[0])  # √3 wider than the pooled one


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
        table2(*break_input(frames.utility, frames.mia))


def test_make_table2_script_writes_csv_and_md(frames, tmp_path):
    paths = {}
    for dataset in DATASETS:
        paths.setdefault("utility", []).append(str(tmp_path / f"{dataset}_utility.csv"))
        frames.utility[frames.utility.dataset == dataset].to_csv(paths["utility"][-1], index=False)
        for name, path in zip(("mia", "scores"), write_mia(frames.mia[frames.mia.dataset == dataset], tmp_path,
                                                           f"{dataset}_mia")):
            paths.setdefault(name, []).append(path)
    csv, md = tmp_path / "tables" / "table2.csv", tmp_path / "tables" / "table2.md"
    python = script_python()  # first: its server's socket goes into os.environ
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}
    subprocess.run([python, str(ROOT / "scripts" / "make_table2.py"), "--utility", *paths["utility"],
                    "--mia", *paths["mia"], "--mia-scores", *paths["scores"], "--csv", str(csv), "--md", str(md)],
                   check=True, env=env)
    table = pd.read_csv(csv)
    assert list(table.columns) == TABLE2_COLUMNS
    assert sorted(table.eps_target.dropna().unique()) == [1.0, 10.0]
    assert "| digits |" in md.read_text() and "Guarantee kinds" in md.read_text()
    assert sorted(p.name for p in csv.parent.iterdir()) == ["table2.csv", "table2.md"]  # no temporary left


def test_plot_figures_script_writes_three_figures(frames, tmp_path, monkeypatch):
    # In-process (runpy): the script's own argument handling, without a second interpreter start.
    import runpy

    frames.utility.to_csv(tmp_path / "utility.csv", index=False)
    mia, scores = write_mia(frames.mia, tmp_path)
    outputs = [tmp_path / f"fig{i}.png" for i in (1, 2, 3)]
    monkeypatch.setattr(sys, "argv", ["plot_figures.py", "--utility", str(tmp_path / "utility.csv"),
                                      "--mia", mia, "--mia-scores", scores, "--fig1", str(outputs[0]),
                                      "--fig2", str(outputs[1]), "--fig3", str(outputs[2])])
    runpy.run_path(str(ROOT / "scripts" / "plot_figures.py"), run_name="__main__")
    assert all(p.stat().st_size > 0 for p in outputs)


def test_each_methods_noise_free_limit_is_a_dotted_line_not_a_point_of_its_curve(frames):
    utility = frames.utility
    limits = {"alm": 0.81, "dpsgd": 0.62}  # the ε = ∞ rows the protect rules add: no noise, no claim
    rows = [{**utility.iloc[0].to_dict(), "mechanism": m, "eps": np.inf, "repeat": r, "noise_scale": 0.0,
             "guarantee_kind": "none", "accuracy": a + 0.01 * r, "utility_loss": 1 - (a + 0.01 * r) / 0.9}
            for m, a in limits.items() for r in range(REPEATS)]
    with_limits = pd.concat([utility, pd.DataFrame(rows)], ignore_index=True)
    dataset = utility.iloc[0].dataset
    for figure, column in ((figure3, "accuracy"), (figure1, "utility_loss")):
        fig = figure(with_limits)
        ax = fig.axes[DATASETS.index(dataset)]
        assert_styles_follow_kinds(ax)  # the curves are the finite ε only
        drawn = {line.get_gid(): line.get_ydata()[0] for line in ax.get_lines()
                 if str(line.get_gid()).startswith("noise_free/")}
        expected = pd.DataFrame(rows).groupby("mechanism")[column].mean()
        assert drawn == pytest.approx({f"noise_free/{m}": expected[m] for m in limits})
        plt.close(fig)


def test_table2_reads_releases_only_not_the_noise_free_limits(frames):
    utility, mia = frames.utility, frames.mia
    limit = utility[utility.mechanism == "alm"].assign(eps=np.inf, noise_scale=0.0, guarantee_kind="none",
                                                       accuracy=0.99)
    with_limits = pd.concat([utility, limit], ignore_index=True)
    targets = (1.0, 1e6)
    pd.testing.assert_frame_equal(table2(with_limits, mia, targets=targets), table2(utility, mia, targets=targets))
