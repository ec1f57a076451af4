"""The claims ledger: every claim of the seeds that the workflow measures, one row per (claim,
dataset, setting), with the paper's value, ours with its 95 % interval and n, and a verdict.

A row compares side a ("ours") with side b (a reference: the other method, or a bound such as
random guessing, which has no interval). The verdict is one of three:

* reproduced: the intervals are disjoint in the direction the paper claims (for "roughly 50 %",
  the interval lies inside 0.5 ± CHANCE_TOLERANCE);
* contradicted: disjoint the other way;
* unresolved: otherwise, with `n_to_resolve`, the n per side (in the units of column `n`) at which
  the intervals would separate if the measured difference held and every width shrank as 1/√n
  (`statistics.n_to_resolve`); empty where no n can help (a difference of exactly 0, or a claim
  about a proof, whose note says what would settle it).

Disjoint 95 % intervals is a conservative test: overlap means "cannot tell", not "equal". The
branch reports (contrastive_report, semileak_report, training_time_report) compute their own
comparisons; the ledger takes their rows and maps their verdicts onto the three above, so every
number here is the branch table's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.attacks.statistics import n_to_resolve
from privssl.reports.claims_spec import LEDGER_CLAIMS, VERDICTS
from privssl.reports.contrastive_report import _cell, directional_verdict, interval_text
from privssl.reports.release_table import paper_attack, pooled_accuracy
from privssl.reports.training_time_report import dpadapter_comparisons, pooled_test_accuracy

CHANCE = 0.5
CHANCE_TOLERANCE = 0.05  # "roughly 50 %": the paper gives no margin; this one is the ledger's
UTILITY_LOSS_LIMIT = 0.05  # the ALM paper's "performance loss below 5 %"
EPS_MATCH = 0.01  # an accountant's ε within 1 % of the paper's stated ε reproduces it
LEDGER_COLUMNS = ["dataset", "claim", "seed", "source", "statement", "setting", "quantity", "compared",
                  "paper_value", "value", "value_lo", "value_hi", "n", "reference", "reference_lo", "reference_hi",
                  "n_reference", "verdict", "n_to_resolve", "note"]
REPRODUCED, CONTRADICTED, UNRESOLVED = VERDICTS


# --------------------------------------------------------------------------------- building blocks

def side(value: float, lo: float, hi: float, n) -> dict:
    return {"value": float(value), "lo": float(lo), "hi": float(hi), "n": n}


def bound(value: float) -> dict:
    """A fixed reference (random guessing, a paper's stated ε): an interval of width 0, no n."""
    return side(value, value, value, np.nan)


def above(a: dict, b: dict) -> tuple[str, float]:
    """The claim "a > b" from the two intervals, and the n that would separate them while they overlap."""
    verdict = branch_verdict(directional_verdict(a["lo"], a["hi"], b["lo"], b["hi"]))
    return verdict, needed(a, b) if verdict == UNRESOLVED else np.nan


def needed(a: dict, b: dict) -> float:
    return n_to_resolve(a["n"], a["value"], a["lo"], a["hi"], b["value"], b["lo"], b["hi"])


def branch_verdict(text: str) -> str:
    """A branch report's verdict as one of the three. Talos's no-cost claims read "consistent:
    Talos better beyond the intervals" where Talos is shown no worse, which reproduces them, and
    "consistent: no difference beyond the intervals" where the intervals overlap, which does not."""
    if text.startswith(REPRODUCED) or text.startswith("consistent: Talos better"):
        return REPRODUCED
    if text.startswith(CONTRADICTED):
        return CONTRADICTED
    return UNRESOLVED


class Ledger:
    """Rows of the ledger, each completed from the catalogue (resources/claims.csv) by claim id."""

    def __init__(self, catalogue: pd.DataFrame):
        self.catalogue = {r["claim"]: r for r in catalogue.to_dict("records")}
        self.rows: list[dict] = []

    def add(self, dataset: str, claim: str, setting: str, quantity: str, compared: str, a: dict, b: dict,
            verdict: str, n_needed: float = np.nan, note: str = "") -> None:
        if claim not in LEDGER_CLAIMS or verdict not in VERDICTS:
            raise ValueError(f"ledger row {claim!r} with verdict {verdict!r}: allowed claims {LEDGER_CLAIMS}, "
                             f"verdicts {VERDICTS}")
        if claim not in self.catalogue:
            raise ValueError(f"claim {claim!r} is not in resources/claims.csv (it has {sorted(self.catalogue)})")
        entry = self.catalogue[claim]
        self.rows.append({
            "dataset": dataset, "claim": claim, "seed": entry["seed"], "source": entry["source"],
            "statement": entry["statement"], "setting": setting, "quantity": quantity, "compared": compared,
            "paper_value": entry["paper_value"], "value": a["value"], "value_lo": a["lo"], "value_hi": a["hi"],
            "n": a["n"], "reference": b["value"], "reference_lo": b["lo"], "reference_hi": b["hi"],
            "n_reference": b["n"], "verdict": verdict,
            "n_to_resolve": n_needed if verdict == UNRESOLVED else np.nan, "note": note})

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=LEDGER_COLUMNS)


# --------------------------------------------------------------------------------- ALM paper (seed 000)

def _loss_side(rows: pd.DataFrame, n_test: int) -> dict:
    """Utility loss 1 − accuracy / clean accuracy, pooled over the draws (test records × draws
    decisions); the clean head is shared by every release, so its accuracy is a constant here."""
    pooled, clean = pooled_test_accuracy(rows, n_test), float(rows.clean_accuracy.iloc[0])
    return side(1 - pooled["mean"] / clean, 1 - pooled["hi"] / clean, 1 - pooled["lo"] / clean, pooled["decisions"])


def _mia_side(rows: pd.DataFrame) -> dict:
    pooled = pooled_accuracy(rows)
    return side(pooled["accuracy"], pooled["lo"], pooled["hi"], pooled["decisions"])


def _at_chance(a: dict) -> tuple[str, float]:
    """"Roughly 50 %": reproduced inside 0.5 ± tolerance, contradicted entirely above it (below
    chance an attack is a reversed attack), else the n at which the interval would settle it."""
    low, high = CHANCE - CHANCE_TOLERANCE, CHANCE + CHANCE_TOLERANCE
    if low <= a["lo"] and a["hi"] <= high:
        return REPRODUCED, np.nan
    if a["lo"] > high:
        return CONTRADICTED, np.nan
    if a["value"] > high:
        return UNRESOLVED, needed(a, bound(high))
    return UNRESOLVED, max(needed(a, bound(high)), needed(a, bound(low)))


def alm_claims(ledger: Ledger, utility: pd.DataFrame, mia: pd.DataFrame, n_test: dict[str, int]) -> None:
    """The ALM paper's claims per image dataset: the unprotected head's vulnerability, ALM's
    protection to chance within the paper's 5 % utility loss, and ALM's utility loss below
    Laplace's and the (classical) Gaussian's at every ε of the grid."""
    attacks = paper_attack(mia)
    utility = utility[np.isfinite(utility.eps)]  # the noise-free limits (ε = ∞) compare nothing
    for dataset in dict.fromkeys(utility.dataset):
        rows, attacked = utility[utility.dataset == dataset], attacks[attacks.dataset == dataset]
        unprotected = attacked[attacked.mechanism == "none"]
        if not unprotected.empty:
            a = _mia_side(unprotected)
            verdict, need = above(a, bound(CHANCE))
            ledger.add(dataset, "alm_unprotected_vulnerable", "no noise",
                       "MIA accuracy, adaptive shadow MLP (the paper's attack), members + non-members",
                       "unprotected head vs random guessing (0.5)", a, bound(CHANCE), verdict, need)
        alm = rows[rows.mechanism == "alm"]
        if alm.empty:
            continue
        losses = {eps: _loss_side(group, n_test[dataset]) for eps, group in alm.groupby("eps", sort=True)}
        _protects_to_chance(ledger, dataset, losses, attacked[attacked.mechanism == "alm"])
        for other, claim, name in (("laplace", "alm_loss_below_laplace", "Laplace"),
                                   ("gaussian", "alm_loss_below_gaussian", "Gaussian (classical)")):
            for eps, group in rows[rows.mechanism == other].groupby("eps", sort=True):
                if eps not in losses:
                    continue
                a, b = losses[eps], _loss_side(group, n_test[dataset])
                verdict, need = above(b, a)  # "ALM's loss below the other's"
                ledger.add(dataset, claim, f"ε = {eps:g}", "utility loss, test records × noise draws",
                           f"ALM vs {name} at equal ε", a, b, verdict, need,
                           "ALM and Laplace use the sampled Δ1, the Gaussian Δ2 (both the sensitivity sampler's)")


def _protects_to_chance(ledger: Ledger, dataset: str, losses: dict[float, dict], attacked: pd.DataFrame) -> None:
    """At the most private ε whose utility loss is below 5 % (the paper's operating point), is the
    MIA accuracy at chance? When no ε of the grid keeps the loss below 5 %, the claim is
    contradicted on this grid if even the largest ε's loss lies above 5 % beyond its interval."""
    useful = [eps for eps, loss in losses.items() if loss["value"] < UTILITY_LOSS_LIMIT]
    quantity = "MIA accuracy, adaptive shadow MLP, at the most private ε with utility loss < 0.05"
    if not useful:
        largest = max(losses)
        loss = losses[largest]
        verdict = CONTRADICTED if loss["lo"] > UTILITY_LOSS_LIMIT else UNRESOLVED
        ledger.add(dataset, "alm_protects_to_chance", f"ε = {largest:g} (the grid's largest)",
                   "utility loss, test records × noise draws", "ALM's utility loss vs the paper's 0.05", loss,
                   bound(UTILITY_LOSS_LIMIT), verdict,
                   needed(loss, bound(UTILITY_LOSS_LIMIT)) if verdict == UNRESOLVED else np.nan,
                   "no ε of the grid keeps ALM's utility loss below 0.05, so the MIA side is not reached")
        return
    eps = min(useful)
    loss, rows = losses[eps], attacked[attacked.eps == eps]
    if rows.empty:
        return
    a = _mia_side(rows)
    verdict, need = _at_chance(a)
    if loss["hi"] >= UTILITY_LOSS_LIMIT and verdict == REPRODUCED:
        verdict, need = UNRESOLVED, needed(loss, bound(UTILITY_LOSS_LIMIT))
    ledger.add(dataset, "alm_protects_to_chance", f"ε = {eps:g}", quantity,
               f"ALM vs random guessing, 0.5 ± {CHANCE_TOLERANCE:g}", a,
               side(CHANCE, CHANCE - CHANCE_TOLERANCE, CHANCE + CHANCE_TOLERANCE, np.nan), verdict, need,
               f"utility loss there {interval_text(loss['value'], loss['lo'], loss['hi'], loss['n'])}; "
               f"the ± {CHANCE_TOLERANCE:g} margin of 'roughly 50 %' is the ledger's")


# --------------------------------------------------------------------------------- branch tables

CONTRASTIVE_IDS = {"membership": "contrastive_less_membership", "attribute": "contrastive_more_attribute"}
TALOS_IDS = {"attribute": "talos_removes_attribute_leak", "task": "talos_no_task_cost",
             "membership": "talos_no_membership_cost"}


def _table_sides(row: dict) -> tuple[dict, dict]:
    return (side(row["value_a"], row["value_a_lo"], row["value_a_hi"], row["n_a"]),
            side(row["value_b"], row["value_b_lo"], row["value_b_hi"], row["n_b"]))


def _branch_note(row: dict) -> str:
    return "; ".join(t for t in (row["verdict"], row["note"]) if isinstance(t, str) and t)


def contrastive_claims(ledger: Ledger, table: pd.DataFrame) -> None:
    """Thesis Ch. 4: the contrastive report's rows (a: its side a, b: its side b)."""
    for row in table.to_dict("records"):
        claim = (CONTRASTIVE_IDS[row["claim"]] if row["claim"] in CONTRASTIVE_IDS
                 else TALOS_IDS[row["quantity"].split()[0]])
        a, b = _table_sides(row)
        verdict = branch_verdict(row["verdict"])
        lam = row["lambda"]
        setting = f"λ = {lam:g}" if pd.notna(lam) else row["quantity"].split(", ", 1)[-1]
        ledger.add(row["dataset"], claim, setting, row["quantity"], f"{row['compared']} (claimed: {row['claimed']})",
                   a, b, verdict, needed(a, b) if verdict == UNRESOLVED else np.nan, _branch_note(row))


def semileak_claims(ledger: Ledger, table: pd.DataFrame) -> None:
    """Thesis Ch. 3: the semi-supervised report's rows, with its own n_to_resolve (members per side)."""
    for row in table.to_dict("records"):
        a, b = _table_sides(row)
        setting = row["target"] + ("" if pd.isna(row["eps"]) else f", target ε = {row['eps']:g}")
        ledger.add(row["dataset"], f"semileak_{row['claim']}", setting, row["quantity"], row["compared"], a, b,
                   branch_verdict(row["verdict"]), row["n_to_resolve"], _branch_note(row))


def dpadapter_claims(ledger: Ledger, table: pd.DataFrame) -> None:
    """DPAdapter Table 1: DPAdapter above vanilla SAM, SAM above standard pre-training, per ε and ρ
    (the training-time report's table: accuracy pooled over repeats, test decisions)."""
    for dataset, eps, rho, adapter, sam, standard in dpadapter_comparisons(table):
        for claim, high, low, compared in (("dpadapter_above_sam", adapter, sam, "DPAdapter vs vanilla SAM"),
                                           ("sam_above_standard", sam, standard, "vanilla SAM vs standard")):
            a = side(high.accuracy, high.accuracy_lo, high.accuracy_hi, high.decisions)
            b = side(low.accuracy, low.accuracy_lo, low.accuracy_hi, low.decisions)
            verdict, need = above(a, b)
            ledger.add(dataset, claim, f"ε = {eps:g}, ρ = {rho:g}", "DP-SGD downstream test accuracy",
                       f"{compared} pre-training", a, b, verdict, need)


def dpcl_claims(ledger: Ledger, utility: pd.DataFrame, n_test: dict[str, int]) -> None:
    """DPCL above naive contrastive DP-SGD at every ε both were released at."""
    for (dataset, eps), group in utility[utility.mechanism.isin(["dpcl", "dpcl_naive"])].groupby(
            ["dataset", "eps"], sort=True):
        dpcl, naive = group[group.mechanism == "dpcl"], group[group.mechanism == "dpcl_naive"]
        if dpcl.empty or naive.empty:
            continue
        pooled = [pooled_test_accuracy(rows, n_test[dataset]) for rows in (dpcl, naive)]
        a, b = (side(p["mean"], p["lo"], p["hi"], p["decisions"]) for p in pooled)
        verdict, need = above(a, b)
        ledger.add(dataset, "dpcl_above_naive", f"ε = {eps:g}", "test accuracy (test records × repeats)",
                   "DPCL vs naive contrastive DP-SGD at equal target ε", a, b, verdict, need,
                   "DPCL's ε rests on the paper's heuristic gradient sensitivity (heuristic_dp), the naive "
                   "variant's on a proven one (approx_dp): equal ε is not an equal guarantee")


def dpcl_accounting_claims(ledger: Ledger, settings: list[dict]) -> None:
    """The paper's noise multipliers against its stated ε = 1000 (accounting.dpcl.paper_settings_rows):
    a computation, not a sample. With one mechanism the RDP accountant for sampling without
    replacement settles it; with several mechanisms sharing each batch (DPCL's training) that
    accountant's bound is far above 1000 and loose, and the paper's 1000 holds only for mechanisms
    sampled separately, so no accountant at hand proves or refutes the claim."""
    for s in settings:
        claimed, shared, separate = float(s["eps"]), float(s["eps_rdp_without_replacement"]), float(
            s["eps_rdp_without_replacement_separate"])
        setting = f"{s['objective']}, {s['variant']}: {s['steps']} steps, σ = {s['paper_noise_multipliers']}"
        quantity = "ε at δ = {:g}, RDP accountant, batches without replacement".format(s["delta"])
        if abs(shared - claimed) <= EPS_MATCH * claimed:
            verdict, note = REPRODUCED, ""
        else:
            verdict = UNRESOLVED
            note = (f"the mechanisms share each step's batch; sampled separately (the paper's accounting) they give "
                    f"ε = {separate:.4g}; sharing, the RDP bound is {shared:.4g}, an upper bound that is loose there, "
                    f"and the PLD accountant on the Poisson analogue gives {float(s['eps_pld_poisson']):.4g}: the "
                    f"claim needs an accountant for mechanisms sharing a batch, not more data")
        ledger.add("cifar10 (the paper's settings)", "dpcl_paper_sigmas_eps_1000", setting, quantity,
                   "our accountant vs the paper's ε", bound(shared), bound(claimed), verdict, np.nan, note)


# --------------------------------------------------------------------------------- Markdown

def _value(value, lo, hi, n) -> str:
    if lo == hi:  # a bound or a computed value
        return f"{value:.4g}"
    return interval_text(value, lo, hi, n)


def markdown(ledger: pd.DataFrame) -> str:
    """A summary per seed and verdict, the rows per claim, and the verdict rules."""
    if ledger.empty:
        return "No claim was measured: the config runs no image dataset and no claim branch.\n"
    counts = ledger.groupby(["seed", "verdict"]).size().unstack(fill_value=0).reindex(columns=VERDICTS, fill_value=0)
    lines = ["| seed | " + " | ".join(VERDICTS) + " |", "|---|" + "---:|" * len(VERDICTS)]
    lines += [f"| {seed} | " + " | ".join(str(int(c)) for c in row) + " |" for seed, row in counts.iterrows()]
    lines += ["", "| dataset | claim | setting | paper | ours [95 % CI] (n) | reference [95 % CI] (n) | verdict "
              "| n to resolve | note |", "|---|---|---|---|---:|---:|---|---:|---|"]
    for r in ledger.itertuples(index=False):
        need = "" if np.isnan(r.n_to_resolve) else f"{r.n_to_resolve:.3g}"
        lines.append(f"| {r.dataset} | {r.claim} | {_cell(r.setting)} | {_cell(r.paper_value)} "
                     f"| {_value(r.value, r.value_lo, r.value_hi, r.n)} "
                     f"| {_value(r.reference, r.reference_lo, r.reference_hi, r.n_reference)} | **{r.verdict}** "
                     f"| {need} | {_cell(r.quantity)}; {_cell(r.compared)}{'; ' + _cell(r.note) if r.note else ''} |")
    lines += ["", "The claims:", ""]
    for claim, group in ledger.groupby("claim", sort=False):
        first = group.iloc[0]
        lines.append(f"- **{claim}** ({first.seed}, {first.source}): {first.statement}")
    lines += ["", "Verdicts from 95 % intervals: reproduced when ours and the reference are disjoint in the claimed "
              "direction, contradicted when disjoint the other way, otherwise unresolved with the n per side (in "
              "the units of the n column) at which they would separate if the measured difference held. "
              f"'Roughly 50 %' is 0.5 ± {CHANCE_TOLERANCE:g}, the ledger's margin. A value without an interval is "
              "a bound or a computation."]
    return "\n".join(lines) + "\n"
