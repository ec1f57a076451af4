"""The semi-supervised branch's claims table and figures (thesis Ch. 3) from small synthetic
metrics.csv frames built here: Newcombe's interval against the published worked examples, the
members needed to resolve against a hand computation, each claim's verdict (reproduced,
contradicted, not resolved) from intervals set by hand, no row where a claim's input is missing,
the three figures, and the script end to end."""

import math
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from privssl.artefacts import SEMILEAK, THESIS_SEMILEAK, load_csv_file  # noqa: E402
from privssl.attacks.statistics import n_to_resolve, newcombe_difference, wilson_interval  # noqa: E402
from privssl.reports.contrastive_report import CONTRADICTED, OVERLAP, REPRODUCED  # noqa: E402
from privssl.reports.semileak_plots import ablations_figure, attacks_figure, steps_figure  # noqa: E402
from privssl.reports.semileak_report import CLAIM_COLUMNS, claims_table, markdown  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
THESIS_CSV = ROOT / "resources" / "thesis_semileak.csv"
W = 0.03  # half-width of every synthetic AUC, JS and accuracy interval
N = 400  # members = non-members = train = test images
STEPS, EARLY, VIEWS = 1000, 400, 10
# The base scenario: every claim reproduced for FixMatch (values at steps 200, 400, 1000).
BASE = {
    "ada": {200: 0.55, 400: 0.60, 1000: 0.75}, "ada_unlabelled": 0.74, "ada_labelled": 0.80,
    "baselines": {"nn": 0.65, "correctness": 0.50, "confidence": 0.60, "entropy": 0.66, "modified_entropy": 0.61},
    "test": {200: 0.50, 400: 0.60, 1000: 0.80}, "train": {200: 0.50, 400: 0.61, 1000: 0.81},
    "n_model": N, "js": {200: 0.05, 400: 0.08, 1000: 0.20},
    "views": {1: 0.60, 50: 0.76}, "similarity": {"cosine": 0.60, "correlation": 0.62, "euclidean": 0.68},
    "top1": 0.60, "dp": {10.0: (0.10, 0.52)},
}


def _interval(value: float) -> tuple[float, float, float]:
    return value, value - W, value + W


def _rows(target, eps, step, defence, values, extra=None) -> list[dict]:
    """The rows of one model: its model columns, and per (attack, similarity, views) one row per member kind."""
    test, train, n = values["test"][step], values["train"][step], values["n_model"]
    model = {"dataset": "digits", "target": target, "eps": eps, "step": step, "steps": STEPS, "defence": defence,
             **dict(zip(("test_accuracy", "test_accuracy_lo", "test_accuracy_hi"), _interval(test))),
             **dict(zip(("train_accuracy", "train_accuracy_lo", "train_accuracy_hi"), _interval(train))),
             "n_test": n, "n_train": n, "overfitting": train - test,
             **dict(zip(("js_entropy", "js_entropy_lo", "js_entropy_hi"), _interval(values["js"][step]))),
             "noise_multiplier": np.nan, "eps_spent": np.nan, "delta": np.nan, "accountant": np.nan, **(extra or {})}
    auc = values["ada"][step] if defence == "none" else values["top1"]
    attacks = [(a, np.nan, np.nan, True, values["baselines"][a]) for a in values["baselines"]]
    attacks.append(("data_augmentation", "js", VIEWS, True, auc))
    if step == STEPS and defence == "none" and target != "fixmatch_dpsgd":  # A_DA's ablations
        attacks += [("data_augmentation", "js", k, False, v) for k, v in values["views"].items()]
        attacks += [("data_augmentation", s, VIEWS, False, v) for s, v in values["similarity"].items()]
    rows = []
    for attack, similarity, views, default, value in attacks:
        for kind, members in (("all", N), ("labelled", 40), ("unlabelled", N - 40)):
            own = value
            if attack == "data_augmentation" and default and step == STEPS and defence == "none" and kind != "all":
                own = values[f"ada_{kind}"]
            rows.append({**model, "attack": attack, "similarity": similarity, "views": views, "is_default": default,
                         "member_kind": kind, "n_members": members, "n_nonmembers": N, "accuracy": 0.6,
                         "accuracy_lo": 0.55, "accuracy_hi": 0.65,
                         **dict(zip(("auc", "auc_lo", "auc_hi"), _interval(own))),
                         "tpr_at_0.1pct_fpr": 0.01, "tpr_at_0.1pct_fpr_lo": 0.0, "tpr_at_0.1pct_fpr_hi": 0.05,
                         "fp_at_0.1pct_fpr": 0, "tpr_at_1pct_fpr": 0.02, "tpr_at_1pct_fpr_lo": 0.01,
                         "tpr_at_1pct_fpr_hi": 0.06, "fp_at_1pct_fpr": 4})
    return rows


def frame(algorithms=("fixmatch",), steps=(200, 400, 1000), **changes) -> pd.DataFrame:
    """The metrics of the algorithms (each with the base values and `changes`), the top-1 defence at
    the last step, and FixMatch by DP-SGD at each ε of values['dp']."""
    values = {**BASE, **changes}
    rows = []
    for algorithm in algorithms:
        for step in steps:
            rows += _rows(algorithm, np.nan, step, "none", values)
        rows += _rows(algorithm, np.nan, STEPS, "top1", values)
    for eps, (test, auc) in values["dp"].items():
        dp = {**values, "test": {STEPS: test}, "train": {STEPS: test}, "ada": {STEPS: auc}, "ada_labelled": auc,
              "ada_unlabelled": auc}
        rows += _rows("fixmatch_dpsgd", eps, STEPS, "none", dp,
                      {"noise_multiplier": 1.234, "eps_spent": eps * 0.999, "delta": 1e-5, "accountant": "pld"})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def thesis() -> pd.DataFrame:
    return load_csv_file(THESIS_CSV, THESIS_SEMILEAK)


def table(thesis, early=EARLY, **kwargs) -> pd.DataFrame:
    return claims_table(frame(**kwargs), thesis, early, VIEWS, "js")


def row(result: pd.DataFrame, claim: str, target: str = "fixmatch") -> pd.Series:
    rows = result[(result.claim == claim) & (result.target == target)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


# --------------------------------------------------------------------------------- statistics

@pytest.mark.parametrize("counts, expected", [
    ((56, 70, 48, 80), (0.0524, 0.3339)),  # Newcombe 1998, Table II, example (a), method 10
    ((9, 10, 3, 10), (0.1705, 0.8090)),    # example (b)
    ((5, 56, 0, 29), (-0.0381, 0.1926)),   # example (d)
    ((0, 10, 0, 20), (-0.1611, 0.2775)),   # example (e)
])
def test_newcombe_matches_the_published_examples(counts, expected):
    d, lo, hi = newcombe_difference(*counts)
    assert d == pytest.approx(counts[0] / counts[1] - counts[2] / counts[3])
    assert (round(lo, 4), round(hi, 4)) == expected


def test_wilson_interval_solves_the_score_equation():
    """Both ends π of Wilson's interval satisfy (p − π)² = z² π (1 − π) / n."""
    z = stats.norm.ppf(0.975)
    for k, n in ((0, 20), (7, 30), (30, 30)):
        for end in wilson_interval(k, n):
            assert (k / n - end) ** 2 == pytest.approx(z * z * end * (1 - end) / n, abs=1e-12)


def test_n_to_resolve_by_hand():
    # a − b = 0.035, facing half-widths 0.03 + 0.03: 400 (0.06 / 0.035)² = 1175.5 -> 1176
    assert n_to_resolve(400, 0.75, 0.72, 0.78, 0.715, 0.685, 0.745) == 1176
    # a below b: the facing sides are a's upper and b's lower half-widths: 100 (0.05 / 0.02)² = 625 -> 626
    assert n_to_resolve(100, 0.50, 0.40, 0.52, 0.52, 0.49, 0.60) == 626
    # against a bound (width 0): 400 (0.04 / 0.03)² = 711.1 -> 712
    assert n_to_resolve(400, 0.53, 0.49, 0.57, 0.5, 0.5, 0.5) == 712
    assert np.isnan(n_to_resolve(400, 0.6, 0.55, 0.65, 0.6, 0.58, 0.62))


def test_n_to_resolve_separates_the_scaled_intervals_first_there():
    """At the returned m the intervals, shrunk by √(n / m), are disjoint; at m − 1 they still overlap."""
    n, a, a_w, b, b_w = 250, 0.61, 0.045, 0.57, 0.05
    m = n_to_resolve(n, a, a - a_w, a + a_w, b, b - b_w, b + b_w)
    for size, disjoint in ((m, True), (m - 1, False)):
        shrink = math.sqrt(n / size)
        assert (a - a_w * shrink > b + b_w * shrink) == disjoint


# --------------------------------------------------------------------------------- verdicts

def test_base_scenario_reproduces_every_claim(thesis):
    result = table(thesis)
    assert list(result.columns) == CLAIM_COLUMNS
    assert list(result.claim) == ["ada_above_baselines", "ada_unlabelled", "no_overfitting", "js_rises_with_auc",
                                  "views", "similarity", "early_stopping", "top1", "dpsgd"]
    # no_overfitting needs n = 4000 images for a Newcombe interval inside ±0.05 (base: n = 400)
    assert set(result.verdict) - {REPRODUCED} == {row(result, "no_overfitting").verdict}
    assert result.n_to_resolve.drop(index=result.index[result.claim == "no_overfitting"]).isna().all()
    ada = row(result, "ada_above_baselines")
    assert ada.compared == "A_DA vs best baseline (Ent)" and (ada.value_a, ada.value_b) == (0.75, 0.66)
    assert (ada.n_a, ada.n_b) == (N, N)
    assert row(result, "ada_unlabelled").value_a == 0.74 and row(result, "ada_unlabelled").n_a == N - 40
    quotes = thesis.set_index("claim")
    assert row(result, "top1").thesis_source == quotes.loc["early_stopping", "source"]
    assert row(result, "views").thesis_statement == quotes.loc["views", "statement"]


@pytest.mark.parametrize("claim, changes, verdict, need", [
    ("ada_above_baselines", {"baselines": {**BASE["baselines"], "entropy": 0.85}}, CONTRADICTED, None),
    ("ada_above_baselines", {"baselines": {**BASE["baselines"], "entropy": 0.715}}, OVERLAP,
     math.ceil(N * (0.06 / 0.035) ** 2)),
    ("ada_unlabelled", {"ada_unlabelled": 0.55}, CONTRADICTED, None),
    ("ada_unlabelled", {"ada_unlabelled": 0.71}, OVERLAP, math.ceil((N - 40) * (0.06 / 0.05) ** 2)),
    ("js_rises_with_auc", {"js": {200: 0.30, 400: 0.25, 1000: 0.20}}, CONTRADICTED, None),
    ("js_rises_with_auc", {"ada": {**BASE["ada"], 200: 0.85}}, CONTRADICTED, None),  # the AUC falls, JS rises
    ("js_rises_with_auc", {"js": {200: 0.05, 400: 0.08, 1000: 0.085}}, OVERLAP, math.ceil(N * (0.06 / 0.035) ** 2)),
    ("views", {"views": {1: 0.85, 50: 0.76}}, CONTRADICTED, None),
    ("views", {"views": {1: 0.715, 50: 0.76}}, OVERLAP, math.ceil(N * (0.06 / 0.035) ** 2)),
    ("similarity", {"similarity": {**BASE["similarity"], "cosine": 0.85}}, CONTRADICTED, None),
    ("similarity", {"similarity": {**BASE["similarity"], "euclidean": 0.743}}, OVERLAP,
     math.ceil(N * (0.06 / 0.007) ** 2)),
    ("early_stopping", {"ada": {**BASE["ada"], 400: 0.85}}, CONTRADICTED, None),
    ("early_stopping", {"ada": {**BASE["ada"], 400: 0.705}}, OVERLAP, math.ceil(N * (0.06 / 0.045) ** 2)),
    ("top1", {"top1": 0.85}, CONTRADICTED, None),
    ("top1", {"top1": 0.695}, OVERLAP, math.ceil(N * (0.06 / 0.055) ** 2)),
])
def test_verdicts_of_each_claim(thesis, claim, changes, verdict, need):
    got = row(table(thesis, **changes), claim)
    assert got.verdict == verdict
    assert (np.isnan(got.n_to_resolve) if need is None else got.n_to_resolve == need)


def test_views_without_plateau_is_not_resolved_and_more_members_would_not_help(thesis):
    got = row(table(thesis, views={1: 0.60, 50: 0.90}), "views")
    assert got.verdict == "not resolved: no plateau: K = 50 is above K = 10 beyond the intervals"
    assert np.isnan(got.n_to_resolve) and "plateau (its interval overlaps K = 10's): no" in got.note


def test_early_stopping_needs_both_lower(thesis):
    """A lower AUC with the test accuracy unchanged is not the thesis's trade-off: not resolved, and
    only the accuracy comparison counts towards the members needed."""
    got = row(table(thesis, test={**BASE["test"], 400: 0.787}, train={**BASE["train"], 400: 0.787}), "early_stopping")
    assert got.verdict == OVERLAP and got.n_to_resolve == math.ceil(N * (0.06 / 0.013) ** 2)
    assert "lower when stopped early: overlap" in got.note


def test_views_without_a_larger_k_has_no_plateau_test(thesis):
    got = row(table(thesis, views={1: 0.60}), "views")
    assert got.verdict == "not resolved: no plateau test (the grid's largest K is the default, 10)"
    assert np.isnan(got.n_to_resolve)


@pytest.mark.parametrize("claim, changes", [
    ("early_stopping", {"test": {**BASE["test"], 400: 0.95}, "train": {**BASE["train"], 400: 0.95}}),
    ("dpsgd", {"dp": {10.0: (0.95, 0.52)}}),
])
def test_higher_accuracy_with_lower_auc_is_not_a_contradiction(thesis, claim, changes):
    """Only a higher AUC contradicts a defence claim; a defence that lowers the AUC and raises the
    test accuracy (both beyond the intervals) is not the thesis's trade-off, and no n settles it."""
    got = row(table(thesis, **changes), claim, "fixmatch_dpsgd" if claim == "dpsgd" else "fixmatch")
    assert got.verdict == "not resolved: its comparisons point in opposite directions"
    assert np.isnan(got.n_to_resolve)


def test_no_overfitting_verdicts(thesis):
    reproduced = row(table(thesis, n_model=4000), "no_overfitting")
    d, lo, hi = newcombe_difference(3240, 4000, 3200, 4000)  # train 0.81, test 0.80
    assert reproduced.verdict == REPRODUCED and -0.05 < lo < hi < 0.05
    assert (reproduced.value_a, reproduced.value_a_lo, reproduced.value_a_hi) == pytest.approx((d, lo, hi))
    assert reproduced.n_a == 4000 and "tolerance ±0.05" in reproduced.note
    over = row(table(thesis, train={**BASE["train"], 1000: 0.95}), "no_overfitting")
    assert over.verdict == CONTRADICTED and over.value_a_lo > 0.05
    chance = row(table(thesis, n_model=4000, ada={**BASE["ada"], 1000: 0.45}), "no_overfitting")
    assert chance.verdict == CONTRADICTED and chance.value_b_hi < 0.5
    unresolved = row(table(thesis), "no_overfitting")
    d, lo, hi = newcombe_difference(324, 400, 320, 400)
    assert unresolved.verdict == OVERLAP and -0.05 < lo < 0.05 < hi
    # both edges must lie inside the band (here the upper one is not): the larger need decides
    need = N * max(((hi - d) / (0.05 - d)) ** 2, ((d - lo) / (d + 0.05)) ** 2)
    assert unresolved.n_to_resolve == math.floor(need) + 1


def test_js_rises_reports_spearman(thesis):
    base = row(table(thesis), "js_rises_with_auc")
    assert base.verdict == REPRODUCED and (base.value_a, base.value_b) == (0.20, 0.05)
    assert "over 3 checkpoints = 1.00" in base.note
    falling = row(table(thesis, js={200: 0.30, 400: 0.25, 1000: 0.20}), "js_rises_with_auc")
    assert "over 3 checkpoints = -1.00" in falling.note


@pytest.mark.parametrize("dp, verdict, need", [
    ({10.0: (0.10, 0.90)}, CONTRADICTED, None),
    ({10.0: (0.10, 0.728)}, OVERLAP, math.ceil(N * (0.06 / 0.022) ** 2)),
    ({10.0: (0.787, 0.52)}, OVERLAP, math.ceil(N * (0.06 / 0.013) ** 2)),
])
def test_dpsgd_verdicts(thesis, dp, verdict, need):
    got = row(table(thesis, dp=dp), "dpsgd", "fixmatch_dpsgd")
    assert got.verdict == verdict and got.eps == 10.0
    assert (np.isnan(got.n_to_resolve) if need is None else got.n_to_resolve == need)


def test_dpsgd_states_the_guarantee(thesis):
    result = table(thesis, dp={1.0: (0.05, 0.51), 10.0: (0.10, 0.52)})
    rows = result[result.claim == "dpsgd"]
    assert list(rows.eps) == [1.0, 10.0] and set(rows.verdict) == {REPRODUCED}
    assert ("(ε = 9.99, δ = 1e-05) by the PLD accountant for add/remove of one training record (labelled or "
            "unlabelled), Poisson sampling at the larger of the two sampling rates, σ = 1.23; the thesis's σ = 1e-5 "
            "gives no guarantee") in rows.note.iloc[1]


def test_a_missing_input_gives_no_row(thesis):
    no_dp = table(thesis, dp={})
    assert "dpsgd" not in set(no_dp.claim) and len(no_dp) == 8
    one_step = table(thesis, steps=(1000,))
    assert not {"js_rises_with_auc", "early_stopping"} & set(one_step.claim) and "top1" in set(one_step.claim)
    assert "early_stopping" not in set(table(thesis, early=600).claim)  # not a checkpoint
    assert "views" not in set(table(thesis, views={}).claim)  # a grid of one K
    assert "similarity" not in set(table(thesis, similarity={}).claim)


def test_every_algorithm_gets_its_rows(thesis):
    result = table(thesis, algorithms=("fixmatch", "flexmatch", "uda"))
    assert list(result.target.drop_duplicates()) == ["fixmatch", "flexmatch", "uda", "fixmatch_dpsgd"]
    assert result.groupby("target").size().to_dict() == {"fixmatch": 8, "flexmatch": 8, "uda": 8, "fixmatch_dpsgd": 1}


def test_markdown_has_every_row(thesis):
    result = table(thesis)
    text = markdown(result)
    assert text.count("\n| digits |") == len(result)
    assert "fixmatch_dpsgd (ε = 10)" in text and "0.750 [0.720, 0.780] (400)" in text
    assert all(f"**{claim}**" in text for claim in set(result.claim) - {"top1"})


def test_bad_input_is_refused(thesis):
    metrics = frame()
    metrics.loc[0, "test_accuracy"] = 0.1  # one row of a model disagrees with the others
    with pytest.raises(ValueError, match="model columns differ"):
        claims_table(metrics, thesis, EARLY, VIEWS, "js")
    with pytest.raises(ValueError, match="one row per claim; dpsgd"):
        claims_table(frame(), thesis[thesis.claim != "dpsgd"], EARLY, VIEWS, "js")


# --------------------------------------------------------------------------------- figures and script

def _texts(fig) -> str:
    return "\n".join([ax.get_title() for ax in fig.axes] + [t.get_text() for ax in fig.axes for t in ax.texts])


def test_figures_build():
    metrics = frame(algorithms=("fixmatch", "flexmatch"))
    fig = attacks_figure(metrics)
    assert len(fig.axes) == 3 * 2 and "n = 360 members / 400 non-members" in _texts(fig)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["A_NN", "Corr", "Conf", "Ent", "Ment", "A_DA"]
    plt.close(fig)
    fig = steps_figure(metrics, EARLY)
    assert len(fig.axes) == 3 * 2
    assert all(any(line.get_gid() == "early_stopping" for line in ax.lines) for ax in fig.axes)
    plt.close(fig)
    fig = ablations_figure(metrics, EARLY)
    assert len(fig.axes) == 3 and "DP-SGD ε = 10" in _texts(fig)
    assert fig.axes[0].get_xscale() == "log"
    plt.close(fig)


def test_script_end_to_end(thesis, tmp_path):
    """The synthetic table passes the attack rule's schema, and the CLI writes the claims and the figures."""
    path = tmp_path / "metrics.csv"
    frame(algorithms=("fixmatch", "flexmatch")).to_csv(path, index=False)
    load_csv_file(path, SEMILEAK)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, str(ROOT / "scripts" / "semileak_report.py"), "--metrics", str(path),
                    "--thesis", str(THESIS_CSV), "--early-stopping", str(EARLY), "--views", str(VIEWS),
                    "--similarity", "js", "--fig-attacks", str(out / "attacks.png"),
                    "--fig-steps", str(out / "steps.pdf"), "--fig-ablations", str(out / "ablations.png"),
                    "--csv", str(out / "claims.csv"), "--md", str(out / "claims.md")],
                   check=True, env=env, timeout=180)
    result = pd.read_csv(out / "claims.csv")
    assert list(result.columns) == CLAIM_COLUMNS and len(result) == 2 * 8 + 1
    assert (out / "attacks.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "steps.pdf").read_bytes()[:5] == b"%PDF-"
    assert sorted(p.name for p in out.iterdir()) == ["ablations.png", "attacks.png", "claims.csv", "claims.md",
                                                      "steps.pdf"]
