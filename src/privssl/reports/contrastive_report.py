"""The three claims of thesis Ch. 4 (He & Zhang) beside what the contrastive branch measured.

From the attack rule's metrics.csv (schema `artefacts.CONTRASTIVE`, one per dataset) and the
thesis's statements (resources/thesis_contrastive.csv):

1. membership: contrastive models are LESS vulnerable to membership inference than supervised
   models of the same architecture (the NN attack, the thesis's main one, and the strongest
   membership attack of each model);
2. attribute: contrastive models are MORE vulnerable to attribute inference (attribute_mlp,
   beside the majority-class baseline);
3. talos: Talos at λ > 0 lowers the attribute inference accuracy of the contrastive model
   (Talos at λ = 0) at no cost in task accuracy or membership privacy (NN attack).

Pooling over repeats (independent trainings): the decisions of every repeat are counted together,
correct = Σ round(accuracy · n), n = Σ n, with a Clopper–Pearson 95 % interval
(`privssl.attacks.statistics.accuracy_interval`); task accuracy the same over each model's held-out test set
(n_test), the attribute baseline the same over its n. The interval treats every decision as an
independent Bernoulli trial; decisions about one trained model share that model, so the spread
between trainings is not in it. `accuracy_std`, the standard deviation of the per-repeat
accuracies, is kept beside it so that a large spread between trainings shows.

Verdicts (`directional_verdict`, `no_cost_verdict`) are read from the two 95 % intervals only:

* a directional claim "a > b": `reproduced` when the intervals are disjoint in the claimed
  direction (a_lo > b_hi), `contradicted` when they are disjoint the other way (a_hi < b_lo),
  `not resolved: intervals overlap` otherwise (touching intervals overlap);
* a "no cost" claim (Talos keeps the task accuracy / the membership privacy of the contrastive
  model): `consistent: no difference beyond the intervals` when they overlap; `contradicted: ...`
  when Talos is worse (lower task accuracy, higher MIA accuracy) with disjoint intervals;
  `consistent: Talos better beyond the intervals (...)` when Talos is better with disjoint ones.

Disjoint 95 % intervals is a conservative test of a difference (two intervals can overlap while
the difference is significant at 5 %), so "not resolved" means "this test cannot tell", not "no
difference"; and overlap in a no-cost claim is absence of evidence of a cost, not a proof of
equality: with few decisions any two intervals overlap.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from privssl.attacks.contrastive_spec import ATTRIBUTE_ATTACK, CLAIMS, MEMBERSHIP_ATTACKS, NN_ATTACK, TARGET_KINDS
from privssl.attacks.statistics import accuracy_interval
from privssl.reports.release_table import check_frame

THESIS_COLUMNS = ["claim", "statement", "quoted_values", "source"]
METRIC_COLUMNS = ["dataset", "target", "lambda", "repeat", "inference", "attack", "task_accuracy", "n_test",
                  "accuracy", "n", "auc", "baseline"]
MODEL = ["dataset", "target", "lambda"]
KEY = MODEL + ["inference", "attack"]
POOLED_COLUMNS = KEY + ["repeats", "accuracy", "accuracy_lo", "accuracy_hi", "n", "accuracy_std", "auc_mean",
                        "baseline", "baseline_lo", "baseline_hi", "task_accuracy", "task_accuracy_lo",
                        "task_accuracy_hi", "n_test"]
CLAIM_COLUMNS = ["dataset", "claim", "quantity", "compared", "claimed", "lambda",
                 "attack_a", "value_a", "value_a_lo", "value_a_hi", "n_a",
                 "attack_b", "value_b", "value_b_lo", "value_b_hi", "n_b",
                 "baseline_a", "baseline_a_lo", "baseline_a_hi", "baseline_b", "baseline_b_lo", "baseline_b_hi",
                 "verdict", "note", "thesis_statement", "thesis_values", "thesis_source"]
REPRODUCED, CONTRADICTED, OVERLAP = "reproduced", "contradicted", "not resolved: intervals overlap"
NO_DIFFERENCE = "consistent: no difference beyond the intervals"


# --------------------------------------------------------------------------------- pooling

def pooled(values, counts) -> tuple[float, float, float, int]:
    """(accuracy, lo, hi, n) over every decision: correct = Σ round(value · count), n = Σ count."""
    values, counts = np.asarray(values, float), np.asarray(counts, float)
    n = int(counts.sum())
    if n <= 0:
        raise ValueError("no decisions to pool (n = 0)")
    correct = int(np.rint(values * counts).sum())
    return (*accuracy_interval(correct, n), n)


def check_metrics(metrics: pd.DataFrame) -> None:
    """The columns the report reads, and λ as the branch defines it: empty for supervised, 0 for
    contrastive (Talos at λ = 0), > 0 for Talos."""
    check_frame(metrics, METRIC_COLUMNS, "metrics.csv")
    unknown = sorted(set(map(str, metrics.target)) - set(TARGET_KINDS))
    if unknown:
        raise ValueError(f"metrics.csv: unknown target(s) {unknown}; allowed: {', '.join(TARGET_KINDS)}")
    lam = metrics["lambda"].astype(float)
    bad = {"supervised": lam.notna(), "contrastive": lam != 0, "talos": ~(lam > 0)}
    for target, wrong in bad.items():
        rows = metrics[(metrics.target == target) & wrong]
        if not rows.empty:
            expected = {"supervised": "empty", "contrastive": "0", "talos": "> 0"}[target]
            raise ValueError(f"metrics.csv: column lambda is {rows['lambda'].iloc[0]!r} on a {target} row "
                             f"(expected {expected})")


def pool_task(metrics: pd.DataFrame) -> pd.DataFrame:
    """Task accuracy per model kind (dataset, target, λ), pooled over repeats: each repeat's
    accuracy on its n_test held-out images counted once, whatever the number of attack rows."""
    check_metrics(metrics)
    models = metrics[MODEL + ["repeat", "task_accuracy", "n_test"]]
    per_model = models.groupby(MODEL + ["repeat"], dropna=False, sort=False)
    spread = per_model[["task_accuracy", "n_test"]].agg(lambda s: s.max() - s.min())
    if (spread > 1e-9).to_numpy().any():
        where = spread[(spread > 1e-9).any(axis=1)].index[0]
        raise ValueError(f"metrics.csv: task_accuracy or n_test differs between the rows of one model "
                         f"{dict(zip(MODEL + ['repeat'], where))}")
    first = per_model.first().reset_index()
    rows = []
    for key, group in first.groupby(MODEL, dropna=False, sort=False):
        accuracy, lo, hi, n = pooled(group.task_accuracy, group.n_test)
        rows.append({**dict(zip(MODEL, key)), "task_accuracy": accuracy, "task_accuracy_lo": lo,
                     "task_accuracy_hi": hi, "n_test": n})
    return pd.DataFrame(rows, columns=MODEL + ["task_accuracy", "task_accuracy_lo", "task_accuracy_hi", "n_test"])


def pool(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, target, λ, inference, attack): the attack's accuracy pooled over repeats with
    its 95 % interval and decisions, the std of the per-repeat accuracies, the mean AUC
    (membership), the pooled majority baseline (attribute) and the model's pooled task accuracy."""
    task = pool_task(metrics)  # also checks the columns
    rows = []
    for key, group in metrics.groupby(KEY, dropna=False, sort=False):
        accuracy, lo, hi, n = pooled(group.accuracy, group.n)
        row = {**dict(zip(KEY, key)), "repeats": group.repeat.nunique(), "accuracy": accuracy, "accuracy_lo": lo,
               "accuracy_hi": hi, "n": n, "accuracy_std": group.accuracy.std() if len(group) > 1 else np.nan,
               "auc_mean": group.auc.mean() if group.auc.notna().all() else np.nan,
               "baseline": np.nan, "baseline_lo": np.nan, "baseline_hi": np.nan}
        if group.baseline.notna().all():
            row["baseline"], row["baseline_lo"], row["baseline_hi"], _ = pooled(group.baseline, group.n)
        rows.append(row)
    frame = pd.DataFrame(rows)
    merged = frame.merge(task, on=MODEL, how="left", validate="many_to_one")
    return merged[POOLED_COLUMNS]


# --------------------------------------------------------------------------------- verdicts

def directional_verdict(a_lo: float, a_hi: float, b_lo: float, b_hi: float) -> str:
    """The claim "a > b" from two 95 % intervals: reproduced when disjoint with a above, contradicted
    when disjoint with a below, otherwise not resolved (touching intervals count as overlapping)."""
    if a_lo > b_hi:
        return REPRODUCED
    if a_hi < b_lo:
        return CONTRADICTED
    return OVERLAP


def no_cost_verdict(reference_lo: float, reference_hi: float, talos_lo: float, talos_hi: float,
                    higher_is_worse: bool, quantity: str) -> str:
    """The claim "Talos costs nothing in `quantity`" against the contrastive model (reference):
    consistent when the intervals overlap; contradicted when Talos is worse with disjoint intervals
    (higher if `higher_is_worse`, else lower); consistent and better when disjoint the other way."""
    if talos_lo > reference_hi:
        direction = "higher"
    elif talos_hi < reference_lo:
        direction = "lower"
    else:
        return NO_DIFFERENCE
    worse = (direction == "higher") == higher_is_worse
    if worse:
        return f"contradicted: Talos has {direction} {quantity} beyond the intervals"
    return f"consistent: Talos better beyond the intervals ({direction} {quantity})"


# --------------------------------------------------------------------------------- claims table

def thesis_claims(thesis: pd.DataFrame) -> dict[str, dict]:
    """claim -> its thesis row; every claim once."""
    check_frame(thesis, THESIS_COLUMNS, "thesis_contrastive.csv")
    counts = thesis.claim.value_counts()
    problems = [f"{c} ({counts.get(c, 0)} rows)" for c in CLAIMS if counts.get(c, 0) != 1]
    if problems:
        raise ValueError(f"thesis_contrastive.csv must have one row per claim; {', '.join(problems)}")
    return {r["claim"]: r for r in thesis.to_dict("records")}


def _side(stats: pd.DataFrame, target: str, lam: float | None, attack: str) -> dict | None:
    rows = stats[(stats.target == target) & (stats.attack == attack)
                 & (stats["lambda"].isna() if lam is None else stats["lambda"] == lam)]
    return None if rows.empty else rows.iloc[0].to_dict()


def _strongest(stats: pd.DataFrame, target: str) -> dict | None:
    """The membership attack with the highest pooled accuracy (a tie goes to the earlier attack of
    the spec's list, then to the name)."""
    rows = stats[(stats.target == target) & (stats.inference == "membership")]
    if rows.empty:
        return None
    order = {a: i for i, a in enumerate(MEMBERSHIP_ATTACKS)}
    ranked = rows.assign(_order=rows.attack.map(lambda a: order.get(a, len(order))))
    return ranked.sort_values(["accuracy", "_order", "attack"], ascending=[False, True, True]).iloc[0].to_dict()


def _values(side: dict, prefix: str, column: str, n_column: str) -> dict:
    return {f"value_{prefix}": side[column], f"value_{prefix}_lo": side[f"{column}_lo"],
            f"value_{prefix}_hi": side[f"{column}_hi"], f"n_{prefix}": int(side[n_column])}


def _baselines(a: dict, b: dict) -> dict:
    return {f"baseline_{p}{s}": side[f"baseline{s}"] for p, side in (("a", a), ("b", b)) for s in ("", "_lo", "_hi")}


def _baseline_note(a: dict, b: dict, names: tuple[str, str]) -> str:
    """Which sides the attack does not beat beyond the majority baseline (disjoint intervals)."""
    weak = [name for name, side in zip(names, (a, b)) if not side["accuracy_lo"] > side["baseline_hi"]]
    return "" if not weak else f"not above the majority baseline beyond the intervals: {', '.join(weak)}"


def _row(dataset, claim, quantity, compared, claimed, lam, a, b, column, n_column, verdict, note, thesis) -> dict:
    quote = thesis[claim]
    return {"dataset": dataset, "claim": claim, "quantity": quantity, "compared": compared, "claimed": claimed,
            "lambda": np.nan if lam is None else float(lam), "attack_a": a["attack"] if column == "accuracy" else "",
            **_values(a, "a", column, n_column), "attack_b": b["attack"] if column == "accuracy" else "",
            **_values(b, "b", column, n_column),
            **(_baselines(a, b) if column == "accuracy" and a["inference"] == "attribute" else {}),
            "verdict": verdict, "note": note, "thesis_statement": quote["statement"],
            "thesis_values": quote["quoted_values"], "thesis_source": quote["source"]}


def _membership(dataset, stats, thesis) -> list[dict]:
    rows = []
    supervised, contrastive = _side(stats, "supervised", None, NN_ATTACK), _side(stats, "contrastive", 0.0, NN_ATTACK)
    if supervised and contrastive:
        rows.append(_row(dataset, "membership", f"membership inference accuracy, NN attack ({NN_ATTACK})",
                         "supervised vs contrastive", "a > b", None, supervised, contrastive, "accuracy", "n",
                         directional_verdict(supervised["accuracy_lo"], supervised["accuracy_hi"],
                                             contrastive["accuracy_lo"], contrastive["accuracy_hi"]), "", thesis))
    supervised, contrastive = _strongest(stats, "supervised"), _strongest(stats, "contrastive")
    if supervised and contrastive:
        rows.append(_row(dataset, "membership",
                         f"membership inference accuracy, strongest attack (supervised: {supervised['attack']}; "
                         f"contrastive: {contrastive['attack']})", "supervised vs contrastive", "a > b", None,
                         supervised, contrastive, "accuracy", "n",
                         directional_verdict(supervised["accuracy_lo"], supervised["accuracy_hi"],
                                             contrastive["accuracy_lo"], contrastive["accuracy_hi"]),
                         "best of each model's membership attacks by pooled accuracy; the interval is the chosen "
                         "attack's own, not adjusted for choosing the best", thesis))
    return rows


def _attribute(dataset, stats, thesis) -> list[dict]:
    supervised = _side(stats, "supervised", None, ATTRIBUTE_ATTACK)
    contrastive = _side(stats, "contrastive", 0.0, ATTRIBUTE_ATTACK)
    if not (supervised and contrastive):
        return []
    return [_row(dataset, "attribute", f"attribute inference accuracy ({ATTRIBUTE_ATTACK})",
                 "supervised vs contrastive", "a < b", None, supervised, contrastive, "accuracy", "n",
                 directional_verdict(contrastive["accuracy_lo"], contrastive["accuracy_hi"],
                                     supervised["accuracy_lo"], supervised["accuracy_hi"]),
                 _baseline_note(supervised, contrastive, ("supervised", "contrastive")), thesis)]


def _talos(dataset, stats, thesis) -> list[dict]:
    rows = []
    for lam in sorted(stats.loc[stats.target == "talos", "lambda"].unique()):
        compared = f"contrastive (λ = 0) vs Talos (λ = {lam:g})"
        attribute = (_side(stats, "contrastive", 0.0, ATTRIBUTE_ATTACK), _side(stats, "talos", lam, ATTRIBUTE_ATTACK))
        if all(attribute):
            a, b = attribute
            rows.append(_row(dataset, "talos", f"attribute inference accuracy ({ATTRIBUTE_ATTACK})", compared,
                             "a > b", lam, a, b, "accuracy", "n",
                             directional_verdict(a["accuracy_lo"], a["accuracy_hi"], b["accuracy_lo"],
                                                 b["accuracy_hi"]),
                             _baseline_note(a, b, ("contrastive", f"Talos λ = {lam:g}")), thesis))
        models = (stats[(stats.target == "contrastive")], stats[(stats.target == "talos") & (stats["lambda"] == lam)])
        if not (models[0].empty or models[1].empty):
            a, b = models[0].iloc[0].to_dict(), models[1].iloc[0].to_dict()
            rows.append(_row(dataset, "talos", "task accuracy", compared, "b no lower than a (no cost)", lam, a, b,
                             "task_accuracy", "n_test",
                             no_cost_verdict(a["task_accuracy_lo"], a["task_accuracy_hi"], b["task_accuracy_lo"],
                                             b["task_accuracy_hi"], higher_is_worse=False,
                                             quantity="task accuracy"), "", thesis))
        membership = (_side(stats, "contrastive", 0.0, NN_ATTACK), _side(stats, "talos", lam, NN_ATTACK))
        if all(membership):
            a, b = membership
            rows.append(_row(dataset, "talos", f"membership inference accuracy, NN attack ({NN_ATTACK})", compared,
                             "b no higher than a (no cost)", lam, a, b, "accuracy", "n",
                             no_cost_verdict(a["accuracy_lo"], a["accuracy_hi"], b["accuracy_lo"], b["accuracy_hi"],
                                             higher_is_worse=True, quantity="membership inference accuracy"),
                             "", thesis))
    return rows


def claims_table(metrics: pd.DataFrame, thesis: pd.DataFrame) -> pd.DataFrame:
    """The three claims per dataset (in the order the datasets first appear), measured side a
    against side b with pooled 95 % intervals, the thesis's statement and values, and a verdict
    from the intervals (module docstring). A comparison whose two sides were not both measured
    (e.g. no attribute on a dataset without a sensitive attribute) has no row."""
    quotes = thesis_claims(thesis)
    stats = pool(metrics)
    rows = []
    for dataset in dict.fromkeys(stats.dataset):
        own = stats[stats.dataset == dataset]
        rows += _membership(dataset, own, quotes) + _attribute(dataset, own, quotes) + _talos(dataset, own, quotes)
    if not rows:
        raise ValueError("metrics.csv: no claim can be compared; it needs supervised and contrastive (λ = 0) rows "
                         "of one attack, or contrastive and Talos (λ > 0) rows")
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


# --------------------------------------------------------------------------------- Markdown

def _cell(text) -> str:
    return "" if text is None or (isinstance(text, float) and math.isnan(text)) else str(text).replace("|", "\\|")


def interval_text(value: float, lo: float, hi: float, n=None) -> str:
    """0.xxx [lo, hi] (n), or "—" where there is no value."""
    if value is None or np.isnan(value):
        return "—"
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]" + ("" if n is None or pd.isna(n) else f" ({int(n)})")


def markdown(table: pd.DataFrame) -> str:
    """The claims table as one Markdown table; the thesis's statements, values and sources below it."""
    check_frame(table, CLAIM_COLUMNS, "the claims table")
    lines = [("| dataset | claim | quantity | compared (a vs b) | claimed | a: value [95 % CI] (n) "
              "| b: value [95 % CI] (n) | majority baseline a; b | verdict | note |"),
             "|---|---|---|---|---|---:|---:|---:|---|---|"]
    for r in table.itertuples(index=False):
        baseline = "" if pd.isna(r.baseline_a) else (
            f"{interval_text(r.baseline_a, r.baseline_a_lo, r.baseline_a_hi)}; "
            f"{interval_text(r.baseline_b, r.baseline_b_lo, r.baseline_b_hi)}")
        lines.append(f"| {_cell(r.dataset)} | {r.claim} | {_cell(r.quantity)} | {_cell(r.compared)} "
                     f"| {_cell(r.claimed)} | {interval_text(r.value_a, r.value_a_lo, r.value_a_hi, r.n_a)} "
                     f"| {interval_text(r.value_b, r.value_b_lo, r.value_b_hi, r.n_b)} | {baseline} "
                     f"| {_cell(r.verdict)} | {_cell(r.note)} |")
    quotes = table.drop_duplicates("claim")
    notes = [f"- **{r.claim}** ({_cell(r.thesis_source)}): “{_cell(r.thesis_statement)}” Values in the text: "
             f"{_cell(r.thesis_values)}." for r in quotes.itertuples(index=False)]
    return ("\n".join(lines) + "\n\nValues pooled over repeats (independent trainings): accuracy over every decision "
            "with its Clopper–Pearson 95 % interval and (n) decisions; task accuracy over the held-out test images. "
            "Verdicts from the two intervals only: a directional claim is reproduced (contradicted) when they are "
            "disjoint in (against) the claimed direction; a no-cost claim is consistent while they overlap. Disjoint "
            "95 % intervals is a conservative test, so overlap means the test cannot tell, not that the values are "
            "equal.\n\nThe thesis (He, Ch. 4; its own architectures and splits):\n\n" + "\n".join(notes) + "\n")
