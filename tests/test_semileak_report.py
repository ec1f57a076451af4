"""The semi-supervised branch's claims table and figures (thesis Ch. 3) from synthetic metrics.csv
frames built here, whose every row carries the ranks of a score vector the test controls (as
artefacts.attach_score_ranks gives them from scores.parquet; so its
AUC and every paired difference are known: recomputed here from the scores by DeLong's formula on
the member × non-member kernel, not from the ranks) and the test decisions of a 0/1 array.

Each claim is checked both ways (reproduced and contradicted) in cases built so that a realistic
one-line slip in the report flips the verdict: the wrong best baseline, a difference in the wrong
order, the top-1 claim tested as directional instead of within its margin, the views compared at
the default K instead of the grid's largest, the wrong early-stopping checkpoint, a DP-SGD claim
that ignores a defence, the unlabelled claim read from the rows of all members. Unresolved cases
check n_for_80pct_power against the closed form n' = ⌈n · var / (d / (z_.975 + z_.8))²⌉."""

import math
import re
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from privssl.artefacts.claims import THESIS_SEMILEAK  # noqa: E402
from privssl.artefacts.semileak import SCORE_KEY, SEMILEAK, attach_score_ranks, load_semileak_metrics  # noqa: E402
from privssl.artefacts.specs import ArtefactError  # noqa: E402
from privssl.artefacts.tables import load_csv_file  # noqa: E402
from privssl.attacks.statistics import newcombe_difference  # noqa: E402
from privssl.io import atomic_write_parquet, pack_decisions  # noqa: E402
from privssl.reports.semileak_plots import ablations_figure, attacks_figure, steps_figure  # noqa: E402
from privssl.reports.semileak_report import (  # noqa: E402
    CLAIM_COLUMNS,
    claims_table,
    markdown,
)
from privssl.reports.semileak_trend import steps_trend, trend_markdown  # noqa: E402
from privssl.reports.verdicts import BARELY_MARGIN, CONTRADICTED, REPRODUCED, UNRESOLVED  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
THESIS_CSV = ROOT / "resources" / "thesis_semileak.csv"
W = 0.03  # half-width of every synthetic AUC, JS and accuracy interval (read by the unpaired parts only)
N = 400  # members = non-members = train = test records
LABELLED = 40  # the first 40 members are labelled
STEPS, EARLY, VIEWS = 1000, 400, 10
Z_POWER = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
OWN_SD = 0.3  # each row's own noise; the records' effect (sd 1) is shared by every row: the rows pair
RECORD = np.random.default_rng(2024).normal(0, 1, 2 * N)  # members first, then non-members
MEMBERS = {"all": slice(0, N), "labelled": slice(0, LABELLED), "unlabelled": slice(LABELLED, N)}
# The base scenario: every claim but no_overfitting (n = 400 is too few) reproduced for FixMatch
# (values at steps 200, 400, 1000; the AUCs are the binormal targets, the measured ones lie near).
BASE = {
    "ada": {200: 0.55, 400: 0.62, 1000: 0.80}, "ada_unlabelled": 0.79, "ada_labelled": 0.85,
    "baselines": {"nn": 0.66, "correctness": 0.52, "confidence": 0.62, "entropy": 0.68, "modified_entropy": 0.63},
    "test": {200: 0.50, 400: 0.60, 1000: 0.80}, "train": {200: 0.50, 400: 0.61, 1000: 0.81},
    "n_model": N, "js": {200: 0.05, 400: 0.08, 1000: 0.20},
    "views": {1: 0.65, 50: 0.85}, "similarity": {"cosine": 0.65, "correlation": 0.67, "euclidean": 0.70},
    "top1": 0.80, "dp": {10.0: (0.10, 0.52)},
}


# --------------------------------------------------------------------------------- the synthetic rows

def scores(key: tuple, auc: float, kind: str = "all") -> np.ndarray:
    """One row's scores (its members, then the N non-members): the shared record effect, the row's
    own noise (seeded by its key) and a member shift μ = √(2(1 + s²)) Φ⁻¹(auc), the binormal AUC."""
    own = np.random.default_rng(zlib.crc32(repr((*key, kind)).encode())).normal(0, OWN_SD, 2 * N)
    values = RECORD + own
    values[:N] += math.sqrt(2 * (1 + OWN_SD ** 2)) * stats.norm.ppf(auc)
    return np.r_[values[:N][MEMBERS[kind]], values[N:]]


def kernel(values: np.ndarray, m: int) -> np.ndarray:
    """ψ(x_i, y_j) = 1{x > y} + ½ 1{x = y} over every member × non-member pair."""
    x, y = values[:m, None], values[None, m:]
    return (x > y) + 0.5 * (x == y)


def auc(values: np.ndarray, m: int) -> float:
    return float(kernel(values, m).mean())


def delong_terms(a: np.ndarray, b: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The per-record placement differences of AUC_a − AUC_b from the kernel: members', non-members'."""
    ka, kb = kernel(a, m), kernel(b, m)
    return ka.mean(1) - kb.mean(1), ka.mean(0) - kb.mean(0)


def delong(a: np.ndarray, b: np.ndarray, m: int) -> tuple[float, float]:
    """(AUC_a − AUC_b, DeLong's paired variance) from the placement values of the kernel."""
    d10, d01 = delong_terms(a, b, m)
    return float(d10.mean()), d10.var(ddof=1) / d10.size + d01.var(ddof=1) / d01.size


def need(d: float, var: float, n: int, bound: float = 0.0) -> int:
    """The closed form: n' = ⌈n · var / ((d − bound) / (z_.975 + z_.8))²⌉."""
    return math.ceil(n * var / ((d - bound) / Z_POWER) ** 2)


def decisions(accuracy: float, n: int) -> str:
    """n test decisions, the first round(accuracy · n) right: two models' decisions nest, so their
    paired difference is the share of records on which they differ."""
    return pack_decisions(np.arange(n) < round(accuracy * n))


def _interval(value: float) -> tuple[float, float, float]:
    return value, max(value - W, 0.0), min(value + W, 1.0)


def key_of(target, eps, step, defence, attack, similarity="", views=np.nan, repeat=0) -> tuple:
    return (target, eps, step, defence, attack, similarity, views, *((repeat,) if repeat else ()))


def _rows(target, eps, step, defence, values, extra=None, repeat=0) -> list[dict]:
    """The rows of one model: its model columns, and per (attack, similarity, views) one row per
    member kind. Another repeat (training) draws every row's own noise anew."""
    test, train, n = values["test"][step], values["train"][step], values["n_model"]
    model = {"dataset": "digits", "repeat": repeat, "target": target, "eps": eps, "step": step, "steps": STEPS,
             "defence": defence,
             **dict(zip(("test_accuracy", "test_accuracy_lo", "test_accuracy_hi"), _interval(test))),
             **dict(zip(("train_accuracy", "train_accuracy_lo", "train_accuracy_hi"), _interval(train))),
             "n_test": n, "n_train": n, "overfitting": train - test, "test_decisions": decisions(test, n),
             **dict(zip(("js_entropy", "js_entropy_lo", "js_entropy_hi"), _interval(values["js"][step]))),
             "noise_multiplier": np.nan, "eps_spent": np.nan, "delta": np.nan, "accountant": "", **(extra or {})}
    default_auc = values["ada"][step] if defence == "none" else values["top1"]
    attacks = [(a, "", np.nan, True, values["baselines"][a]) for a in values["baselines"]]
    attacks.append(("data_augmentation", "js", VIEWS, True, default_auc))
    if step == STEPS and defence == "none" and target != "fixmatch_dpsgd":  # A_DA's ablations
        attacks += [("data_augmentation", "js", k, False, v) for k, v in values["views"].items()]
        attacks += [("data_augmentation", s, VIEWS, False, v) for s, v in values["similarity"].items()]
    rows = []
    for attack, similarity, views, default, value in attacks:
        for kind in ("all", "labelled", "unlabelled"):
            own = value
            if attack == "data_augmentation" and default and step == STEPS and defence == "none" and kind != "all":
                own = values[f"ada_{kind}"]
            row_scores = scores(key_of(target, eps, step, defence, attack, similarity, views, repeat), own, kind)
            members = len(row_scores) - N
            rows.append({**model, "attack": attack, "similarity": similarity, "views": views, "is_default": default,
                         "member_kind": kind, "n_members": members, "n_nonmembers": N, "accuracy": 0.6,
                         "accuracy_lo": 0.55, "accuracy_hi": 0.65,
                         **dict(zip(("auc", "auc_lo", "auc_hi"), _interval(auc(row_scores, members)))),
                         "ranks": stats.rankdata(row_scores), "scores": row_scores,
                         "tpr_at_0.1pct_fpr": 0.01, "tpr_at_0.1pct_fpr_lo": 0.0, "tpr_at_0.1pct_fpr_hi": 0.05,
                         "fp_at_0.1pct_fpr": 0, "tpr_at_1pct_fpr": 0.02, "tpr_at_1pct_fpr_lo": 0.01,
                         "tpr_at_1pct_fpr_hi": 0.06, "fp_at_1pct_fpr": 4})
    return rows


def dp_values(values: dict, test: float, dp_auc: float) -> dict:
    return {**values, "test": {STEPS: test}, "train": {STEPS: test}, "ada": {STEPS: dp_auc}, "ada_labelled": dp_auc,
            "ada_unlabelled": dp_auc}


def frame(algorithms=("fixmatch",), steps=(200, 400, 1000), repeat=0, **changes) -> pd.DataFrame:
    """The metrics of the algorithms (each with the base values and `changes`), the top-1 defence at
    the last step, and FixMatch by DP-SGD at each ε of values['dp'], as training `repeat` gives them."""
    values = {**BASE, **changes}
    rows = []
    for algorithm in algorithms:
        for step in steps:
            rows += _rows(algorithm, np.nan, step, "none", values, repeat=repeat)
        rows += _rows(algorithm, np.nan, STEPS, "top1", values, repeat=repeat)
    for eps, (test, dp_auc) in values["dp"].items():
        rows += _rows("fixmatch_dpsgd", eps, STEPS, "none", dp_values(values, test, dp_auc),
                      {"noise_multiplier": 1.234, "eps_spent": eps * 0.999, "delta": 1e-5, "accountant": "pld"},
                      repeat=repeat)
    return pd.DataFrame(rows)


def ada_scores(values: dict, step=STEPS, defence="none", kind="all", target="fixmatch", eps=np.nan,
               repeat=0) -> np.ndarray:
    """The scores of A_DA's default row as `frame` builds it."""
    own = values["ada"][step] if defence == "none" else values["top1"]
    if step == STEPS and defence == "none" and kind != "all":
        own = values[f"ada_{kind}"]
    return scores(key_of(target, eps, step, defence, "data_augmentation", "js", VIEWS, repeat), own, kind)


def baseline_scores(values: dict, attack: str, kind="all", repeat=0) -> np.ndarray:
    return scores(key_of("fixmatch", np.nan, STEPS, "none", attack, repeat=repeat), values["baselines"][attack], kind)


@pytest.fixture(scope="module")
def thesis() -> pd.DataFrame:
    return load_csv_file(THESIS_CSV, THESIS_SEMILEAK)


_TABLES: dict = {}


def table(thesis, early=EARLY, **kwargs) -> pd.DataFrame:
    """The claims table of `frame(**kwargs)` (built once per scenario: the tests only read it)."""
    key = repr((early, sorted(kwargs.items())))
    if key not in _TABLES:
        _TABLES[key] = claims_table(frame(**kwargs), thesis, early, VIEWS, "js")
    return _TABLES[key]


def row(result: pd.DataFrame, claim: str, target: str = "fixmatch") -> pd.Series:
    rows = result[(result.claim == claim) & (result.target == target)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def resolved(got: pd.Series) -> bool:
    return got.verdict in (REPRODUCED, CONTRADICTED) and np.isnan(got.n_for_80pct_power)


# --------------------------------------------------------------------------------- the base scenario

def test_the_synthetic_rows_have_the_aucs_they_were_built_for():
    """The measured AUCs lie near their binormal targets, so the scenarios below are what they say."""
    for value in (0.52, 0.62, 0.80, 0.85):
        got = auc(scores(("probe", value), value), N)
        assert got == pytest.approx(value, abs=0.03)


def test_base_scenario_reproduces_every_claim(thesis):
    result = table(thesis)
    assert list(result.columns) == CLAIM_COLUMNS
    assert list(result.claim) == ["ada_above_baselines", "ada_unlabelled", "no_overfitting", "js_rises_with_auc",
                                  "views", "similarity", "early_stopping", "top1", "dpsgd"]
    # no_overfitting needs n = 4000 images for a Newcombe interval inside ±0.05 (base: n = 400)
    assert set(result.verdict) == {REPRODUCED, UNRESOLVED} and row(result, "no_overfitting").verdict == UNRESOLVED
    assert all(resolved(r) for _, r in result[result.claim != "no_overfitting"].iterrows())
    quotes = thesis.set_index("claim")
    assert row(result, "top1").thesis_source == quotes.loc["early_stopping", "source"]
    assert row(result, "views").thesis_statement == quotes.loc["views", "statement"]


def test_differences_are_delongs_paired_differences_in_the_claims_order(thesis):
    """Each row's a − b and its interval: DeLong on the scores, a the side the claim says is larger."""
    result, z = table(thesis), stats.norm.ppf(0.975)
    cases = {
        "ada_above_baselines": (ada_scores(BASE), baseline_scores(BASE, "entropy"), N),
        "ada_unlabelled": (ada_scores(BASE, kind="unlabelled"), baseline_scores(BASE, "entropy", "unlabelled"),
                           N - LABELLED),
        "early_stopping": (ada_scores(BASE), ada_scores(BASE, step=EARLY), N),
        "top1": (ada_scores(BASE), ada_scores(BASE, defence="top1"), N),
    }
    for claim, (a, b, m) in cases.items():
        got = row(result, claim)
        d, var = delong(a, b, m)
        assert (got.value_a, got.value_b) == pytest.approx((auc(a, m), auc(b, m)), abs=1e-12), claim
        assert (got.difference, got.difference_lo, got.difference_hi) == pytest.approx(
            (d, d - z * math.sqrt(var), d + z * math.sqrt(var)), abs=1e-9), claim
        assert got.n_a == m and "DeLong" in got.design, claim
    ada = row(result, "ada_above_baselines")
    assert ada.compared == "A_DA vs Ent (the least settled part)"


# --------------------------------------------------------------------------------- each claim both ways

def test_ada_is_compared_with_the_strongest_baseline(thesis):
    """A_DA between the baselines: above the weakest, below the strongest, which decides."""
    values = {"baselines": {**BASE["baselines"], "entropy": 0.92}}
    got = row(table(thesis, **values), "ada_above_baselines")
    assert got.compared == "A_DA vs Ent (the least settled part)" and got.value_b > 0.9
    assert got.verdict == CONTRADICTED and got.difference_hi < 0
    values = {"baselines": {**BASE["baselines"], "nn": 0.90}, "ada": {**BASE["ada"], 1000: 0.85}}
    assert row(table(thesis, **values), "ada_above_baselines").compared == "A_DA vs A_NN (the least settled part)"


def test_ada_against_every_baseline_refuses_a_missing_baseline(thesis):
    """Judged against fewer baselines, 'above every baseline' could pass by leaving the strongest out."""
    metrics = frame()
    with pytest.raises(ValueError, match="lacks the baseline rows entropy"):
        claims_table(metrics[metrics.attack != "entropy"], thesis, EARLY, VIEWS, "js")


def test_ada_unlabelled_reads_the_unlabelled_members_rows(thesis):
    """A_DA weak on the unlabelled members (0.60 < Ent's 0.68) but strong on all (0.80)."""
    got = row(table(thesis, ada_unlabelled=0.60), "ada_unlabelled")
    assert got.verdict == CONTRADICTED and got.n_a == N - LABELLED
    assert got.value_a == pytest.approx(auc(ada_scores({**BASE, "ada_unlabelled": 0.60}, kind="unlabelled"),
                                            N - LABELLED), abs=1e-12)
    # the other way round: A_DA strong on the unlabelled members (0.79), weak on all (0.60)
    got = row(table(thesis, ada={**BASE["ada"], 1000: 0.60}), "ada_unlabelled")
    assert got.verdict == REPRODUCED


def test_an_unresolved_comparison_reports_the_members_for_80pct_power(thesis):
    """Ent about as strong as A_DA: unresolved, and the closed form from DeLong's variance."""
    values = {**BASE, "baselines": {**BASE["baselines"], "entropy": 0.795}}
    a, b = ada_scores(values), baseline_scores(values, "entropy")
    d, var = delong(a, b, N)
    assert abs(d) < 1.96 * math.sqrt(var) and d != 0  # the case is what it claims: the interval holds 0
    got = row(table(thesis, baselines=values["baselines"]), "ada_above_baselines")
    assert got.verdict == UNRESOLVED and got.compared == "A_DA vs Ent (the least settled part)"
    assert got.n_for_80pct_power == need(d, var, N)
    assert got.n_for_80pct_power > N  # an unresolved difference needs more members than measured


def test_js_rises_with_auc_both_ways(thesis):
    base = row(table(thesis), "js_rises_with_auc")
    assert base.verdict == REPRODUCED and (base.value_a, base.value_b) == (0.20, 0.05)
    assert "over 3 checkpoints = 1.00" in base.note
    falling = row(table(thesis, js={200: 0.30, 400: 0.25, 1000: 0.20}), "js_rises_with_auc")
    assert falling.verdict == CONTRADICTED and "over 3 checkpoints = -1.00" in falling.note
    # the JS distance rises, the AUC falls from the first checkpoint to the last
    assert row(table(thesis, ada={**BASE["ada"], 200: 0.90}), "js_rises_with_auc").verdict == CONTRADICTED


def test_views_compares_the_grids_largest_k_with_its_smallest(thesis):
    """K = 1 at 0.70, the default K = 10 at 0.80, K = 50 at 0.60: the grid's largest is below its
    smallest (contradicted) although the default is above it."""
    got = row(table(thesis, views={1: 0.70, 50: 0.60}), "views")
    assert got.verdict == CONTRADICTED and got.compared.startswith("K = 50 vs K = 1")
    reproduced = row(table(thesis), "views")
    assert reproduced.verdict == REPRODUCED and reproduced.compared.startswith("K = 50 vs K = 1")
    d, _ = delong(scores(key_of("fixmatch", np.nan, STEPS, "none", "data_augmentation", "js", 50), 0.85),
                  scores(key_of("fixmatch", np.nan, STEPS, "none", "data_augmentation", "js", 1), 0.65), N)
    assert reproduced.difference == pytest.approx(d, abs=1e-12)


def test_similarity_both_ways(thesis):
    assert row(table(thesis), "similarity").compared == "JS vs euclidean (the least settled part)"
    got = row(table(thesis, similarity={**BASE["similarity"], "cosine": 0.92}), "similarity")
    assert got.verdict == CONTRADICTED and got.compared == "JS vs cosine (the least settled part)"
    # every other similarity is a part of the claim, the strongest first
    got = row(table(thesis), "similarity")
    parts = [p.split(":")[0] for p in got.note.split("parts: ")[1].split("; ")]
    assert parts == ["JS − euclidean", "JS − correlation", "JS − cosine"]
    assert all("(reproduced)" in p for p in got.note.split("; "))


def test_early_stopping_reads_the_early_stopping_checkpoint(thesis):
    """Step 400 (the checkpoint released) leaks more than the last step, step 200 less:
    contradicted; the same values at step 200 alone decide nothing."""
    got = row(table(thesis, ada={200: 0.55, 400: 0.90, 1000: 0.80}), "early_stopping")
    assert got.verdict == CONTRADICTED and got.compared == f"last step ({STEPS}) vs early stopping (step {EARLY})"
    d, _ = delong(ada_scores(BASE), ada_scores({**BASE, "ada": {**BASE["ada"], 400: 0.90}}, step=EARLY), N)
    assert got.difference == pytest.approx(d, abs=1e-12) and got.difference_hi < 0
    # the other way round: step 400 below the last step, step 200 above it
    got = row(table(thesis, ada={200: 0.90, 400: 0.62, 1000: 0.80}), "early_stopping")
    assert got.verdict == REPRODUCED


def test_early_stopping_needs_both_the_auc_and_the_accuracy_lower(thesis):
    # a higher test accuracy when stopped early (0.90 vs 0.80) contradicts the trade-off
    got = row(table(thesis, test={**BASE["test"], 400: 0.90}, train={**BASE["train"], 400: 0.90}), "early_stopping")
    assert got.verdict == CONTRADICTED and "test accuracy, last − early" in got.note
    # an accuracy cost of 2 records in 400: unresolved, its need from the paired difference of 0/1 decisions
    got = row(table(thesis, test={**BASE["test"], 400: 0.795}, train={**BASE["train"], 400: 0.795}),
              "early_stopping")
    per_record = (np.arange(N) < 320).astype(float) - (np.arange(N) < 318)
    d, var = per_record.mean(), per_record.var(ddof=1) / N
    assert got.verdict == UNRESOLVED and got.n_for_80pct_power == need(d, var, N)


def test_top1_is_an_equivalence_test_within_the_margin(thesis):
    """"Barely lowers": a tiny drop is reproduced, a large one contradicted (a directional test
    would read both the other way: the large one reproduced, the tiny one unresolved)."""
    tiny = row(table(thesis), "top1")
    d, var = delong(ada_scores(BASE), ada_scores(BASE, defence="top1"), N)
    half = 1.96 * math.sqrt(var)
    assert d - half < 0 < d + half and -BARELY_MARGIN < d - half and d + half < BARELY_MARGIN  # the case
    assert tiny.verdict == REPRODUCED and tiny.test == f"|a − b| < {BARELY_MARGIN:g}"
    large = row(table(thesis, top1=0.60), "top1")
    assert large.verdict == CONTRADICTED and large.difference_lo > BARELY_MARGIN
    # a drop around the margin: unresolved, the need of the edge the interval crosses
    values = {**BASE, "top1": 0.775}
    d, var = delong(ada_scores(values), ada_scores(values, defence="top1"), N)
    half = 1.96 * math.sqrt(var)
    assert d - half < BARELY_MARGIN < d + half and d < BARELY_MARGIN  # the case
    got = row(table(thesis, top1=0.775), "top1")
    assert got.verdict == UNRESOLVED and got.n_for_80pct_power == need(d, var, N, BARELY_MARGIN)


def test_no_overfitting_verdicts(thesis):
    reproduced = row(table(thesis, n_model=4000), "no_overfitting")
    d, lo, hi = newcombe_difference(3240, 4000, 3200, 4000)  # train 0.81, test 0.80
    assert reproduced.verdict == REPRODUCED and -0.05 < lo < hi < 0.05
    assert (reproduced.value_a, reproduced.value_a_lo, reproduced.value_a_hi) == pytest.approx((d, lo, hi))
    assert reproduced.n_a == 4000 and "tolerance ±0.05" in reproduced.note
    over = row(table(thesis, train={**BASE["train"], 1000: 0.95}), "no_overfitting")
    assert over.verdict == CONTRADICTED and over.value_a_lo > 0.05
    chance = row(table(thesis, n_model=4000, ada={**BASE["ada"], 1000: 0.40}), "no_overfitting")
    assert chance.verdict == CONTRADICTED and chance.value_b_hi < 0.5
    unresolved = row(table(thesis), "no_overfitting")
    d, lo, hi = newcombe_difference(324, 400, 320, 400)
    assert unresolved.verdict == UNRESOLVED and -0.05 < lo < 0.05 < hi
    # the variance read off Newcombe's half-width; only the upper edge lies outside the band
    var = ((hi - lo) / (2 * stats.norm.ppf(0.975))) ** 2
    assert unresolved.n_for_80pct_power == need(d, var, N, 0.05)


# --------------------------------------------------------------------------------- DP-SGD

def dpsgd(thesis, **changes) -> pd.Series:
    return row(table(thesis, **changes), "dpsgd", "fixmatch_dpsgd")


def test_dpsgd_reproduced_when_below_every_defence_and_less_accurate(thesis):
    got = dpsgd(thesis)
    assert got.verdict == REPRODUCED and got.eps == 10.0
    for part in ("AUC, FixMatch − DP-SGD", "AUC, FixMatch with early stopping − DP-SGD",
                 "AUC, FixMatch with top-1 answer − DP-SGD", "test accuracy, FixMatch − DP-SGD"):
        assert part in got.note
    d, _ = delong(ada_scores(BASE), ada_scores(dp_values(BASE, 0.10, 0.52), target="fixmatch_dpsgd", eps=10.0), N)
    assert got.difference == pytest.approx(d, abs=1e-12) and got.value_b < 0.55


def test_dpsgd_above_the_early_stopped_fixmatch_is_contradicted(thesis):
    """DP-SGD (0.62) below FixMatch without defence (0.80) and with top-1 (0.80), but above FixMatch
    stopped early (0.52): not the most effective defence."""
    got = dpsgd(thesis, ada={**BASE["ada"], 400: 0.52}, dp={10.0: (0.10, 0.62)})
    assert got.verdict == CONTRADICTED
    assert "AUC, FixMatch with early stopping − DP-SGD: -" in got.note
    assert "(contradicted)" in got.note.split("early stopping − DP-SGD")[1].split(";")[0]


def test_dpsgd_above_the_top1_fixmatch_is_contradicted(thesis):
    got = dpsgd(thesis, top1=0.52, dp={10.0: (0.10, 0.62)})
    assert got.verdict == CONTRADICTED
    assert "(contradicted)" in got.note.split("top-1 answer − DP-SGD")[1].split(";")[0]


def test_dpsgd_needs_a_cost_in_accuracy(thesis):
    assert dpsgd(thesis, dp={10.0: (0.90, 0.52)}).verdict == CONTRADICTED  # more accurate than FixMatch
    got = dpsgd(thesis, dp={10.0: (0.795, 0.52)})  # 2 records in 400 less accurate: unresolved
    per_record = (np.arange(N) < 320).astype(float) - (np.arange(N) < 318)
    assert got.verdict == UNRESOLVED
    assert got.n_for_80pct_power == need(per_record.mean(), per_record.var(ddof=1) / N, N)


def test_dpsgd_states_the_guarantee(thesis):
    result = table(thesis, dp={1.0: (0.05, 0.51), 10.0: (0.10, 0.52)})
    rows = result[result.claim == "dpsgd"]
    assert list(rows.eps) == [1.0, 10.0] and set(rows.verdict) == {REPRODUCED}
    assert ("(ε = 9.99, δ = 1e-05) by the PLD accountant for add/remove of one training record (labelled or "
            "unlabelled; |d| public), Poisson sampling, σ = 1.23; the thesis's σ = 1e-5 gives no guarantee"
            ) in rows.note.iloc[1]


# --------------------------------------------------------------------------------- inputs and output

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
    assert "fixmatch_dpsgd (ε = 10)" in text
    assert all(f"**{claim}**" in text for claim in set(result.claim) - {"top1"})


def test_bad_input_is_refused(thesis):
    metrics = frame()
    metrics.loc[0, "test_accuracy"] = 0.1  # one row of a model disagrees with the others
    with pytest.raises(ValueError, match="model columns differ"):
        claims_table(metrics, thesis, EARLY, VIEWS, "js")
    with pytest.raises(ValueError, match="one row per claim; dpsgd"):
        claims_table(frame(), thesis[thesis.claim != "dpsgd"], EARLY, VIEWS, "js")
    metrics = frame()
    baseline = (metrics.attack == "entropy") & (metrics.member_kind == "all") & (metrics.step == STEPS)
    metrics.loc[baseline & (metrics.target == "fixmatch") & (metrics.defence == "none"), "n_members"] = N - 1
    with pytest.raises(ValueError, match="query different records"):
        claims_table(metrics, thesis, EARLY, VIEWS, "js")


# --------------------------------------------------------------------------------- figures and script

def _texts(fig) -> str:
    return "\n".join([ax.get_title() for ax in fig.axes] + [t.get_text() for ax in fig.axes for t in ax.texts])


def test_figures_build():
    metrics = frame(algorithms=("fixmatch", "flexmatch"))
    fig = attacks_figure(metrics)
    assert len(fig.axes) == 3 * 2 and "n = 360 members / 400 non-members" in _texts(fig)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["A_NN", "Conf", "Ent", "Ment", "Corr", "A_DA"]
    plt.close(fig)
    fig = steps_figure(metrics, EARLY)
    assert len(fig.axes) == 3 * 2
    assert all(any(line.get_gid() == "early_stopping" for line in ax.lines) for ax in fig.axes)
    plt.close(fig)
    fig = ablations_figure(metrics, EARLY)
    assert len(fig.axes) == 3 and "DP-SGD ε = 10" in _texts(fig)
    assert fig.axes[0].get_xscale() == "log"
    plt.close(fig)


def test_the_synthetic_metrics_pass_the_attack_rules_schema_and_their_scores_give_the_ranks(tmp_path):
    """metrics.csv and scores.parquet as the attack rule writes them (the script itself runs in
    test_tiny_run's DAG): the loader gives back every row's ranks."""
    metrics = frame(algorithms=("fixmatch", "flexmatch"))
    metrics.drop(columns=["ranks", "scores"]).to_csv(tmp_path / "metrics.csv", index=False)
    loaded = load_csv_file(tmp_path / "metrics.csv", SEMILEAK)
    lines = [pd.DataFrame({**{c: row[c] for c in SCORE_KEY}, "record": np.arange(len(row["scores"])),
                           "member": np.arange(len(row["scores"])) < row["n_members"], "score": row["scores"]})
             for _, row in metrics.iterrows()]
    atomic_write_parquet(pd.concat(lines, ignore_index=True), tmp_path / "scores.parquet")
    attached = attach_score_ranks(tmp_path / "scores.parquet", loaded)
    assert len(attached) == len(metrics)
    assert all(np.array_equal(a, b) for a, b in zip(attached.ranks, metrics.ranks))


def _write_repeat(metrics: pd.DataFrame, folder: Path, repeat: int, first: int,
                  nonmembers_first: int | None = None) -> tuple[Path, Path]:
    """One repeat's metrics.csv and scores.parquet, every row's scores on the records (pool
    indices) from `first` on (the non-members' from `nonmembers_first`, where given)."""
    folder.mkdir()
    metrics = metrics.assign(repeat=repeat)
    metrics.drop(columns=["ranks", "scores"]).to_csv(folder / "metrics.csv", index=False)

    def records(row) -> np.ndarray:
        index, member = first + np.arange(len(row["scores"])), np.arange(len(row["scores"])) < row["n_members"]
        if nonmembers_first is not None:
            index[~member] = nonmembers_first + np.arange((~member).sum())
        return index

    lines = [pd.DataFrame({**{c: row[c] for c in SCORE_KEY}, "record": records(row),
                           "member": np.arange(len(row["scores"])) < row["n_members"], "score": row["scores"]})
             for _, row in metrics.iterrows()]
    atomic_write_parquet(pd.concat(lines, ignore_index=True), folder / "scores.parquet")
    return folder / "metrics.csv", folder / "scores.parquet"


def test_the_repeats_pooled_record_by_record_must_have_queried_the_same_records(tmp_path):
    """over_trainings pools the repeats' per-record terms position by position, so repeats that
    queried other records of the same count would pool unrelated records: refused by name."""
    metrics = frame(algorithms=("fixmatch",))
    first = _write_repeat(metrics, tmp_path / "repeat0", 0, 0)
    same = _write_repeat(metrics, tmp_path / "repeat1", 1, 0)
    loaded = load_semileak_metrics([first[0], same[0]], [first[1], same[1]])
    assert sorted(loaded.repeat.unique()) == [0, 1]
    other = _write_repeat(metrics, tmp_path / "repeat2", 2, 1000)  # the same shape, other records
    with pytest.raises(ArtefactError, match=f"^{other[1]}: field 'record': other records"):
        load_semileak_metrics([first[0], other[0]], [first[1], other[1]])
    # each file alone is consistent: only the pooling across repeats sees it
    attach_score_ranks(other[1], load_csv_file(other[0], SEMILEAK))
    # the same members, other non-members: refused too
    swapped = _write_repeat(metrics, tmp_path / "repeat3", 3, 0, nonmembers_first=5000)
    with pytest.raises(ArtefactError, match=f"^{swapped[1]}: field 'record': other records"):
        load_semileak_metrics([first[0], swapped[0]], [first[1], swapped[1]])
    # another dataset is other records by design: its own record set, not the first dataset's
    elsewhere = _write_repeat(metrics.assign(dataset="fashion_mnist"), tmp_path / "fashion", 0, 1000)
    assert set(load_semileak_metrics([first[0], elsewhere[0]], [first[1], elsewhere[1]]).dataset) == {
        "digits", "fashion_mnist"}


# --------------------------------------------------------------------------------- the steps trend

def test_the_steps_trend_is_the_least_squares_slope_of_ada_on_log_steps_and_where_it_meets_the_thesis():
    rising = {200: 0.55, 400: 0.60, 1000: 0.66}
    metrics = frame(algorithms=("fixmatch", "uda"), ada=rising)
    trend = steps_trend(metrics)
    assert list(trend.target) == ["fixmatch", "uda"]  # not the DP-SGD target: it has one checkpoint
    steps = [200, 400, 1000]
    aucs = [auc(ada_scores({**BASE, "ada": rising}, step=s), N) for s in steps]
    row = trend.iloc[0]
    assert row.steps == "200 400 1000" and row.aucs == " ".join(f"{a:.3f}" for a in aucs)
    slope = np.polyfit(np.log2(steps), aucs, 1)[0]
    assert row.slope_per_doubling == pytest.approx(slope) and row.slope_lo < slope < row.slope_hi
    assert row.steps_to_thesis == pytest.approx(1000 * 2 ** ((0.78 - aucs[-1]) / slope))
    # the range: the slope's upper edge reaches the thesis's AUC soonest, its lower edge latest
    assert row.steps_to_thesis_lo == pytest.approx(1000 * 2 ** ((0.78 - aucs[-1]) / row.slope_hi))
    assert row.steps_to_thesis_lo < row.steps_to_thesis < row.steps_to_thesis_hi
    text = trend_markdown(trend)
    assert f"| 2^{np.log2(row.steps_to_thesis):.1f} [2^{np.log2(row.steps_to_thesis_lo):.1f}, " in text


def test_a_flat_trend_implies_no_number_of_steps_and_a_reached_one_needs_none():
    flat = steps_trend(frame(ada={200: 0.60, 400: 0.60, 1000: 0.60})).iloc[0]
    assert flat.slope_lo < 0 < flat.slope_hi and np.isinf(flat.steps_to_thesis_hi)
    assert "∞]" in trend_markdown(steps_trend(frame(ada={200: 0.60, 400: 0.60, 1000: 0.60})))
    reached = steps_trend(frame()).iloc[0]  # the base scenario ends at 0.80, above the thesis's 0.78
    assert reached.auc_last >= 0.78
    assert (reached.steps_to_thesis, reached.steps_to_thesis_lo, reached.steps_to_thesis_hi) == (1000, 1000, 1000)
    assert trend_markdown(steps_trend(frame(steps=(1000,)))) == ""


# --------------------------------------------------------------------------------- several trainings

def test_two_trainings_pool_to_the_mean_difference_with_the_records_and_the_trainings_spread(thesis):
    """Each training's A_DA − Ent (the least settled part) by DeLong (recomputed here from the kernel), then their
    mean; the variance Obuchowski–Rockette's: the trainings' spread / 2 plus the covariance of the
    two trainings' per-record placement differences (members' over m plus non-members' over n), a t
    interval on Hillis's df (s² + 2 Cov)² / s⁴."""
    result = claims_table(pd.concat([frame(), frame(repeat=1)], ignore_index=True), thesis, EARLY, VIEWS, "js")
    got = row(result, "ada_above_baselines")
    terms = [delong_terms(ada_scores(BASE, repeat=r), baseline_scores(BASE, "entropy", repeat=r), N) for r in (0, 1)]
    values = [members.mean() for members, _ in terms]
    assert values[0] != values[1]  # two trainings, each its own noise
    covariance = sum(np.cov(terms[0][k], terms[1][k])[0, 1] / terms[0][k].size for k in (0, 1))
    spread = np.var(values, ddof=1) / 2
    total = max(covariance, 0) + spread
    half = stats.t.ppf(0.975, total ** 2 / spread ** 2) * math.sqrt(total)
    assert got.difference == pytest.approx(np.mean(values), abs=1e-12)
    assert (got.difference_lo, got.difference_hi) == pytest.approx((np.mean(values) - half, np.mean(values) + half))
    assert got.trainings == 2 and (result.trainings == 2).all()
    assert got.note.startswith("the mean over 2 trainings")
    # side a: the mean of the two trainings' A_DA AUCs, pooled alike from their placements
    aucs = [auc(ada_scores(BASE, repeat=r), N) for r in (0, 1)]
    assert got.value_a == pytest.approx(np.mean(aucs))
    placements = [(k.mean(1), k.mean(0)) for k in (kernel(ada_scores(BASE, repeat=r), N) for r in (0, 1))]
    covariance = sum(np.cov(placements[0][k], placements[1][k])[0, 1] / placements[0][k].size for k in (0, 1))
    spread = np.var(aucs, ddof=1) / 2
    total = max(covariance, 0) + spread
    half = stats.t.ppf(0.975, total ** 2 / spread ** 2) * math.sqrt(total)
    assert (got.value_a_lo, got.value_a_hi) == pytest.approx((np.mean(aucs) - half, np.mean(aucs) + half))
    # side b: the pooled strongest baseline's AUC (entropy)
    best = [auc(baseline_scores(BASE, "entropy", repeat=r), N) for r in (0, 1)]
    assert got.value_b == pytest.approx(np.mean(best))


def test_the_verdict_is_the_pooled_differences_not_one_trainings(thesis):
    """More views help in training 0 and hurt in training 1 (each decisive alone): pooled, the
    difference is near 0 with the trainings' spread in its interval, so the claim is open."""
    flipped = {1: 0.85, 50: 0.65}
    alone = [claims_table(frame(), thesis, EARLY, VIEWS, "js"),
             claims_table(frame(repeat=1, views=flipped), thesis, EARLY, VIEWS, "js")]
    assert [row(t, "views").verdict for t in alone] == [REPRODUCED, CONTRADICTED]
    both = claims_table(pd.concat([frame(), frame(repeat=1, views=flipped)], ignore_index=True), thesis, EARLY,
                        VIEWS, "js")
    got = row(both, "views")
    assert got.verdict == UNRESOLVED and got.difference_lo < 0 < got.difference_hi
    assert got.difference == pytest.approx((row(alone[0], "views").difference + row(alone[1], "views").difference) / 2)


def test_similarity_parts_pool_by_name_when_the_trainings_order_them_differently(thesis):
    """Euclidean is training 0's strongest other similarity, cosine training 1's: each part pools
    the same named comparison, and the row's difference is its least settled part's: a contradicted
    part first, then an unresolved one, then a reproduced one, each group by its lowest bound."""
    other = {"cosine": 0.70, "correlation": 0.67, "euclidean": 0.65}
    both = claims_table(pd.concat([frame(), frame(repeat=1, similarity=other)], ignore_index=True), thesis, EARLY,
                        VIEWS, "js")
    got = row(both, "similarity")
    values = [BASE["similarity"], other]
    pooled = {name: np.mean([delong(ada_scores(BASE, repeat=r),
                                    scores(key_of("fixmatch", np.nan, STEPS, "none", "data_augmentation", name, VIEWS,
                                                  r), values[r][name]), N)[0] for r in (0, 1)])
              for name in BASE["similarity"]}
    for name, value in pooled.items():
        assert f"JS − {name}: {value:+.3f}" in got.note, (name, got.note)
    listed = re.findall(r"JS − (\w+): [+-][\d.]+ \[([+-][\d.]+), [+-][\d.]+\] \((\w+)", got.note)
    assert sorted(name for name, _, _ in listed) == sorted(pooled)
    rank = {CONTRADICTED: 0, UNRESOLVED: 1, REPRODUCED: 2}
    lead = min(listed, key=lambda part: (rank[part[2]], float(part[1])))[0]
    assert listed[0][0] == lead and got.difference == pytest.approx(pooled[lead], abs=1e-12)
    assert {verdict for _, _, verdict in listed} == {REPRODUCED, UNRESOLVED}  # the case: the order is by verdict
    assert lead != min(pooled, key=pooled.get)  # not the smallest difference, which is settled
    # side b: the least settled part's own AUC pooled over both trainings, not each training's strongest
    lead_auc = np.mean([auc(scores(key_of("fixmatch", np.nan, STEPS, "none", "data_augmentation", lead, VIEWS, r),
                                   values[r][lead]), N) for r in (0, 1)])
    assert got.value_b == pytest.approx(lead_auc, abs=1e-12)
    assert got.compared == f"JS vs {lead} (the least settled part)"
    assert got.value_a - got.value_b == pytest.approx(got.difference, abs=1e-12)


def test_ada_is_judged_against_every_baseline_pooled_by_name_not_each_trainings_best(thesis):
    """Ent is training 0's strongest baseline, A_NN training 1's: each part pools one named
    baseline over both trainings; the row shows the pooled strongest, and A_DA far above Ent but
    level with A_NN in training 1 is not yet 'above every baseline'."""
    other = {**BASE["baselines"], "nn": 0.79}
    both = claims_table(pd.concat([frame(), frame(repeat=1, baselines=other)], ignore_index=True), thesis, EARLY,
                        VIEWS, "js")
    got = row(both, "ada_above_baselines")
    values = [BASE, {**BASE, "baselines": other}]
    pooled = {name: np.mean([delong(ada_scores(BASE, repeat=r), baseline_scores(values[r], name, repeat=r), N)[0]
                             for r in (0, 1)]) for name in BASE["baselines"]}
    assert got.difference == pytest.approx(min(pooled.values()), abs=1e-12)
    lead = min(pooled, key=pooled.get)
    assert lead == "nn" and got.compared == "A_DA vs A_NN (the least settled part)"
    lead_auc = np.mean([auc(baseline_scores(values[r], lead, repeat=r), N) for r in (0, 1)])
    assert got.value_b == pytest.approx(lead_auc, abs=1e-12)
    assert got.value_a - got.value_b == pytest.approx(got.difference, abs=1e-12)
    # far above Ent in both trainings, level with A_NN in one: not yet above every baseline
    assert "A_DA − Ent: " in got.note and f"A_DA − Ent: {pooled['entropy']:+.3f}" in got.note
    assert got.verdict == UNRESOLVED and "(reproduced)" in got.note.split("A_DA − Ent: ")[1].split(";")[0]


def test_a_copied_training_counts_once_in_every_arm_it_is_in(thesis):
    """Repeat 1's FixMatch models copied from repeat 0 (the same seed, a cached file): every FixMatch
    row and the DP-SGD rows that compare with FixMatch rest on 1 training, whatever repeat 1's
    DP-SGD model is; the copy adds no spread, so the intervals are the one training's."""
    one = frame()
    two = frame(repeat=1)
    two = pd.concat([one[one.target == "fixmatch"].assign(repeat=1), two[two.target != "fixmatch"]])
    result = claims_table(pd.concat([one, two], ignore_index=True), thesis, EARLY, VIEWS, "js")
    assert (result.trainings == 1).all(), result[["claim", "target", "trainings"]]
    single = table(thesis)
    got, alone = row(result, "ada_above_baselines"), row(single, "ada_above_baselines")
    assert got.difference == pytest.approx(alone.difference, abs=1e-12)
    assert got.difference_hi - got.difference_lo == pytest.approx(alone.difference_hi - alone.difference_lo)
    # only DP-SGD trained twice: its own arm counts 2, the claim the fewer
    assert claims_table(pd.concat([one, frame(repeat=1)], ignore_index=True), thesis, EARLY, VIEWS,
                        "js").query("claim == 'dpsgd'").trainings.tolist() == [2]


def test_a_copied_model_attacked_again_is_still_one_training(thesis):
    """Repeat 1 is repeat 0's models (the same posteriors, so the same metric attacks' scores and
    test decisions) attacked with another seed (A_NN's and A_DA's scores differ): one training."""
    one, two = frame(), frame(repeat=1)
    metric = ["correctness", "confidence", "entropy", "modified_entropy"]
    copied = pd.concat([one[one.attack.isin(metric)].assign(repeat=1), two[~two.attack.isin(metric)]])
    result = claims_table(pd.concat([one, copied], ignore_index=True), thesis, EARLY, VIEWS, "js")
    assert (result.trainings == 1).all(), result[["claim", "target", "trainings"]]
    # and it is pooled once: every row is training 0's alone, not a mean over the attack's two seeds
    # with the seed's spread passed off as the trainings' (an interval narrower than one training's)
    alone = claims_table(one, thesis, EARLY, VIEWS, "js")
    columns = ["difference", "difference_lo", "difference_hi", "value_a", "value_a_lo", "value_a_hi", "note"]
    pd.testing.assert_frame_equal(result[columns], alone[columns])
    trend, trend_alone = steps_trend(pd.concat([one, copied], ignore_index=True)), steps_trend(one)
    trend_columns = ["slope_per_doubling", "slope_lo", "slope_hi", "auc_last_lo", "trainings"]
    pd.testing.assert_frame_equal(trend[trend_columns], trend_alone[trend_columns])


def test_two_trainings_of_equal_placements_are_two_trainings(thesis):
    """Two independent trainings whose A_DA separates members perfectly have equal DeLong placements
    (AUC 1) though their scores differ: they are two trainings, and both are pooled."""
    perfect = {**BASE["ada"], 1000: 0.999999}
    three = [frame(ada=perfect), frame(repeat=1, ada=perfect), frame(repeat=2)]
    got = row(claims_table(pd.concat(three, ignore_index=True), thesis, EARLY, VIEWS, "js"), "ada_above_baselines")
    aucs = [auc(ada_scores({**BASE, "ada": values}, repeat=r), N) for r, values in enumerate((perfect, perfect,
                                                                                              BASE["ada"]))]
    assert aucs[0] == aucs[1] == 1.0 and aucs[2] < 1  # the case is what it claims
    assert got.trainings == 3 and got.note.startswith("the mean over 3 trainings")
    assert got.value_a == pytest.approx(np.mean(aucs), abs=1e-12)  # all three, not the two perfect ones as one
    assert got.value_a - got.value_b == pytest.approx(got.difference, abs=1e-12)


def test_the_steps_trend_of_two_trainings_is_the_mean_of_their_slopes():
    def slope(repeat):
        aucs = [auc(ada_scores(BASE, step=s, repeat=repeat), N) for s in (200, 400, 1000)]
        return np.polyfit(np.log2([200, 400, 1000]), aucs, 1)[0]

    trend = steps_trend(pd.concat([frame(), frame(repeat=1)], ignore_index=True))
    (got,) = trend.itertuples(index=False)
    assert got.trainings == 2
    copied = steps_trend(pd.concat([frame(), frame().assign(repeat=1)], ignore_index=True))
    assert copied.trainings.tolist() == [1]  # a copy of training 0 is no second training
    assert got.slope_per_doubling == pytest.approx((slope(0) + slope(1)) / 2, abs=1e-12)
    assert slope(0) != pytest.approx(slope(1), abs=1e-6)
