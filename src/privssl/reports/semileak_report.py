"""The claims of thesis Ch. 3 (Semi-Leak) beside what the semi-supervised branch measured.

From the attack rule's metrics.csv (schema `artefacts.semileak.SEMILEAK`, one per dataset) and the thesis's
statements (resources/thesis_semileak.csv), one row per dataset, claim and algorithm (per ε for
DP-SGD). "A_DA" is the data-augmentation attack at its default views and similarity
(`is_default`), "baselines" A_NN and the four metric attacks, "last" the step N (`step == steps`);
every comparison is at defence `none` unless it is the defence's. AUCs carry their 95 % stratified
bootstrap intervals, accuracies their Clopper–Pearson intervals, the over-fitting (train − test
accuracy) Newcombe's hybrid score interval (`newcombe_difference`).

Every target, checkpoint and attack is queried on the same members and non-members, so two AUCs
are compared by DeLong's paired test on the records (privssl.attacks.paired_auc, from each row's
`ranks`: its per-record scores' ranks, from scores.parquet by artefacts.semileak.attach_score_ranks) and
two test accuracies by the difference paired on the test records (`test_decisions`).
Each claim is tested as the thesis words it (privssl.reports.verdicts):

* ada_above_baselines / ada_unlabelled: A_DA's AUC − each baseline's > 0 (all / unlabelled
  members), the row showing its least settled part;
* no_overfitting: the over-fitting within ±`OVERFITTING_TOLERANCE` (an equivalence test; the
  thesis gives no number, "nearly 0") and A_DA's AUC − 0.5 > 0;
* js_rises_with_auc: A_DA's AUC and the JS distance (entropy) higher at the last checkpoint than at
  the first (the JS distances' intervals combined as independent, which errs wide: they are on
  the same records); Spearman's ρ over the checkpoints in the note;
* views: "more views make A_DA stronger": the AUC at the grid's largest K − at its smallest > 0;
* similarity: JS's AUC − every other similarity's > 0;
* early_stopping: "lowers A_DA's AUC (at some cost in accuracy)": the AUC and the test accuracy at
  the last step − at the early-stopping step > 0, both;
* top1: "barely lowers A_DA's AUC": the AUC without − with the top-1 answer within
  ±`BARELY_MARGIN`, the ledger's margin (the thesis's drop: 0.918 → 0.906);
* dpsgd: "lowers the attack AUC most, at a large cost in accuracy": DP-SGD's AUC below FixMatch's
  without defence, with early stopping and with the top-1 answer (each measured), and its test
  accuracy below FixMatch's ("large" has no number: a drop beyond the interval).

Each claim is measured in every training (`repeat`: its own targets, shadows and attack) on the
same records, and the table's row is the mean over the trainings with an interval over records
and trainings (privssl.attacks.repeated.over_trainings: Obuchowski–Rockette with the trainings as
readers, the trainings' spread / R plus the records' covariance between trainings from the
per-record placements or decisions, on Hillis's df; the sides known by an interval only, the
over-fitting and the JS distance, by the bound of the mean record variance); one training is its
own row unchanged. `trainings` counts the independent ones behind the row's
fewer-trained model (repeats that score and decide every record alike are one training), which
the claims ledger's rule for claims about a training procedure reads.

A claim of several parts is contradicted when one part is, reproduced when all are, otherwise
unresolved with `n_for_80pct_power`: the members (= non-members) per side at which a replication
would settle its least settled part with 80 % power if the measured differences held. A claim
whose inputs were not measured (no DP-SGD, one checkpoint, a grid of one K) has no row.
"""

from __future__ import annotations

import dataclasses
import warnings
from functools import partial
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from privssl.attacks.paired_auc import paired_auc_difference, placements
from privssl.attacks.repeated import Estimate, unpaired_difference, versus_bound
from privssl.attacks.semi_leak_spec import DA_ATTACK, METRIC_ATTACKS, NN_ATTACK
from privssl.attacks.statistics import newcombe_difference
from privssl.reports.contrastive_report import _cell, difference_text, interval_text, need_text
from privssl.reports.decisions import paired
from privssl.reports.claims_spec import MIN_TRAININGS
from privssl.reports.regime import PAPER_LEAKS
from privssl.reports.release_table import check_frame
from privssl.reports.semileak_pooling import distinct_drafts, pooled, training_fingerprints, trainings_of
from privssl.reports.verdicts import (
    BARELY_MARGIN,
    directional,
    within,
)
from privssl.training.semi_supervised_spec import ALGORITHMS, CLAIMS, DPSGD_TARGET

THESIS_AUC = PAPER_LEAKS["semileak"][0]  # A_DA on FixMatch, WRN-28-2, CIFAR-10, 2^20 steps
DPSGD_BASE = "fixmatch"  # the algorithm DPSGD_TARGET trains by DP-SGD: its defence is compared with it
BASELINES = (NN_ATTACK, *METRIC_ATTACKS)
ATTACK_LABELS = {"nn": "A_NN", "correctness": "Corr", "confidence": "Conf", "entropy": "Ent",
                 "modified_entropy": "Ment", DA_ATTACK: "A_DA"}  # the thesis's names (Fig. 3.3); others by their own
JS = "js"  # the similarity the thesis finds best (§3.4.5)
OVERFITTING_TOLERANCE = 0.05  # "nearly 0 overfitting": the thesis gives no number
MODEL = ["dataset", "repeat", "target", "eps", "step", "defence"]  # a model of one training
MODEL_COLUMNS = ["steps", "test_accuracy", "test_accuracy_lo", "test_accuracy_hi", "n_test", "train_accuracy",
                 "train_accuracy_lo", "train_accuracy_hi", "n_train", "js_entropy", "js_entropy_lo", "js_entropy_hi",
                 "noise_multiplier", "eps_spent", "delta", "accountant", "test_decisions"]
METRIC_COLUMNS = MODEL + ["attack", "similarity", "views", "is_default", "member_kind", "n_members", "n_nonmembers",
                          "auc", "auc_lo", "auc_hi", "ranks"] + MODEL_COLUMNS
CLAIM_COLUMNS = ["dataset", "claim", "target", "eps", "quantity", "compared", "value_a", "value_a_lo", "value_a_hi",
                 "n_a", "value_b", "value_b_lo", "value_b_hi", "n_b", "difference", "difference_lo", "difference_hi",
                 "design", "test", "trainings", "verdict", "n_for_80pct_power", "note", "thesis_statement",
                 "thesis_values",
                 "thesis_source"]
Z95 = 1.959963984540054  # the normal quantile of a two-sided 95 % interval


# --------------------------------------------------------------------------------- selection

def check_metrics(metrics: pd.DataFrame) -> None:
    """The columns the report reads, and one value of each model column per model."""
    check_frame(metrics, METRIC_COLUMNS, "metrics.csv")
    spread = metrics.groupby(MODEL, dropna=False)[MODEL_COLUMNS].nunique(dropna=False)
    if (spread > 1).to_numpy().any():
        where = spread[(spread > 1).any(axis=1)].index[0]
        raise ValueError(f"metrics.csv: the model columns differ between the rows of one model "
                         f"{dict(zip(MODEL, where))}")


def models(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per model (dataset, target, ε, step, defence) with its accuracies, JS distance and
    over-fitting with Newcombe's interval (train and test accuracy as counts of independent sets)."""
    first = metrics.groupby(MODEL, dropna=False, sort=False)[MODEL_COLUMNS].first().reset_index()
    over = [newcombe_difference(round(r.train_accuracy * r.n_train), int(r.n_train),
                                round(r.test_accuracy * r.n_test), int(r.n_test)) for r in first.itertuples()]
    first["overfitting"], first["overfitting_lo"], first["overfitting_hi"] = (np.array(over).reshape(-1, 3).T
                                                                              if over else ([], [], []))
    return first


def ada(rows: pd.DataFrame) -> pd.DataFrame:
    """A_DA at its default views and similarity."""
    return rows[(rows.attack == DA_ATTACK) & rows.is_default.astype(bool)]


def _eps_is(frame: pd.DataFrame, eps) -> pd.Series:
    return frame.eps.isna() if eps is None or pd.isna(eps) else frame.eps == eps


def of(frame: pd.DataFrame, target: str, eps=None, **equal) -> pd.DataFrame:
    """Rows of one target (and ε: None for the non-DP targets) with the given column values."""
    keep = (frame.target == target) & _eps_is(frame, eps)
    for column, value in equal.items():
        keep &= frame[column] == value
    return frame[keep]


def last_step(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame.step == frame.steps]


def algorithms(frame: pd.DataFrame) -> list[str]:
    """The semi-supervised algorithms present, in the spec's order."""
    return [a for a in ALGORITHMS if (frame.target == a).any()]


# --------------------------------------------------------------------------------- comparisons

def _from_interval(value: float, lo: float, hi: float, n: int) -> Estimate:
    """An estimate known by its 95 % interval only (a bootstrap or Newcombe interval): its
    variance read off the half-width, the records' only."""
    se = (hi - lo) / (2 * Z95)
    return Estimate(float(value), float(lo), float(hi), int(n), 1, se ** 2, 0.0, np.inf)


def _auc_difference(a, b) -> Estimate:
    """AUC_a − AUC_b of two rows of one member kind: DeLong's paired difference on their records."""
    if (int(b.n_members), int(b.n_nonmembers)) != (int(a.n_members), int(a.n_nonmembers)):
        raise ValueError(f"metrics.csv: rows of one member kind query different records ({a.n_members} + "
                         f"{a.n_nonmembers} vs {b.n_members} + {b.n_nonmembers})")
    return paired_auc_difference(a.ranks, b.ranks, int(a.n_members))


def _accuracy_difference(a, b) -> Estimate:
    """Test accuracy of model a − of model b, paired on the test records."""
    return paired(pd.DataFrame([a]), pd.DataFrame([b]), "n_test", "test_decisions")


def _part(name: str, d: Estimate, test: Callable[[Estimate], tuple[str, float]], b: Estimate | None = None,
          compared: str | None = None) -> dict:
    """One comparison of a claim: its difference in one training, and the test (verdicts.directional,
    within, ...) its difference pooled over the trainings is judged by; `b` and `compared`: the side
    it compares with and its words, for a claim whose pooled row shows its least settled part
    (`least_settled_first`)."""
    return {"name": name, "d": d, "test": test, "b": b, "compared": compared}


def estimate_of(row, column: str = "auc", n_column: str = "n_members") -> Estimate:
    """One model's or attack's value with its interval; an AUC with its DeLong placements too, the
    per-record terms over_trainings pools across trainings on the same records (the other sides,
    an over-fitting or a JS distance, are known by their interval only)."""
    side = _from_interval(row[column], row[f"{column}_lo"], row[f"{column}_hi"], row[n_column])
    if column != "auc":
        return side
    return dataclasses.replace(side, record_terms=placements(row["ranks"], int(row["n_members"])))


def _one(rows: pd.DataFrame):
    return None if rows.empty else rows.iloc[0]


def _text(side: Estimate, with_n: bool = False) -> str:
    return interval_text(side.value, side.lo, side.hi, side.n if with_n else None)


def _row(dataset, claim, target, eps, quantity, compared, a: Estimate, b: Estimate, parts: list[dict], test: str,
         note, quote=None, design: str = "paired by record (DeLong)", arms=None, least_settled_first=False) -> dict:
    """A claim's row as one training measured it: its sides a and b, its parts and the models
    (target, ε) whose trainings it compares (`arms`: the row's target alone unless given); the
    trainings' rows are pooled into the table's row by `semileak_pooling.pooled`."""
    return {"key": (dataset, claim, target, np.nan if eps is None else float(eps)), "quantity": quantity,
            "compared": compared, "a": a, "b": b, "parts": parts, "test": test, "note": note,
            "quote": quote or claim, "design": design, "arms": arms or [(target, eps)],
            "least_settled_first": least_settled_first}


# --------------------------------------------------------------------------------- claims

def _ada_claims(dataset, rows, algorithm) -> list[dict]:
    """A_DA above every baseline: one part per baseline (A_NN and the metric attacks), reproduced
    when every part is (an intersection-union test, so no adjustment for their number), the row's
    difference the smallest pooled one. Not A_DA against each training's best baseline: that
    baseline is chosen on the same scores (its AUC biased upwards) and may differ between trainings."""
    out = []
    final = last_step(of(rows, algorithm, defence="none"))
    for claim, kind in (("ada_above_baselines", "all"), ("ada_unlabelled", "unlabelled")):
        here = final[final.member_kind == kind]
        attack = _one(ada(here))
        baselines = here[here.attack.isin(BASELINES)].assign(_order=lambda f: f.attack.map(BASELINES.index))
        if attack is None or baselines.empty:
            continue
        if missing := [b for b in BASELINES if b not in set(baselines.attack)]:  # "every baseline" needs them all
            raise ValueError(f"metrics.csv: {algorithm} ({kind} members, step {int(attack.step)}) lacks the "
                             f"baseline rows {', '.join(missing)} (allowed: every one of {', '.join(BASELINES)})")
        baselines = baselines.sort_values(["auc", "_order"], ascending=[False, True])
        parts = [_part(f"A_DA − {_label(b.attack)}", _auc_difference(attack, b), directional, b=estimate_of(b),
                       compared=f"A_DA vs {_label(b.attack)} (the least settled part)")
                 for _, b in baselines.iterrows()]
        best = baselines.iloc[0]
        out.append(_row(dataset, claim, algorithm, None, f"membership AUC, {kind} members, step {int(attack.step)}",
                        f"A_DA vs {_label(best.attack)} (the least settled part)", estimate_of(attack),
                        estimate_of(best), parts, "A_DA − each baseline > 0", "", least_settled_first=True))
    return out


def _label(attack: str) -> str:
    return ATTACK_LABELS.get(attack, attack)


def _no_overfitting(dataset, rows, model_rows, algorithm) -> list[dict]:
    model = _one(last_step(of(model_rows, algorithm, defence="none")))
    attack = _one(ada(last_step(of(rows, algorithm, defence="none", member_kind="all"))))
    if model is None or attack is None:
        return []
    tol = OVERFITTING_TOLERANCE
    over = _from_interval(model.overfitting, model.overfitting_lo, model.overfitting_hi, model.n_train)
    parts = [_part(f"over-fitting within ±{tol:g}", over, partial(within, margin=tol)),
             _part("A_DA AUC − 0.5", versus_bound(estimate_of(attack), 0.5), directional)]
    train = estimate_of(model, "train_accuracy", "n_train")
    note = (f"tolerance ±{tol:g} on train − test accuracy (the thesis: 'nearly 0 overfitting', no number); "
            f"train {_text(train, True)}, test {_text(_accuracy(model), True)}; over-fitting interval: Newcombe "
            f"hybrid score (members and test records are different records)")
    return [_row(dataset, "no_overfitting", algorithm, None,
                 f"over-fitting | A_DA AUC (all members), step {int(model.step)}",
                 f"over-fitting within ±{tol:g} | A_DA AUC above 0.5", estimate_of(model, "overfitting", "n_train"),
                 estimate_of(attack), parts, f"|over-fitting| < {tol:g} and AUC − 0.5 > 0", note,
                 design="over-fitting: train vs test records (independent); AUC: bootstrap over records")]


def _spearman(x, y) -> str:
    if len(x) < 3:
        return f"Spearman's ρ not computed ({len(x)} checkpoints)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant series: ρ is NaN
        rho = stats.spearmanr(x, y).statistic
    return f"Spearman's ρ(JS, A_DA AUC) over {len(x)} checkpoints = {rho:.2f}"


def _js_rises(dataset, rows, algorithm) -> list[dict]:
    series = ada(of(rows, algorithm, defence="none", member_kind="all")).sort_values("step")  # one row a step
    if series.step.nunique() < 2 or not (series.step == series.steps).any():
        return []
    first, last = series.iloc[0], series[series.step == series.steps].iloc[0]
    js = [_from_interval(r.js_entropy, r.js_entropy_lo, r.js_entropy_hi, r.n_members) for r in (last, first)]
    d_js, d_auc = unpaired_difference(*js), _auc_difference(last, first)
    parts = [_part("JS distance, last − first", d_js, directional),
             _part("A_DA AUC, last − first", d_auc, directional)]
    note = f"{_spearman(series.js_entropy, series.auc)}"
    return [_row(dataset, "js_rises_with_auc", algorithm, None, "JS distance (entropy) | A_DA AUC (all members)",
                 f"last (step {int(last.step)}) vs first checkpoint (step {int(first.step)})",
                 estimate_of(last, "js_entropy"), estimate_of(first, "js_entropy"), parts, "both differences > 0", note,
                 design="JS: bootstrap intervals combined as independent; AUC: paired by record (DeLong)")]


def _views(dataset, rows, algorithm, views: int, similarity: str) -> list[dict]:
    grid = last_step(of(rows, algorithm, defence="none", member_kind="all", attack=DA_ATTACK, similarity=similarity))
    by_k = {int(r.views): r for _, r in grid.sort_values("views").iterrows()}
    if len(by_k) < 2:
        return []
    small, large = min(by_k), max(by_k)
    d = _auc_difference(by_k[large], by_k[small])
    note = "; ".join(f"K = {k}: {_text(estimate_of(r))}" for k, r in by_k.items()) + f"; similarity {similarity}"
    return [_row(dataset, "views", algorithm, None, "A_DA AUC (all members), last step",
                 f"K = {large} vs K = {small} (the grid's largest and smallest)", estimate_of(by_k[large]),
                 estimate_of(by_k[small]), [_part(f"AUC at K = {large} − at K = {small}", d, directional)],
                 "a − b > 0", note)]


def _similarity(dataset, rows, algorithm, views: int) -> list[dict]:
    grid = last_step(of(rows, algorithm, defence="none", member_kind="all", attack=DA_ATTACK, views=views))
    js, others = _one(grid[grid.similarity == JS]), grid[grid.similarity != JS].sort_values("auc", ascending=False)
    if js is None or others.empty:
        return []
    parts = [_part(f"JS − {other.similarity}", _auc_difference(js, other), directional, b=estimate_of(other),
                   compared=f"JS vs {other.similarity} (the least settled part)")
             for _, other in others.iterrows()]
    return [_row(dataset, "similarity", algorithm, None, f"A_DA AUC (all members), K = {views}, last step",
                 f"JS vs {others.iloc[0].similarity} (the least settled part)", estimate_of(js),
                 estimate_of(others.iloc[0]), parts, "JS − each other similarity > 0", "", least_settled_first=True)]


def _accuracy(model) -> dict:
    return estimate_of(model, "test_accuracy", "n_test")


def _early_stopping(dataset, rows, algorithm, early: int) -> list[dict]:
    out = []
    none = of(rows, algorithm, defence="none", member_kind="all")
    last, stopped = _one(ada(last_step(none))), _one(ada(none[none.step == early]))
    if last is not None and stopped is not None and early != last.step:
        d_auc, d_acc = _auc_difference(last, stopped), _accuracy_difference(last, stopped)
        parts = [_part("A_DA AUC, last − early", d_auc, directional),
                 _part("test accuracy, last − early", d_acc, directional)]
        note = (f"test accuracy {_text(_accuracy(last), True)} at step {int(last.step)} vs "
                f"{_text(_accuracy(stopped), True)} at step {early}")
        out.append(_row(dataset, "early_stopping", algorithm, None, "A_DA AUC (all members) | test accuracy",
                        f"last step ({int(last.step)}) vs early stopping (step {early})", estimate_of(last),
                        estimate_of(stopped), parts, "both differences > 0", note,
                        design="AUC: paired by record (DeLong); accuracy: paired by test record"))
    top1 = _one(ada(last_step(of(rows, algorithm, defence="top1", member_kind="all"))))
    if last is not None and top1 is not None:
        d = _auc_difference(last, top1)
        out.append(_row(dataset, "top1", algorithm, None, f"A_DA AUC (all members), step {int(last.step)}",
                        "no defence vs top-1 answer", estimate_of(last), estimate_of(top1),
                        [_part(f"AUC drop within ±{BARELY_MARGIN:g}", d, partial(within, margin=BARELY_MARGIN))],
                        f"|a − b| < {BARELY_MARGIN:g}",
                        f"'barely lowers': the AUC the top-1 answer removes must lie within ±{BARELY_MARGIN:g}, the "
                        "ledger's margin (the thesis: 0.918 → 0.906); test accuracy unchanged by construction (the "
                        "top-1 answer keeps the predicted label)", quote="early_stopping"))
    return out


def _dpsgd(dataset, rows, early: int) -> list[dict]:
    out = []
    fixmatch = of(rows, DPSGD_BASE, member_kind="all")
    reference = _one(ada(last_step(fixmatch[fixmatch.defence == "none"])))
    private = rows[(rows.target == DPSGD_TARGET) & (rows.defence == "none") & (rows.member_kind == "all")]
    if reference is None:
        return out
    others = {"early stopping": _one(ada(fixmatch[(fixmatch.defence == "none") & (fixmatch.step == early)])),
              "top-1 answer": _one(ada(last_step(fixmatch[fixmatch.defence == "top1"])))}
    for eps in sorted(private.eps.dropna().unique()):
        dp = _one(ada(last_step(private[private.eps == eps])))
        if dp is None:
            continue
        d_auc, d_acc = _auc_difference(reference, dp), _accuracy_difference(reference, dp)
        parts = [_part("AUC, FixMatch − DP-SGD", d_auc, directional)]
        for name, other in others.items():
            if other is not None and not (name == "early stopping" and int(other.step) == int(reference.step)):
                d = _auc_difference(other, dp)
                parts.append(_part(f"AUC, FixMatch with {name} − DP-SGD", d, directional))
        parts.append(_part("test accuracy, FixMatch − DP-SGD", d_acc, directional))
        note = (f"test accuracy {_text(_accuracy(reference), True)} vs {_text(_accuracy(dp), True)}; guarantee "
                f"(ε = {dp.eps_spent:.3g}, δ = {dp.delta:g}) by the {str(dp.accountant).upper()} accountant for "
                f"add/remove of one training record (labelled or unlabelled; |d| public), Poisson sampling, "
                f"σ = {dp.noise_multiplier:.3g}; the thesis's σ = 1e-5 gives no guarantee; model stacking is not run")
        out.append(_row(dataset, "dpsgd", DPSGD_TARGET, eps, "A_DA AUC (all members) | test accuracy, last step",
                        f"FixMatch (step {int(reference.step)}) vs FixMatch by DP-SGD, target ε = {eps:g} "
                        f"(step {int(dp.step)})", estimate_of(reference), estimate_of(dp), parts,
                        "every difference > 0 (the lowest AUC of the defences measured)", note,
                        design="AUC: paired by record (DeLong); accuracy: paired by test record",
                        arms=[(DPSGD_BASE, None), (DPSGD_TARGET, eps)]))
    return out


def thesis_claims(thesis: pd.DataFrame) -> dict[str, dict]:
    """claim -> its thesis row; every claim of `CLAIMS` once."""
    check_frame(thesis, ["claim", "statement", "quoted_values", "source"], "thesis_semileak.csv")
    counts = thesis.claim.value_counts()
    problems = [f"{c} ({counts.get(c, 0)} rows)" for c in CLAIMS if counts.get(c, 0) != 1]
    if problems:
        raise ValueError(f"thesis_semileak.csv must have one row per claim; {', '.join(problems)}")
    return {r["claim"]: r for r in thesis.to_dict("records")}


def _training_rows(own: pd.DataFrame, early_stopping: int, views: int, similarity: str) -> list[dict]:
    """Every claim's row as the models of one dataset and training measure it (module docstring)."""
    dataset, model_rows, rows = own.dataset.iloc[0], models(own), []
    for algorithm in algorithms(own):
        rows += (_ada_claims(dataset, own, algorithm)
                 + _no_overfitting(dataset, own, model_rows, algorithm)
                 + _js_rises(dataset, own, algorithm)
                 + _views(dataset, own, algorithm, views, similarity)
                 + _similarity(dataset, own, algorithm, views)
                 + _early_stopping(dataset, own, algorithm, early_stopping))
    return rows + _dpsgd(dataset, own, early_stopping)


def claims_table(metrics: pd.DataFrame, thesis: pd.DataFrame, early_stopping: int, views: int,
                 similarity: str) -> pd.DataFrame:
    """Every claim per dataset (in order of appearance) and algorithm, then DP-SGD per ε, with its
    verdict (module docstring), each row pooled over the dataset's trainings (`repeat`); `views`
    and `similarity` are A_DA's defaults, `early_stopping` the checkpoint step the early-stopping
    defence releases."""
    quotes = thesis_claims(thesis)
    check_metrics(metrics)
    fingerprints = training_fingerprints(metrics)
    trainings = trainings_of(fingerprints)
    drafts: dict[tuple, list[dict]] = {}
    for (_, repeat), own in metrics.groupby(["dataset", "repeat"], sort=False):
        for draft in _training_rows(own, early_stopping, views, similarity):
            drafts.setdefault(draft["key"], []).append({**draft, "repeat": int(repeat)})
    rows = []
    for key, group in drafts.items():
        dataset = key[0]
        arms = [trainings[dataset, target, None if eps is None else float(eps)] for target, eps in group[0]["arms"]]
        rows.append(pooled(distinct_drafts(group, fingerprints), min(arms), quotes))
    if not rows:
        raise ValueError("metrics.csv: no claim can be compared; it needs A_DA and baseline rows of FixMatch, "
                         "FlexMatch or UDA at their last step")
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


# --------------------------------------------------------------------------------- Markdown

def markdown(table: pd.DataFrame) -> str:
    """The claims table as one Markdown table; the thesis's statements, values and sources below it.
    (contrastive_report.markdown reads that branch's columns: λ, attacks and baselines.)"""
    check_frame(table, CLAIM_COLUMNS, "the claims table")
    lines = ["| dataset | claim | target | quantity | compared (a vs b) | a: value [95 % CI] (n) "
             "| b: value [95 % CI] (n) | a − b [95 % CI] | test | trainings | verdict | members for 80 % power "
             "| note |",
             "|---|---|---|---|---|---:|---:|---:|---|---:|---|---:|---|"]
    for r in table.itertuples(index=False):
        target = r.target + ("" if pd.isna(r.eps) else f" (ε = {r.eps:g})")
        lines.append(f"| {_cell(r.dataset)} | {r.claim} | {_cell(target)} | {_cell(r.quantity)} | {_cell(r.compared)} "
                     f"| {interval_text(r.value_a, r.value_a_lo, r.value_a_hi, r.n_a)} "
                     f"| {interval_text(r.value_b, r.value_b_lo, r.value_b_hi, r.n_b)} "
                     f"| {difference_text(r.difference, r.difference_lo, r.difference_hi)} | {_cell(r.test)} "
                     f"| {r.trainings} | {_cell(r.verdict)} | {need_text(r.n_for_80pct_power)} | {_cell(r.note)} |")
    quotes = table[table.claim.isin(CLAIMS)].drop_duplicates("claim")
    notes = [f"- **{r.claim}** ({_cell(r.thesis_source)}): “{_cell(r.thesis_statement)}” Values in the text: "
             f"{_cell(r.thesis_values)}." for r in quotes.itertuples(index=False)]
    return ("\n".join(lines) + "\n\nAUC with its 95 % stratified bootstrap interval and (n) members, accuracies with "
            "Clopper–Pearson intervals, over-fitting (train − test accuracy) with Newcombe's hybrid score interval. "
            "Every model and attack is queried on the same members and non-members, so two AUCs are compared by "
            "DeLong's test paired on the records and two test accuracies by their difference paired on the test "
            "records; a − b is the first part of the claim's test, the note lists every part. A part is reproduced "
            "when its interval lies on the claimed side (of 0, or inside the stated margin), contradicted when it "
            f"lies wholly on the other; over-fitting counts as near zero within ±{OVERFITTING_TOLERANCE:g} and "
            f"'barely' as within ±{BARELY_MARGIN:g} (margins of this report; the thesis gives none). 'members for 80 % "
            "power' is the members (= non-members) per side at which a replication would settle the claim's least "
            "settled part with 80 % power if the measured differences held; a claim of several parts needs them all "
            "at once, so its own power there is lower. Each row is the mean over the trainings (`trainings`: the "
            "independent ones behind the fewer-trained arm), its interval over records and trainings; this table's "
            f"verdict reads the data as if one training sufficed, the claims ledger leaves a row with fewer than "
            f"{MIN_TRAININGS} trainings unresolved (a claim about a training procedure)."
            "\n\nThe thesis (Ch. 3; its WRN-28-2, datasets and splits):"
            "\n\n" + "\n".join(notes) + "\n")
