"""Fig. 5 and the attack choice of Fig. 4 (privssl.reports.audit_plots), read back from the
matplotlib artists: figure5 circles in red exactly the audited points above y = x (lower bound >
claimed ε, strictly), using the strongest attack per (method, ε, audit) and skipping the
unprotected head and ∞ (no) claims, and draws each drawn point's ceiling; strongest_attacks keeps,
per (dataset, method, ε), the adaptive attack with the highest TPR at the numerically lowest FPR
level, ties to the higher AUC; roc_curves draws each lira.csv row's ROC from its per-record scores.
The expected sets are computed here by plain loops over the rows, not by the module's pandas code."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from privssl.artefacts.audits import AUDIT  # noqa: E402
from privssl.artefacts.tables import load_csv_files  # noqa: E402
from privssl.reports.audit_plots import figure5, roc_curves, strongest_attacks  # noqa: E402

DELTA = 1e-5
# (dataset, method, eps, claimed ε, audit, {attack: audited lower bound})
AUDIT_POINTS = [
    ("toy", "laplace", 1.0, 1.0, "hypothesis", {"loss": 0.5, "lira": 0.3}),  # below y = x
    ("toy", "laplace", 2.0, 2.0, "hypothesis", {"loss": 2.0, "lira": 1.0}),  # exactly on y = x: no violation
    ("toy", "laplace", 1.0, 1.0, "one_run", {"loss": 0.2, "lira": 1.5}),  # strongest attack violates
    ("toy", "laplace", 2.0, 2.0, "one_run", {"loss": 0.1, "lira": 0.1}),
    ("toy", "gaussian_analytic", 0.5, 0.5, "hypothesis", {"loss": 0.2, "lira": 0.9}),  # violation
    ("toy", "gaussian_analytic", 0.5, 0.5, "one_run", {"loss": 0.4, "lira": 0.45}),
    ("toy", "dpsgd", 1.0, 2.0, "hypothesis", {"loss": 2.5, "lira": 1.0}),  # group-privacy claim 2ε: violated
    ("toy", "dpsgd", 1.0, 2.0, "one_run", {"loss": 1.9, "lira": 0.0}),  # above ε, below the claim 2ε
    ("toy", "dpsgd", 12.0, math.inf, "hypothesis", {"loss": 3.0, "lira": 2.0}),  # no claim (∞): not tested
    ("toy", "dpsgd", 12.0, math.inf, "one_run", {"loss": 4.0, "lira": 1.0}),
    ("toy", "none", math.nan, math.inf, "hypothesis", {"loss": 5.0, "lira": 4.0}),  # unprotected: no claim
    ("toy", "none", math.nan, math.inf, "one_run", {"loss": 6.0, "lira": 1.0}),
    ("other", "laplace", 1.0, 1.0, "hypothesis", {"loss": 0.1, "lira": 0.2}),
    ("other", "laplace", 1.0, 1.0, "one_run", {"loss": 0.3, "lira": 0.2}),
    ("other", "none", math.nan, math.inf, "hypothesis", {"loss": 2.0, "lira": 1.0}),
    ("other", "none", math.nan, math.inf, "one_run", {"loss": 2.0, "lira": 1.0}),
]
KIND = {"laplace": "pure_dp", "gaussian_analytic": "approx_dp", "dpsgd": "approx_dp", "none": "none"}
# each audit's ceiling (its bound with every decision right), lower for DP-SGD as its substitution δ is larger
CEILING = {"hypothesis": 5.5, "one_run": 6.5}


def ceiling_of(method: str, audit: str) -> float:
    return CEILING[audit] - (0.5 if method == "dpsgd" else 0.0)


def expected_violations(points) -> dict[str, set[tuple[float, float]]]:
    """Per dataset, the (claimed ε, strongest lower bound) of the released methods with a finite
    claim whose strongest attack's bound exceeds the claim (strictly)."""
    found = {}
    for dataset, method, _, claimed, _, bounds in points:
        strongest = max(bounds.values())
        found.setdefault(dataset, set())
        if method != "none" and math.isfinite(claimed) and strongest > claimed:
            found[dataset].add((claimed, strongest))
    return found


@pytest.fixture(scope="module")
def audit_frame(tmp_path_factory):
    """The points as audit.csv rows, written and read back through the AUDIT schema the plotting
    script uses (so the frame is one the figure really receives)."""
    rows = [{"dataset": dataset, "attack": attack, "adaptive": True, "method": method, "eps": eps,
             "delta": 0.0 if KIND[method] == "pure_dp" else DELTA, "claimed_eps": claimed,
             "guarantee_kind": KIND[method], "audit": audit, "threat_model": "black_box", "eps_lower_bound": bound,
             "eps_ceiling": ceiling_of(method, audit), "n": 200}
            for dataset, method, eps, claimed, audit, bounds in AUDIT_POINTS for attack, bound in bounds.items()]
    path = tmp_path_factory.mktemp("audit") / "audit.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return load_csv_files([path], AUDIT)


def points_of(collection) -> set[tuple[float, float]]:
    return {(float(x), float(y)) for x, y in np.asarray(collection.get_offsets())}


def test_figure5_circles_exactly_the_violations_in_red(audit_frame):
    fig = figure5(audit_frame)
    try:
        axes = fig.axes[:2]
        assert [ax.get_title() for ax in axes] == ["toy", "other"]
        expected = expected_violations(AUDIT_POINTS)
        assert expected["toy"] == {(1.0, 1.5), (0.5, 0.9), (2.0, 2.5)}  # the design above
        for ax in axes:
            circles = [c for c in ax.collections if c.get_gid() == "violations"]
            assert len(circles) == 1
            assert points_of(circles[0]) == expected[ax.get_title()]
            assert circles[0].get_label() == f"violation ({len(expected[ax.get_title()])})"
            if expected[ax.get_title()]:
                assert np.allclose(circles[0].get_edgecolor(), to_rgba("red"))
                assert circles[0].get_facecolor().size == 0 or np.allclose(circles[0].get_facecolor()[:, 3], 0)
    finally:
        plt.close(fig)


def test_figure5_plots_the_point_on_the_diagonal_and_the_strongest_attack_but_skips_no_claims(audit_frame):
    """(2, 2) is drawn (laplace, hypothesis) yet not circled; each (method, ε, audit) is drawn
    once, at its strongest attack's bound; ∞ claims (dpsgd at ε = 12) and `none` are not drawn
    as points; `none`'s strongest bound per audit is a horizontal line."""
    fig = figure5(audit_frame)
    try:
        ax = fig.axes[0]
        drawn = {c.get_gid(): points_of(c) for c in ax.collections if c.get_gid() and ":" in c.get_gid()}
        assert drawn == {"laplace:hypothesis": {(1.0, 0.5), (2.0, 2.0)}, "laplace:one_run": {(1.0, 1.5), (2.0, 0.1)},
                         "gaussian_analytic:hypothesis": {(0.5, 0.9)}, "gaussian_analytic:one_run": {(0.5, 0.45)},
                         "dpsgd:hypothesis": {(2.0, 2.5)}, "dpsgd:one_run": {(2.0, 1.9)}}
        horizontal = sorted(line.get_ydata()[0] for line in ax.lines if line.get_linestyle() == "-.")
        assert horizontal == [5.0, 6.0]
    finally:
        plt.close(fig)


def test_figure5_draws_each_drawn_points_ceiling_and_names_it_in_the_legend(audit_frame):
    """One grey dash per drawn point at (claimed ε, its ceiling), none for `none` or ∞ claims; the
    unprotected head's line names its ceiling; the ceilings fit in the panel."""
    fig = figure5(audit_frame)
    try:
        for ax in fig.axes[:2]:
            expected = sorted((claimed, ceiling_of(method, audit))
                              for dataset, method, _, claimed, audit, _ in AUDIT_POINTS
                              if dataset == ax.get_title() and method != "none" and math.isfinite(claimed))
            (ceilings,) = [c for c in ax.collections if c.get_gid() == "ceilings"]
            assert sorted((float(x), float(y)) for x, y in np.asarray(ceilings.get_offsets())) == expected
            assert np.allclose(ceilings.get_edgecolor()[:, :3], to_rgba("grey")[:3])
            assert ax.get_ylim()[1] > max(y for _, y in expected)
        labels = fig.legends[0].get_texts()
        assert "ceiling: the bound were every decision right" in [t.get_text() for t in labels]
        lines = [line.get_label() for line in fig.axes[0].lines if line.get_linestyle() == "-."]
        assert sorted(lines) == ["no protection, hypothesis: ε ≥ 5.00 (ceiling 5.50)",
                                 "no protection, one_run: ε ≥ 6.00 (ceiling 6.50)"]
    finally:
        plt.close(fig)


def test_figure5_is_log_log_with_zero_bounds_drawn_and_names_each_threat_model(audit_frame):
    """Both axes logarithmic, the y axis linear below 0.1 so that a bound of 0 sits inside the
    panel (not at −inf off it); each audit's legend entry names its threat model."""
    frame = audit_frame.copy()
    frame.loc[frame.audit == "one_run", "threat_model"] = "final_model"
    frame.loc[(frame.method == "laplace") & (frame.eps == 2.0), "eps_lower_bound"] = 0.0
    fig = figure5(frame)
    try:
        ax = fig.axes[0]
        assert ax.get_xscale() == "log" and ax.get_yscale() == "symlog"
        assert ax.yaxis.get_transform().linthresh == pytest.approx(0.1)
        assert ax.get_ylim()[0] <= 0.0 < ax.get_ylim()[1]
        drawn = {c.get_gid(): points_of(c) for c in ax.collections if c.get_gid() and ":" in c.get_gid()}
        assert (2.0, 0.0) in drawn["laplace:hypothesis"] | drawn["laplace:one_run"]
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert "hypothesis (black box)" in labels and "one_run (final model)" in labels
    finally:
        plt.close(fig)


def test_figure5_fills_the_hypothesis_test_s_markers_only(audit_frame):
    """The caption's reading: filled the hypothesis-test audit, hollow every other, whatever sorts first."""
    frame = audit_frame.copy()
    frame.loc[frame.audit == "hypothesis", "audit"] = "hypothesis_test"
    frame.loc[frame.audit == "one_run", "audit"] = "crafted_pair_gdp"  # sorts before hypothesis_test
    fig = figure5(frame)
    try:
        for c in fig.axes[0].collections:
            if c.get_gid() and ":" in c.get_gid():
                hollow = c.get_facecolor().size == 0 or np.allclose(c.get_facecolor()[:, 3], 0)
                assert hollow == (not c.get_gid().endswith(":hypothesis_test")), c.get_gid()
    finally:
        plt.close(fig)


def lira_rows():
    """tpr columns at 2 % and 10 % FPR: the numerically lowest level is 2 %, the lexically first
    is '10pct'; non-adaptive attacks stronger than every adaptive one; a TPR tie broken by AUC."""
    rows = [
        # (dataset, method, eps, attack, adaptive, tpr at 2 %, tpr at 10 %, auc)
        ("toy", "laplace", 1.0, "loss", True, 0.10, 0.90, 0.60),
        ("toy", "laplace", 1.0, "lira", True, 0.20, 0.30, 0.55),  # best at 2 % FPR
        ("toy", "laplace", 1.0, "oracle", False, 0.95, 0.99, 0.99),  # not adaptive: never chosen
        ("toy", "laplace", 2.0, "loss", True, 0.30, 0.50, 0.70),
        ("toy", "laplace", 2.0, "lira", True, 0.30, 0.40, 0.80),  # TPR tie: higher AUC
        ("toy", "none", math.nan, "loss", True, 0.40, 0.80, 0.90),  # `none`: ε is NaN
        ("toy", "none", math.nan, "lira", True, 0.60, 0.70, 0.85),
        ("other", "laplace", 1.0, "loss", True, 0.50, 0.60, 0.70),  # another dataset, same (method, ε)
        ("other", "laplace", 1.0, "lira", True, 0.05, 0.95, 0.75),
    ]
    return pd.DataFrame(rows, columns=["dataset", "method", "eps", "attack", "adaptive", "tpr_at_2pct_fpr",
                                       "tpr_at_10pct_fpr", "auc"])


def test_strongest_attacks_picks_the_highest_tpr_at_the_lowest_fpr_then_auc():
    lira = lira_rows()
    expected = {}
    for row in lira.itertuples(index=False):  # by hand: adaptive only, max (TPR at 2 %, AUC)
        key = (row.dataset, row.method, "nan" if math.isnan(row.eps) else row.eps)
        if row.adaptive and (key not in expected or (row.tpr_at_2pct_fpr, row.auc) > expected[key][1:]):
            expected[key] = (row.attack, row.tpr_at_2pct_fpr, row.auc)
    best = strongest_attacks(lira)
    chosen = {(r.dataset, r.method, "nan" if math.isnan(r.eps) else r.eps): r.attack for r in best.itertuples()}
    assert chosen == {key: attack for key, (attack, _, _) in expected.items()}
    assert chosen == {("toy", "laplace", 1.0): "lira", ("toy", "laplace", 2.0): "lira", ("toy", "none", "nan"): "lira",
                      ("other", "laplace", 1.0): "loss"}


def test_strongest_attacks_refuses_a_table_without_tpr_columns():
    with pytest.raises(ValueError, match="tpr_at_"):
        strongest_attacks(lira_rows().drop(columns=["tpr_at_2pct_fpr", "tpr_at_10pct_fpr"]))


def scores_of(method: str, eps: float, attack: str, member, score, adaptive: bool = True) -> pd.DataFrame:
    return pd.DataFrame({"dataset": "toy", "method": method, "eps": eps, "attack": attack, "adaptive": adaptive,
                         "member": member, "score": score})


def tpr_at(fpr_level: float, member: np.ndarray, score: np.ndarray) -> float:
    """The best TPR at FPR ≤ fpr_level, by trying every threshold (flagged: score ≥ threshold)."""
    best = 0.0
    for threshold in np.concatenate([np.unique(score), [np.inf]]):
        flagged = score >= threshold
        if flagged[~member].mean() <= fpr_level:
            best = max(best, flagged[member].mean())
    return best


def test_roc_curves_are_each_rows_own_scores_curve_kept_at_its_corners():
    rng = np.random.default_rng(3)
    member = rng.random(400) < 0.5
    score = np.round(rng.normal(member * 0.8), 1)  # rounded: ties make runs of points the corners drop
    scores = pd.concat([scores_of("laplace", 1.0, "lira", member, score),
                        scores_of("laplace", 1.0, "loss", member, -score),  # other rows, the reverse curve
                        scores_of("laplace", 1.0, "lira", member, -score, adaptive=False),
                        scores_of("none", math.nan, "lira", ~member, score)], ignore_index=True)
    points = pd.DataFrame({"dataset": "toy", "method": ["laplace", "none"], "eps": [1.0, math.nan],
                           "attack": "lira", "adaptive": True})
    curves = roc_curves(scores, points)
    assert sorted(map(tuple, curves[["method", "attack"]].drop_duplicates().to_numpy())) == [
        ("laplace", "lira"), ("none", "lira")]
    for method, mine in (("laplace", member), ("none", ~member)):
        curve = curves[curves.method == method]
        fpr, tpr = curve.fpr.to_numpy(), curve.tpr.to_numpy()
        assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0, 0, 1, 1)
        assert (np.diff(fpr) >= 0).all() and (np.diff(tpr) >= 0).all()
        pairs = (score[mine][:, None] > score[~mine][None, :]) + 0.5 * (score[mine][:, None] == score[~mine][None, :])
        assert np.trapezoid(tpr, fpr) == pytest.approx(pairs.mean(), abs=1e-12)  # the Mann–Whitney AUC
        for level in (0.01, 0.05, 0.2, 0.5):  # the step curve through the corners is the full curve
            assert tpr[fpr <= level].max() == pytest.approx(tpr_at(level, mine, score), abs=1e-12), (method, level)
        assert len(curve) < len(np.unique(score)) + 1  # runs of equal fpr or tpr were thinned


def test_roc_curves_refuse_a_row_without_scores():
    scores = scores_of("laplace", 1.0, "lira", [True, False], [1.0, 0.0])
    points = pd.DataFrame({"dataset": "toy", "method": "laplace", "eps": [10.0], "attack": "lira",
                           "adaptive": True})
    with pytest.raises(ValueError, match="no per-record scores of the lira.csv row"):
        roc_curves(scores, points)
