"""The claims of thesis Ch. 3 (Semi-Leak) beside what the semi-supervised branch measured.

From the attack rule's metrics.csv (schema `artefacts.SEMILEAK`, one per dataset) and the thesis's
statements (resources/thesis_semileak.csv), one row per dataset, claim and algorithm (per ε for
DP-SGD). "A_DA" is the data-augmentation attack at its default views and similarity
(`is_default`), "baselines" A_NN and the four metric attacks, "last" the step N (`step == steps`);
every comparison is at defence `none` unless it is the defence's. AUCs carry their 95 % stratified
bootstrap intervals, accuracies their Clopper–Pearson intervals, the over-fitting (train − test
accuracy) Newcombe's hybrid score interval (`newcombe_difference`).

Each comparison "a > b" is read by `contrastive_report.directional_verdict` from the two intervals
(disjoint in the claimed direction: reproduced; the other way: contradicted; else not resolved). A
claim of several comparisons combines them:

* ada_above_baselines / ada_unlabelled: A_DA's AUC above the best baseline's (all / unlabelled members);
* no_overfitting: reproduced when the over-fitting interval lies inside [−0.05, 0.05] and A_DA's
  auc_lo > 0.5; contradicted when it lies entirely above 0.05 or auc_hi < 0.5. The thesis gives no
  number ("nearly 0 overfitting"): the 0.05 tolerance is this report's;
* js_rises_with_auc: A_DA's AUC and the JS distance (entropy) at the last checkpoint above the
  first: reproduced when both rise, contradicted when either falls; Spearman's ρ over the
  checkpoints in the note;
* views: AUC at the default K above the grid's smallest K (help) and the intervals at the largest
  K and the default overlapping (plateau); contradicted when the smallest K is above the default;
* similarity: JS above every other similarity; contradicted when any other is above JS;
* early_stopping: test accuracy and AUC lower at the early-stopping step than at N; contradicted
  when the AUC is higher there; `top1`: the same on the AUC only (the top-1 answer keeps the label);
* dpsgd: FixMatch by DP-SGD at each ε has lower test accuracy and AUC than FixMatch; contradicted
  when its AUC is higher.

Otherwise "not resolved", with `n_to_resolve`: the members (= non-members) per side at which the
unresolved comparisons would separate if the measured differences held (`n_to_resolve`). Disjoint
95 % intervals is a conservative test (overlap means "cannot tell", not "equal"), and a plateau read
from overlap is absence of evidence of a rise, which more members may remove. A claim whose inputs
were not measured (no DP-SGD, one checkpoint, a grid of one K) has no row.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

from privssl.attacks.statistics import n_to_resolve, newcombe_difference
from privssl.reports.contrastive_report import (
    CONTRADICTED,
    OVERLAP,
    REPRODUCED,
    _cell,
    directional_verdict,
    interval_text,
)
from privssl.reports.release_table import check_frame
from privssl.training.semi_supervised_spec import (
    ALGORITHMS,
    CLAIMS,
    DA_ATTACK,
    DPSGD_TARGET,
    METRIC_ATTACKS,
    NN_ATTACK,
)

BASELINES = (NN_ATTACK, *METRIC_ATTACKS)
ATTACK_LABELS = {"nn": "A_NN", "correctness": "Corr", "confidence": "Conf", "entropy": "Ent",
                 "modified_entropy": "Ment", DA_ATTACK: "A_DA"}  # the thesis's names (Fig. 3.3)
JS = "js"  # the similarity the thesis finds best (§3.4.5)
OVERFITTING_TOLERANCE = 0.05  # "nearly 0 overfitting": the thesis gives no number
MODEL = ["dataset", "target", "eps", "step", "defence"]
MODEL_COLUMNS = ["steps", "test_accuracy", "test_accuracy_lo", "test_accuracy_hi", "n_test", "train_accuracy",
                 "train_accuracy_lo", "train_accuracy_hi", "n_train", "js_entropy", "js_entropy_lo", "js_entropy_hi",
                 "noise_multiplier", "eps_spent", "delta", "accountant"]
METRIC_COLUMNS = MODEL + ["attack", "similarity", "views", "is_default", "member_kind", "n_members", "n_nonmembers",
                          "auc", "auc_lo", "auc_hi"] + MODEL_COLUMNS
CLAIM_COLUMNS = ["dataset", "claim", "target", "eps", "quantity", "compared", "value_a", "value_a_lo", "value_a_hi",
                 "n_a", "value_b", "value_b_lo", "value_b_hi", "n_b", "verdict", "n_to_resolve", "note",
                 "thesis_statement", "thesis_values", "thesis_source"]
NOT_RESOLVED = "not resolved"


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


def _side(row, column: str = "auc", n_column: str = "n_members") -> dict:
    return {"value": float(row[column]), "lo": float(row[f"{column}_lo"]), "hi": float(row[f"{column}_hi"]),
            "n": int(row[n_column])}


def _one(rows: pd.DataFrame):
    return None if rows.empty else rows.iloc[0]


# --------------------------------------------------------------------------------- verdicts

def _compare(a: dict, b: dict, n: int) -> tuple[str, float]:
    """"a > b" from the intervals, and the members it needs while they overlap."""
    verdict = directional_verdict(a["lo"], a["hi"], b["lo"], b["hi"])
    need = n_to_resolve(n, a["value"], a["lo"], a["hi"], b["value"], b["lo"], b["hi"]) if verdict == OVERLAP else np.nan
    return verdict, need


def _bound(value: float) -> dict:
    return {"value": value, "lo": value, "hi": value, "n": np.nan}


def _combined(parts: list[str], contradicted: bool, why: str = "") -> str:
    """Reproduced when every part is, contradicted when the claim's contradiction holds, otherwise
    not resolved (with the reason when no part is merely overlapping)."""
    if contradicted:
        return CONTRADICTED
    if all(p == REPRODUCED for p in parts):
        return REPRODUCED
    if why:
        return f"{NOT_RESOLVED}: {why}"
    return OVERLAP if OVERLAP in parts else f"{NOT_RESOLVED}: its comparisons point in opposite directions"


def _short(verdict: str) -> str:
    """A part's verdict in a note."""
    return "overlap" if verdict == OVERLAP else verdict


def _text(side: dict, with_n: bool = False) -> str:
    return interval_text(side["value"], side["lo"], side["hi"], side["n"] if with_n else None)


def _row(dataset, claim, target, eps, quantity, compared, a, b, verdict, needs, note, quotes, quote=None) -> dict:
    """A claims-table row; n_to_resolve only for a "not resolved" verdict, the largest need of the
    comparisons still overlapping (every part of the data grows together: the four parts are equal)."""
    needs = [x for x in needs if np.isfinite(x)]
    thesis = quotes[quote or claim]
    return {"dataset": dataset, "claim": claim, "target": target, "eps": np.nan if eps is None else float(eps),
            "quantity": quantity, "compared": compared,
            **{f"value_{k}{s}": side[key] for k, side in (("a", a), ("b", b)) for s, key in
               (("", "value"), ("_lo", "lo"), ("_hi", "hi"))}, "n_a": a["n"], "n_b": b["n"], "verdict": verdict,
            "n_to_resolve": max(needs) if verdict.startswith(NOT_RESOLVED) and needs else np.nan, "note": note,
            "thesis_statement": thesis["statement"], "thesis_values": thesis["quoted_values"],
            "thesis_source": thesis["source"]}


# --------------------------------------------------------------------------------- claims

def _ada_claims(dataset, rows, quotes, algorithm) -> list[dict]:
    out = []
    final = last_step(of(rows, algorithm, defence="none"))
    for claim, kind in (("ada_above_baselines", "all"), ("ada_unlabelled", "unlabelled")):
        here = final[final.member_kind == kind]
        attack = _one(ada(here))
        baselines = here[here.attack.isin(BASELINES)].assign(_order=lambda f: f.attack.map(BASELINES.index))
        if attack is None or baselines.empty:
            continue
        best = baselines.sort_values(["auc", "_order"], ascending=[False, True]).iloc[0]
        a, b = _side(attack), _side(best)
        verdict, need = _compare(a, b, a["n"])
        out.append(_row(dataset, claim, algorithm, None, f"membership AUC, {kind} members, step {int(attack.step)}",
                        f"A_DA vs best baseline ({ATTACK_LABELS[best.attack]})", a, b, verdict, [need],
                        "the best of A_NN and the four metric attacks by AUC; its interval is not adjusted for "
                        "choosing the best", quotes))
    return out


def _no_overfitting(dataset, rows, model_rows, quotes, algorithm) -> list[dict]:
    model = _one(last_step(of(model_rows, algorithm, defence="none")))
    attack = _one(ada(last_step(of(rows, algorithm, defence="none", member_kind="all"))))
    if model is None or attack is None:
        return []
    tol = OVERFITTING_TOLERANCE
    over, auc = _side(model, "overfitting", "n_train"), _side(attack)
    d, lo, hi = over["value"], over["lo"], over["hi"]
    inside, above = lo >= -tol and hi <= tol, lo > tol
    auc_part, auc_need = _compare(auc, _bound(0.5), auc["n"])
    n = auc["n"]
    if inside or above or d <= -tol:  # resolved, or below the band (test above train: not this claim's question)
        over_needs = []
    elif d < tol:  # both edges must come inside the band
        over_needs = [n_to_resolve(n, tol, tol, tol, d, lo, hi), n_to_resolve(n, d, lo, hi, -tol, -tol, -tol)]
    else:
        over_needs = [n_to_resolve(n, d, lo, hi, tol, tol, tol)]
    below = "" if d > -tol else f"over-fitting at or below −{tol:g} (test above train accuracy)"
    verdict = _combined([REPRODUCED if inside else OVERLAP, auc_part], above or auc_part == CONTRADICTED, below)
    train = _side(model, "train_accuracy", "n_train")
    note = (f"tolerance ±{tol:g} on train − test accuracy (the thesis: 'nearly 0 overfitting', no number); "
            f"train {_text(train, True)}, test {_text(_accuracy(model), True)}; over-fitting interval: Newcombe "
            f"hybrid score; A_DA AUC vs 0.5: {_short(auc_part)}")
    return [_row(dataset, "no_overfitting", algorithm, None,
                 f"over-fitting | A_DA AUC (all members), step {int(model.step)}",
                 f"over-fitting within ±{tol:g} | A_DA AUC above 0.5", over, auc, verdict, over_needs + [auc_need],
                 note, quotes)]


def _spearman(x, y) -> str:
    if len(x) < 3:
        return f"Spearman's ρ not computed ({len(x)} checkpoints)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant series: ρ is NaN
        rho = stats.spearmanr(x, y).statistic
    return f"Spearman's ρ(JS, A_DA AUC) over {len(x)} checkpoints = {rho:.2f}"


def _js_rises(dataset, rows, quotes, algorithm) -> list[dict]:
    series = ada(of(rows, algorithm, defence="none", member_kind="all")).sort_values("step")  # one row a step
    if series.step.nunique() < 2 or not (series.step == series.steps).any():
        return []
    first, last = series.iloc[0], series[series.step == series.steps].iloc[0]
    js = _side(last, "js_entropy"), _side(first, "js_entropy")
    auc = _side(last), _side(first)
    n = js[0]["n"]
    (js_part, js_need), (auc_part, auc_need) = _compare(*js, n), _compare(*auc, n)
    verdict = _combined([js_part, auc_part], CONTRADICTED in (js_part, auc_part))
    note = (f"A_DA AUC {_text(auc[1])} → {_text(auc[0])}: {_short(auc_part)}; JS distance: {_short(js_part)}; "
            f"{_spearman(series.js_entropy, series.auc)}")
    return [_row(dataset, "js_rises_with_auc", algorithm, None, "JS distance (entropy) | A_DA AUC (all members)",
                 f"last (step {int(last.step)}) vs first checkpoint (step {int(first.step)})", *js, verdict,
                 [js_need, auc_need], note, quotes)]


def _views(dataset, rows, quotes, algorithm, views: int, similarity: str) -> list[dict]:
    grid = last_step(of(rows, algorithm, defence="none", member_kind="all", attack=DA_ATTACK, similarity=similarity))
    by_k = {int(r.views): r for _, r in grid.sort_values("views").iterrows()}
    if views not in by_k or min(by_k) >= views:
        return []
    small, large = min(by_k), max(by_k)
    default, smallest, largest = _side(by_k[views]), _side(by_k[small]), _side(by_k[large])
    help_part, need = _compare(default, smallest, default["n"])
    rise = directional_verdict(largest["lo"], largest["hi"], default["lo"], default["hi"])
    plateau = large != views and rise == OVERLAP
    why = "" if help_part != REPRODUCED or plateau else (
        f"no plateau test (the grid's largest K is the default, {views})" if large == views else
        f"no plateau: K = {large} is {'above' if rise == REPRODUCED else 'below'} K = {views} beyond the intervals")
    verdict = _combined([help_part, REPRODUCED if plateau else OVERLAP], help_part == CONTRADICTED, why)
    note = (f"help (K = {views} above K = {small}): {_short(help_part)}; AUC at K = {large}: {_text(largest)}, plateau "
            f"(its interval overlaps K = {views}'s): {'yes' if plateau else 'no'}; similarity {similarity}")
    return [_row(dataset, "views", algorithm, None, "A_DA AUC (all members), last step",
                 f"K = {views} (default) vs K = {small}", default, smallest, verdict, [need], note, quotes)]


def _similarity(dataset, rows, quotes, algorithm, views: int) -> list[dict]:
    grid = last_step(of(rows, algorithm, defence="none", member_kind="all", attack=DA_ATTACK, views=views))
    js, others = _one(grid[grid.similarity == JS]), grid[grid.similarity != JS].sort_values("auc", ascending=False)
    if js is None or others.empty:
        return []
    a = _side(js)
    sides = {r.similarity: _side(r) for _, r in others.iterrows()}  # strongest first
    parts = {name: _compare(a, side, a["n"]) for name, side in sides.items()}
    verdict = _combined([p for p, _ in parts.values()], any(p == CONTRADICTED for p, _ in parts.values()))
    note = "; ".join(f"{name} {_text(sides[name])}: {_short(part)}" for name, (part, _) in parts.items())
    return [_row(dataset, "similarity", algorithm, None, f"A_DA AUC (all members), K = {views}, last step",
                 f"JS vs {others.iloc[0].similarity} (the strongest other)", a, _side(others.iloc[0]), verdict,
                 [need for _, need in parts.values()], note, quotes)]


def _accuracy(model) -> dict:
    return _side(model, "test_accuracy", "n_test")


def _early_stopping(dataset, rows, quotes, algorithm, early: int) -> list[dict]:
    out = []
    none = of(rows, algorithm, defence="none", member_kind="all")
    last, stopped = _one(ada(last_step(none))), _one(ada(none[none.step == early]))
    if last is not None and stopped is not None and early != last.step:
        a, b = _side(last), _side(stopped)
        n = a["n"]
        (acc_part, acc_need), (auc_part, auc_need) = _compare(_accuracy(last), _accuracy(stopped), n), _compare(a, b, n)
        verdict = _combined([acc_part, auc_part], auc_part == CONTRADICTED)
        note = (f"test accuracy {_text(_accuracy(last), True)} at step {int(last.step)} vs "
                f"{_text(_accuracy(stopped), True)} at step {early}: lower when stopped early: {_short(acc_part)}")
        out.append(_row(dataset, "early_stopping", algorithm, None, "A_DA AUC (all members) | test accuracy",
                        f"last step ({int(last.step)}) vs early stopping (step {early})", a, b, verdict,
                        [acc_need, auc_need], note, quotes))
    top1 = _one(ada(last_step(of(rows, algorithm, defence="top1", member_kind="all"))))
    if last is not None and top1 is not None:
        a, b = _side(last), _side(top1)
        verdict, need = _compare(a, b, a["n"])
        out.append(_row(dataset, "top1", algorithm, None, f"A_DA AUC (all members), step {int(last.step)}",
                        "no defence vs top-1 answer", a, b, verdict, [need],
                        "test accuracy unchanged by construction (the top-1 answer keeps the predicted label); "
                        "thesis columns: the early_stopping claim's (Table 3.4 lists top-k)", quotes,
                        quote="early_stopping"))
    return out


def _dpsgd(dataset, rows, quotes) -> list[dict]:
    out = []
    reference = _one(ada(last_step(of(rows, "fixmatch", defence="none", member_kind="all"))))
    private = rows[(rows.target == DPSGD_TARGET) & (rows.defence == "none") & (rows.member_kind == "all")]
    if reference is None:
        return out
    for eps in sorted(private.eps.dropna().unique()):
        dp = _one(ada(last_step(private[private.eps == eps])))
        if dp is None:
            continue
        a, b = _side(reference), _side(dp)
        n = a["n"]
        (acc_part, acc_need), (auc_part, auc_need) = _compare(_accuracy(reference), _accuracy(dp), n), _compare(a, b, n)
        verdict = _combined([acc_part, auc_part], auc_part == CONTRADICTED)
        note = (f"test accuracy {_text(_accuracy(reference), True)} vs {_text(_accuracy(dp), True)}: lower under "
                f"DP-SGD: {_short(acc_part)}; guarantee (ε = {dp.eps_spent:.3g}, δ = {dp.delta:g}) by the "
                f"{str(dp.accountant).upper()} accountant for add/remove of one training record (labelled or "
                f"unlabelled), Poisson sampling at the larger of the two sampling rates, "
                f"σ = {dp.noise_multiplier:.3g}; the thesis's σ = 1e-5 gives no guarantee")
        out.append(_row(dataset, "dpsgd", DPSGD_TARGET, eps, "A_DA AUC (all members) | test accuracy, last step",
                        f"FixMatch (step {int(reference.step)}) vs FixMatch by DP-SGD, target ε = {eps:g} "
                        f"(step {int(dp.step)})", a, b, verdict, [acc_need, auc_need], note, quotes))
    return out


def thesis_claims(thesis: pd.DataFrame) -> dict[str, dict]:
    """claim -> its thesis row; every claim of `CLAIMS` once."""
    check_frame(thesis, ["claim", "statement", "quoted_values", "source"], "thesis_semileak.csv")
    counts = thesis.claim.value_counts()
    problems = [f"{c} ({counts.get(c, 0)} rows)" for c in CLAIMS if counts.get(c, 0) != 1]
    if problems:
        raise ValueError(f"thesis_semileak.csv must have one row per claim; {', '.join(problems)}")
    return {r["claim"]: r for r in thesis.to_dict("records")}


def claims_table(metrics: pd.DataFrame, thesis: pd.DataFrame, early_stopping: int, views: int,
                 similarity: str) -> pd.DataFrame:
    """Every claim per dataset (in order of appearance) and algorithm, then DP-SGD per ε, with its
    verdict (module docstring); `views` and `similarity` are A_DA's defaults, `early_stopping` the
    checkpoint step the early-stopping defence releases."""
    quotes = thesis_claims(thesis)
    check_metrics(metrics)
    rows = []
    for dataset in dict.fromkeys(metrics.dataset):
        own = metrics[metrics.dataset == dataset]
        model_rows = models(own)
        for algorithm in algorithms(own):
            rows += (_ada_claims(dataset, own, quotes, algorithm)
                     + _no_overfitting(dataset, own, model_rows, quotes, algorithm)
                     + _js_rises(dataset, own, quotes, algorithm)
                     + _views(dataset, own, quotes, algorithm, views, similarity)
                     + _similarity(dataset, own, quotes, algorithm, views)
                     + _early_stopping(dataset, own, quotes, algorithm, early_stopping))
        rows += _dpsgd(dataset, own, quotes)
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
             "| b: value [95 % CI] (n) | verdict | members to resolve | note |",
             "|---|---|---|---|---|---:|---:|---|---:|---|"]
    for r in table.itertuples(index=False):
        target = r.target + ("" if pd.isna(r.eps) else f" (ε = {r.eps:g})")
        need = "" if pd.isna(r.n_to_resolve) else f"{int(r.n_to_resolve)}"
        lines.append(f"| {_cell(r.dataset)} | {r.claim} | {_cell(target)} | {_cell(r.quantity)} | {_cell(r.compared)} "
                     f"| {interval_text(r.value_a, r.value_a_lo, r.value_a_hi, r.n_a)} "
                     f"| {interval_text(r.value_b, r.value_b_lo, r.value_b_hi, r.n_b)} "
                     f"| {_cell(r.verdict)} | {need} | {_cell(r.note)} |")
    quotes = table[table.claim.isin(CLAIMS)].drop_duplicates("claim")
    notes = [f"- **{r.claim}** ({_cell(r.thesis_source)}): “{_cell(r.thesis_statement)}” Values in the text: "
             f"{_cell(r.thesis_values)}." for r in quotes.itertuples(index=False)]
    return ("\n".join(lines) + "\n\nAUC with its 95 % stratified bootstrap interval and (n) members, accuracies with "
            "Clopper–Pearson intervals, over-fitting (train − test accuracy) with Newcombe's hybrid score interval. "
            "A comparison is reproduced (contradicted) when the two intervals are disjoint in (against) the claimed "
            f"direction; over-fitting counts as near zero inside ±{OVERFITTING_TOLERANCE:g} (this report's "
            "tolerance; the thesis gives none). Disjoint 95 % intervals is a conservative test, so \"not resolved\" "
            "means this test cannot tell; 'members to resolve' is the members (= non-members) per side at which "
            "the intervals would separate if the measured difference held.\n\nThe thesis (Ch. 3; its WRN-28-2, "
            "datasets and splits):\n\n" + "\n".join(notes) + "\n")
