"""The three claims of thesis Ch. 4 (He & Zhang) beside what the contrastive branch measured.

From the attack rule's metrics.csv (schema `artefacts.contrastive.CONTRASTIVE`, one per dataset) and the
thesis's statements (resources/thesis_contrastive.csv):

1. membership: contrastive models are LESS vulnerable to membership inference than supervised
   models of the same architecture (the NN attack, the thesis's main one, and the strongest
   membership attack of each model), on the membership task's models where the run has them
   (inference `membership_task`), else on the task's;
2. attribute: contrastive models are MORE vulnerable to attribute inference (attribute_mlp,
   beside the majority-class baseline);
3. talos: Talos at λ > 0 lowers the attribute inference accuracy of the contrastive model
   (Talos at λ = 0) at no cost in task accuracy or membership privacy (NN attack on the task's
   models, the released ones).

Pooling over repeats (independent trainings of every model on the same records): every value is
the mean decision over the repeats, its 95 % interval clustered by record
(privssl.attacks.repeated: the records, not the decisions, are the independent units; a repeat is
a draw). Every target is attacked on the same members and non-members (target_train, target_test),
its task accuracy measured on the same held-out images and its attribute inferred for the same
members, so a comparison of two targets is a difference paired on those records.
`accuracy_std`, the standard deviation of the per-repeat accuracies, is kept beside it so that a
large spread between trainings shows.

Verdicts (privssl.reports.verdicts) are read from the interval of the paired difference, as each
claim is worded:

* a directional claim "a > b" (supervised leaks membership more; contrastive leaks the attribute
  more; Talos lowers the attribute accuracy): reproduced when the difference's interval lies above
  0, contradicted when below, otherwise unresolved with the records that would settle it at 80 %
  power;
* a "no cost" claim (Talos keeps the task accuracy / the membership privacy of the contrastive
  model): the cost (accuracy lost, MIA accuracy gained) must stay below `NO_COST_MARGIN`, a margin
  of the ledger's (the thesis gives none): reproduced when the cost's interval lies below it,
  contradicted when above it, otherwise unresolved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from privssl.attacks.contrastive_spec import (
    ATTRIBUTE,
    ATTRIBUTE_ATTACK,
    CLAIMS,
    MEMBERSHIP,
    MEMBERSHIP_ATTACKS,
    MEMBERSHIP_TASK,
    METRIC_ATTACKS,
    NN_ATTACK,
    TARGET_KINDS,
)
from privssl.attacks.repeated import Estimate
from privssl.reports.claims_spec import MIN_TRAININGS
from privssl.reports.decisions import distinct_trainings, estimate, paired
from privssl.reports.release_table import check_frame
from privssl.reports.verdicts import NO_COST_MARGIN, at_most, directional

THESIS_COLUMNS = ["claim", "statement", "quoted_values", "source"]
METRIC_COLUMNS = ["dataset", "target", "lambda", "repeat", "inference", "attack", "task_accuracy", "n_test",
                  "accuracy", "n", "auc", "baseline", "decisions", "task_decisions", "baseline_decisions"]
MODEL = ["dataset", "target", "lambda"]
KEY = MODEL + ["inference", "attack"]
POOLED_COLUMNS = KEY + ["repeats", "trainings", "accuracy", "accuracy_lo", "accuracy_hi", "n", "accuracy_std",
                        "auc_mean", "baseline", "baseline_lo", "baseline_hi", "task_accuracy", "task_accuracy_lo",
                        "task_accuracy_hi", "n_test"]
CLAIM_COLUMNS = ["dataset", "claim", "quantity", "compared", "claimed", "lambda",
                 "attack_a", "value_a", "value_a_lo", "value_a_hi", "n_a", "draws_a",
                 "attack_b", "value_b", "value_b_lo", "value_b_hi", "n_b", "draws_b",
                 "difference", "difference_lo", "difference_hi", "design", "test",
                 "baseline_a", "baseline_a_lo", "baseline_a_hi", "baseline_b", "baseline_b_lo", "baseline_b_hi",
                 "verdict", "n_for_80pct_power", "note", "thesis_statement", "thesis_values", "thesis_source"]


# --------------------------------------------------------------------------------- pooling

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


def _models(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per trained model (dataset, target, λ, repeat): its task accuracy and decisions,
    which every attack row of the model repeats."""
    models = metrics[MODEL + ["repeat", "task_accuracy", "n_test", "task_decisions"]]
    per_model = models.groupby(MODEL + ["repeat"], dropna=False, sort=False)
    spread = per_model[["task_accuracy", "n_test", "task_decisions"]].nunique()
    if (spread > 1).to_numpy().any():
        where = spread[(spread > 1).any(axis=1)].index[0]
        raise ValueError(f"metrics.csv: task_accuracy, n_test or task_decisions differs between the rows of one "
                         f"model {dict(zip(MODEL + ['repeat'], where))}")
    return per_model.first().reset_index()


def pool_task(metrics: pd.DataFrame) -> pd.DataFrame:
    """Task accuracy per model kind (dataset, target, λ) over its repeats, clustered by test image:
    each repeat's decisions on the n_test held-out images counted once, whatever the number of
    attack rows."""
    check_metrics(metrics)
    rows = []
    for key, group in _models(metrics).groupby(MODEL, dropna=False, sort=False):
        task = estimate(group, "n_test", "task_decisions")
        rows.append({**dict(zip(MODEL, key)), "task_accuracy": task.value, "task_accuracy_lo": task.lo,
                     "task_accuracy_hi": task.hi, "n_test": task.n})
    return pd.DataFrame(rows, columns=MODEL + ["task_accuracy", "task_accuracy_lo", "task_accuracy_hi", "n_test"])


def pool(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, target, λ, inference, attack): the attack's accuracy over the repeats with its
    95 % interval clustered by record and its records (n), the std of the per-repeat accuracies,
    the mean AUC (membership), the majority baseline on the same records (attribute) and the
    model's task accuracy."""
    task = pool_task(metrics)  # also checks the columns
    rows = []
    for key, group in metrics.groupby(KEY, dropna=False, sort=False):
        accuracy = estimate(group, "n")
        dataset, target, lam = key[:len(MODEL)]
        model = metrics[(metrics.dataset == dataset) & (metrics.target == target)
                        & _lambda_is(metrics, None if pd.isna(lam) else lam) & metrics.attack.isin(METRIC_ATTACKS)]
        # the model kind's independent trainings: its repeats that differ in some decision of some metric
        # attack (a function of the target's and shadow's posteriors alone: the NN, boundary and attribute
        # attacks draw each repeat's own seed, so a copied model attacked again would differ in those) or
        # some task decision
        row = {**dict(zip(KEY, key)), "repeats": group.repeat.nunique(),
               "trainings": distinct_trainings(model, ("decisions", "task_decisions")), "accuracy": accuracy.value,
               "accuracy_lo": accuracy.lo, "accuracy_hi": accuracy.hi, "n": accuracy.n,
               "accuracy_std": group.accuracy.std() if len(group) > 1 else np.nan,
               "auc_mean": group.auc.mean() if group.auc.notna().all() else np.nan,
               "baseline": np.nan, "baseline_lo": np.nan, "baseline_hi": np.nan}
        if group.baseline_decisions.notna().all():
            baseline = estimate(group, "n", "baseline_decisions")
            row["baseline"], row["baseline_lo"], row["baseline_hi"] = baseline.value, baseline.lo, baseline.hi
        rows.append(row)
    frame = pd.DataFrame(rows)
    merged = frame.merge(task, on=MODEL, how="left", validate="many_to_one")
    return merged[POOLED_COLUMNS]


# --------------------------------------------------------------------------------- claims table

def thesis_claims(thesis: pd.DataFrame) -> dict[str, dict]:
    """claim -> its thesis row; every claim once."""
    check_frame(thesis, THESIS_COLUMNS, "thesis_contrastive.csv")
    counts = thesis.claim.value_counts()
    problems = [f"{c} ({counts.get(c, 0)} rows)" for c in CLAIMS if counts.get(c, 0) != 1]
    if problems:
        raise ValueError(f"thesis_contrastive.csv must have one row per claim; {', '.join(problems)}")
    return {r["claim"]: r for r in thesis.to_dict("records")}


def _lambda_is(frame: pd.DataFrame, lam: float | None) -> pd.Series:
    return frame["lambda"].isna() if lam is None else frame["lambda"] == lam


def _side(stats: pd.DataFrame, target: str, lam: float | None, attack: str, inference: str) -> dict | None:
    rows = stats[(stats.target == target) & (stats.attack == attack) & (stats.inference == inference)
                 & _lambda_is(stats, lam)]
    return None if rows.empty else rows.iloc[0].to_dict()


def _attack_rows(metrics: pd.DataFrame, side: dict) -> pd.DataFrame:
    """The repeats' metric rows behind one pooled side."""
    lam = None if pd.isna(side["lambda"]) else side["lambda"]
    return metrics[(metrics.target == side["target"]) & (metrics.attack == side["attack"])
                   & (metrics.inference == side["inference"]) & _lambda_is(metrics, lam)]


def _model_rows(metrics: pd.DataFrame, target: str, lam: float | None) -> pd.DataFrame:
    models = _models(metrics)
    return models[(models.target == target) & _lambda_is(models, lam)]


def _strongest(stats: pd.DataFrame, target: str, inference: str) -> dict | None:
    """The membership attack with the highest pooled accuracy (a tie goes to the earlier attack of
    the spec's list, then to the name)."""
    rows = stats[(stats.target == target) & (stats.inference == inference)]
    if rows.empty:
        return None
    order = {a: i for i, a in enumerate(MEMBERSHIP_ATTACKS)}
    ranked = rows.assign(_order=rows.attack.map(lambda a: order.get(a, len(order))))
    return ranked.sort_values(["accuracy", "_order", "attack"], ascending=[False, True, True]).iloc[0].to_dict()


def _values(side: dict, prefix: str, column: str, n_column: str) -> dict:
    return {f"value_{prefix}": side[column], f"value_{prefix}_lo": side[f"{column}_lo"],
            f"value_{prefix}_hi": side[f"{column}_hi"], f"n_{prefix}": int(side[n_column]),
            f"draws_{prefix}": int(side["trainings"])}  # the ledger's trainings per arm


def _baselines(a: dict, b: dict) -> dict:
    return {f"baseline_{p}{s}": side[f"baseline{s}"] for p, side in (("a", a), ("b", b)) for s in ("", "_lo", "_hi")}


def _baseline_note(metrics: pd.DataFrame, a: dict, b: dict, names: tuple[str, str]) -> str:
    """Which sides the attack does not beat the majority guess on, beyond the interval of their
    difference (both decide the same members: paired by record)."""
    weak = [name for name, side in zip(names, (a, b))
            if not paired(_attack_rows(metrics, side), _attack_rows(metrics, side), "n", "decisions",
                          "baseline_decisions").lo > 0]
    return "" if not weak else f"not above the majority baseline beyond the paired interval: {', '.join(weak)}"


@dataclass(frozen=True)
class Compared:
    """What a row compares: the claim of the thesis, on which data set, which models (`compared`),
    at which Talos λ (None: not a Talos comparison)."""

    dataset: str
    claim: str
    compared: str
    lam: float | None
    thesis: dict  # the thesis's quotes by claim (thesis_claims)


@dataclass(frozen=True)
class Tested:
    """A row's two sides (pooled rows of `column`, with `n_column` records), their paired
    difference `d`, the test as worded and its (verdict, records for 80 % power)."""

    a: dict
    b: dict
    d: Estimate
    test: str
    verdict_need: tuple[str, float]
    column: str = "accuracy"
    n_column: str = "n"


def _row(compared: Compared, quantity: str, claimed: str, tested: Tested, note: str = "") -> dict:
    quote = compared.thesis[compared.claim]
    a, b, column, d = tested.a, tested.b, tested.column, tested.d
    verdict, need = tested.verdict_need
    return {"dataset": compared.dataset, "claim": compared.claim, "quantity": quantity, "compared": compared.compared,
            "claimed": claimed, "lambda": np.nan if compared.lam is None else float(compared.lam),
            "attack_a": a["attack"] if column == "accuracy" else "", **_values(a, "a", column, tested.n_column),
            "attack_b": b["attack"] if column == "accuracy" else "", **_values(b, "b", column, tested.n_column),
            "difference": d.value, "difference_lo": d.lo, "difference_hi": d.hi, "design": "paired by record",
            "test": tested.test,
            **(_baselines(a, b) if column == "accuracy" and a["inference"] == "attribute" else {}),
            "verdict": verdict, "n_for_80pct_power": need, "note": note, "thesis_statement": quote["statement"],
            "thesis_values": quote["quoted_values"], "thesis_source": quote["source"]}


def _greater(metrics, a: dict, b: dict) -> Tested:
    """a − b of two attacks' accuracies on the same records, and the directional verdict."""
    d = paired(_attack_rows(metrics, a), _attack_rows(metrics, b), "n")
    return Tested(a, b, d, "a − b > 0", directional(d))


def _membership(dataset, metrics, stats, thesis) -> list[dict]:
    """Supervised against contrastive, both queried on the membership task where the run has one
    (its models memorise, as the thesis's CIFAR-100 classifiers do), else on the task."""
    rows = []
    inference = MEMBERSHIP_TASK if (stats.inference == MEMBERSHIP_TASK).any() else MEMBERSHIP
    on = " (membership task)" if inference == MEMBERSHIP_TASK else ""
    compared = Compared(dataset, "membership", "supervised vs contrastive", None, thesis)
    supervised = _side(stats, "supervised", None, NN_ATTACK, inference)
    contrastive = _side(stats, "contrastive", 0.0, NN_ATTACK, inference)
    if supervised and contrastive:
        rows.append(_row(compared, f"membership inference accuracy, NN attack ({NN_ATTACK}){on}", "a > b",
                         _greater(metrics, supervised, contrastive)))
    supervised, contrastive = _strongest(stats, "supervised", inference), _strongest(stats, "contrastive", inference)
    if supervised and contrastive:
        rows.append(_row(compared, f"membership inference accuracy, strongest attack (supervised: "
                                   f"{supervised['attack']}; contrastive: {contrastive['attack']}){on}", "a > b",
                         _greater(metrics, supervised, contrastive),
                         "best of each model's membership attacks by pooled accuracy; the interval is not adjusted "
                         "for choosing the best"))
    return rows


def _attribute(dataset, metrics, stats, thesis) -> list[dict]:
    supervised = _side(stats, "supervised", None, ATTRIBUTE_ATTACK, ATTRIBUTE)
    contrastive = _side(stats, "contrastive", 0.0, ATTRIBUTE_ATTACK, ATTRIBUTE)
    if not (supervised and contrastive):
        return []
    return [_row(Compared(dataset, "attribute", "contrastive vs supervised", None, thesis),
                 f"attribute inference accuracy ({ATTRIBUTE_ATTACK})", "a > b",
                 _greater(metrics, contrastive, supervised),
                 _baseline_note(metrics, contrastive, supervised, ("contrastive", "supervised")))]


def _talos(dataset, metrics, stats, thesis) -> list[dict]:
    rows = []
    margin = NO_COST_MARGIN
    for lam in sorted(stats.loc[stats.target == "talos", "lambda"].unique()):
        compared = Compared(dataset, "talos", f"contrastive (λ = 0) vs Talos (λ = {lam:g})", lam, thesis)
        attribute = (_side(stats, "contrastive", 0.0, ATTRIBUTE_ATTACK, ATTRIBUTE),
                     _side(stats, "talos", lam, ATTRIBUTE_ATTACK, ATTRIBUTE))
        if all(attribute):
            a, b = attribute
            rows.append(_row(compared, f"attribute inference accuracy ({ATTRIBUTE_ATTACK})", "a > b",
                             _greater(metrics, a, b), _baseline_note(metrics, a, b, ("contrastive",
                                                                                    f"Talos λ = {lam:g}"))))
        models = (stats[(stats.target == "contrastive")], stats[(stats.target == "talos") & (stats["lambda"] == lam)])
        if not (models[0].empty or models[1].empty):
            a, b = models[0].iloc[0].to_dict(), models[1].iloc[0].to_dict()
            d = paired(_model_rows(metrics, "contrastive", 0.0), _model_rows(metrics, "talos", lam), "n_test",
                       "task_decisions")
            rows.append(_row(compared, "task accuracy", f"a − b ≤ {margin:g} (no cost)",
                             Tested(a, b, d, f"a − b < {margin:g}", at_most(d, margin), "task_accuracy", "n_test"),
                             f"the task accuracy Talos loses must stay below {margin:g}, the ledger's margin "
                             "(the thesis: 'preserved', no number)"))
        # the released models' own leak (the task's): a membership-task layer on a Talos encoder,
        # trained to hide the class, would leak nothing because it learns nothing
        membership = (_side(stats, "contrastive", 0.0, NN_ATTACK, MEMBERSHIP),
                      _side(stats, "talos", lam, NN_ATTACK, MEMBERSHIP))
        if all(membership):
            a, b = membership
            d = paired(_attack_rows(metrics, b), _attack_rows(metrics, a), "n")  # what Talos adds
            rows.append(_row(compared, f"membership inference accuracy, NN attack ({NN_ATTACK})",
                             f"b − a ≤ {margin:g} (no cost)",
                             Tested(a, b, d, f"b − a < {margin:g}", at_most(d, margin)),
                             f"difference column: b − a, the membership accuracy Talos adds; it must stay below "
                             f"{margin:g}, the ledger's margin"))
    return rows


def claims_table(metrics: pd.DataFrame, thesis: pd.DataFrame) -> pd.DataFrame:
    """The three claims per dataset (in the order the datasets first appear), side a against side
    b with 95 % intervals clustered by record, their paired difference, the thesis's statement and
    values, and the verdict of the claim's test on the difference (module docstring). A comparison
    whose two sides were not both measured (e.g. no attribute on a dataset without a sensitive
    attribute) has no row."""
    quotes = thesis_claims(thesis)
    stats = pool(metrics)
    rows = []
    for dataset in dict.fromkeys(stats.dataset):
        own, measured = stats[stats.dataset == dataset], metrics[metrics.dataset == dataset]
        rows += (_membership(dataset, measured, own, quotes) + _attribute(dataset, measured, own, quotes)
                 + _talos(dataset, measured, own, quotes))
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


def difference_text(value: float, lo: float, hi: float) -> str:
    return f"{value:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def need_text(n) -> str:
    """The records a replication needs for 80 % power: empty when resolved or when no n can tell."""
    if n is None or pd.isna(n):
        return ""
    return "more draws, not records" if np.isinf(n) else f"{int(n)}"


def markdown(table: pd.DataFrame) -> str:
    """The claims table as one Markdown table; the thesis's statements, values and sources below it."""
    check_frame(table, CLAIM_COLUMNS, "the claims table")
    lines = [("| dataset | claim | quantity | compared (a vs b) | claimed | a: value [95 % CI] (records) "
              "| b: value [95 % CI] (records) | a − b [95 % CI], paired | majority baseline a; b | trainings | verdict "
              "| records for 80 % power | note |"),
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---|"]
    for r in table.itertuples(index=False):
        baseline = "" if pd.isna(r.baseline_a) else (
            f"{interval_text(r.baseline_a, r.baseline_a_lo, r.baseline_a_hi)}; "
            f"{interval_text(r.baseline_b, r.baseline_b_lo, r.baseline_b_hi)}")
        lines.append(f"| {_cell(r.dataset)} | {r.claim} | {_cell(r.quantity)} | {_cell(r.compared)} "
                     f"| {_cell(r.claimed)} | {interval_text(r.value_a, r.value_a_lo, r.value_a_hi, r.n_a)} "
                     f"| {interval_text(r.value_b, r.value_b_lo, r.value_b_hi, r.n_b)} "
                     f"| {difference_text(r.difference, r.difference_lo, r.difference_hi)} | {baseline} "
                     f"| {min(r.draws_a, r.draws_b)} | {_cell(r.verdict)} | {need_text(r.n_for_80pct_power)} "
                     f"| {_cell(r.note)} |")
    quotes = table.drop_duplicates("claim")
    notes = [f"- **{r.claim}** ({_cell(r.thesis_source)}): “{_cell(r.thesis_statement)}” Values in the text: "
             f"{_cell(r.thesis_values)}." for r in quotes.itertuples(index=False)]
    return ("\n".join(lines) + "\n\nValues over the repeats (independent trainings) with 95 % intervals clustered by "
            "record: the members and non-members, the held-out test images and the members' attributes are the "
            "independent units, (records) counts them. Every target is queried on the same records, so a comparison "
            "is the difference paired by record. A directional claim is reproduced when the difference's interval "
            "lies above 0, contradicted when below; a no-cost claim is reproduced when the cost's interval lies "
            f"below the ledger's margin of {NO_COST_MARGIN:g}, contradicted when above it; otherwise unresolved, with "
            "the records at which a replication would settle it with 80 % power if the difference held. `trainings`: "
            "the independent trainings behind the fewer-trained side. This table's verdict reads the data as if one "
            f"training sufficed; the claims ledger leaves a row with fewer than {MIN_TRAININGS} trainings per arm "
            "unresolved (a claim about a training procedure)."
            "\n\nThe thesis (He, Ch. 4; its own architectures and splits):\n\n" + "\n".join(notes) + "\n")
