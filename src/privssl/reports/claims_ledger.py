"""The claims ledger: every claim of the seeds that the workflow measures, one row per (claim,
dataset, setting), with the paper's value, ours and the reference's with their 95 % intervals,
the difference the claim is about with its interval, and a verdict.

The independent unit of every interval is the record (privssl.attacks.repeated): `n` counts the
records (test images, queried members and non-members) and `draws` the repeated measurements of
each (noise draws of a release, independent trainings), which are not new records. Two releases
decided on the same records are compared by their difference paired on those records; a value
against a fixed reference (random guessing, the paper's 5 %) by its own interval.

Each claim is tested as it is worded (privssl.reports.verdicts): "a > b" by the sign of the
difference's interval, "roughly 50 %" and "barely" by an equivalence margin, "no cost" by a
non-inferiority margin, each margin stated in the row's `test`. The verdict is reproduced,
contradicted or unresolved; an unresolved row carries `n_for_80pct_power`, the records (per side
for an unpaired comparison) at which a replication would settle it with 80 % power if the measured
difference held (+inf where the draws' share of the variance alone is too large: more draws, not
more records, are needed; empty where no n can settle it). A claim about leaks is judged in its
regime (privssl.reports.regime): each such row names the leak it rests on beside the paper's, a
reproduction on a model that does not leak beyond chance is withdrawn, every unresolved row says
why, and where the paper states a size the row says whether ours lies below, around or above it.

The branch reports (contrastive_report, semileak_report, training_time_report) compute their own
comparisons the same way; the ledger takes their rows, so every number here is the branch table's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.attacks.repeated import Estimate, versus_bound
from privssl.reports.claims_spec import (
    LEDGER_CLAIMS,
    MEASURED_BY,
    MIN_TRAININGS,
    NOT_TESTED,
    TRAINING_PROCEDURE_CLAIMS,
    VERDICTS,
)
from privssl.release.methods import release_method
from privssl.reports.contrastive_report import interval_text
from privssl.reports.decisions import distinct_trainings, paired
from privssl.reports.regime import (
    NOT_REACHED,
    REACHED,
    Leak,
    judged,
    magnitude,
    unresolved_because,
)
from privssl.reports.release_table import (BEST_BASELINE, TEST_RECORDS, mia_accuracy, paper_attack, test_accuracy,
                                           utility_loss)
from privssl.reports.semileak_report import DPSGD_BASE
from privssl.reports.strongest_attack import attack_rows, lira_accuracy, strongest_attack
from privssl.reports.training_time_report import distinct_pretrainings, dpadapter_comparisons
from privssl.reports.verdicts import CHANCE_MARGIN, at_most, combined, directional, largest_need, within
from privssl.training.semi_supervised_spec import DPSGD_TARGET

CHANCE = 0.5
UTILITY_LOSS_LIMIT = 0.05  # the ALM paper's "performance loss below 5 %"
EPS_MATCH = 0.01  # an accountant's ε within 1 % of the paper's stated ε reproduces it
LEDGER_COLUMNS = ["dataset", "claim", "seed", "source", "statement", "setting", "quantity", "compared",
                  "paper_value", "value", "value_lo", "value_hi", "n", "draws", "reference", "reference_lo",
                  "reference_hi", "n_reference", "difference", "difference_lo", "difference_hi", "design", "test",
                  "verdict", "unresolved_because", "n_for_80pct_power", "paper_difference", "magnitude", "regime",
                  "regime_family", "regime_target", "regime_value", "regime_lo", "regime_hi", "regime_n",
                  "regime_chance", "regime_paper", "note"]
REPRODUCED, CONTRADICTED, UNRESOLVED = VERDICTS
PAIRED = "paired by record"
VERSUS_BOUND = "against a fixed value"


# --------------------------------------------------------------------------------- building blocks

def trainings_per_arm(claim: str, a: dict, b: dict) -> float:
    """The independent trainings behind each arm of a claim about a training procedure (the fewer
    of the two sides', a fixed reference, `bound`, having none); ∞ for every other claim; NaN
    where a measured side lost its count (refused by `Ledger.add`: it must not pass as ∞)."""
    if claim not in TRAINING_PROCEDURE_CLAIMS:
        return np.inf
    measured = [s["draws"] for s in (a, b) if not np.isnan(s["n"])]  # a bound has no n
    if any(np.isnan(draws) for draws in measured):
        return np.nan
    return float(min(measured, default=np.inf))


def side(value: float, lo: float, hi: float, n, draws=1) -> dict:
    return {"value": float(value), "lo": float(lo), "hi": float(hi), "n": n, "draws": draws}


def of(e: Estimate) -> dict:
    return side(e.value, e.lo, e.hi, e.n, e.draws)


def bound(value: float) -> dict:
    """A fixed reference (random guessing, a paper's stated ε): an interval of width 0, no n."""
    return side(value, value, value, np.nan, np.nan)


NO_DIFFERENCE = Estimate(np.nan, np.nan, np.nan, 0, 0, 0.0, 0.0, np.nan)  # a computation compares no sample


def _regime_columns(leak: Leak | None) -> dict:
    if leak is None:
        return {"regime": "", "regime_family": "", "regime_target": "", "regime_value": np.nan, "regime_lo": np.nan,
                "regime_hi": np.nan, "regime_n": np.nan, "regime_chance": np.nan, "regime_paper": np.nan}
    return {"regime": REACHED if leak.reached else NOT_REACHED, "regime_family": leak.family,
            "regime_target": leak.target, "regime_value": leak.value, "regime_lo": leak.lo, "regime_hi": leak.hi,
            "regime_n": leak.n, "regime_chance": leak.chance, "regime_paper": leak.paper}


class Ledger:
    """Rows of the ledger, each completed from the catalogue (resources/claims.csv) by claim id."""

    def __init__(self, catalogue: pd.DataFrame, min_trainings: int = MIN_TRAININGS):
        """`min_trainings`: the independent trainings per arm a claim about a training procedure
        needs before it gets a verdict (claims_spec.MIN_TRAININGS; 1 turns the rule off)."""
        if min_trainings < 1:
            raise ValueError(f"min_trainings must be >= 1, got {min_trainings}")
        self.catalogue = {r["claim"]: r for r in catalogue.to_dict("records")}
        self.min_trainings = min_trainings
        self.rows: list[dict] = []

    def add(self, dataset: str, claim: str, setting: str, quantity: str, compared: str, a: dict, b: dict,
            d: Estimate, design: str, test: str, verdict: str, n_needed: float = np.nan, note: str = "",
            leak: Leak | None = None, trainings: float | None = None) -> None:
        """A row; `leak`: the leak the claim's comparison rests on (privssl.reports.regime), which
        turns a reproduction on a model that does not leak into `unresolved`; `trainings`: the
        independent trainings per arm of the procedure a claim compares, where they are not the
        sides' draws (trainings_per_arm)."""
        if claim not in LEDGER_CLAIMS or verdict not in VERDICTS:
            raise ValueError(f"ledger row {claim!r} with verdict {verdict!r}: allowed claims {LEDGER_CLAIMS}, "
                             f"verdicts {VERDICTS}")
        if claim not in self.catalogue:
            raise ValueError(f"claim {claim!r} is not in resources/claims.csv (it has {sorted(self.catalogue)})")
        entry = self.catalogue[claim]
        by_records = verdict
        verdict, regime_note = judged(verdict, leak)
        if trainings is None:
            trainings = trainings_per_arm(claim, a, b)
        if np.isnan(trainings):  # a table that lost its count must not pass as enough trainings
            raise ValueError(f"ledger row {claim!r} ({setting}): its trainings per arm are missing (NaN); allowed: "
                             "a count >= 1")
        few = trainings < self.min_trainings
        if few:  # the records' interval leaves out the training's own luck: no verdict, and no n of records
            regime_note = "; ".join(part for part in (regime_note, (
                f"{int(trainings)} training{'s' if trainings > 1 else ''} per arm"
                + (f" (the records alone read {by_records})" if by_records != UNRESOLVED else "")
                + f": a verdict about a training procedure needs {self.min_trainings} independent trainings per arm, "
                "the training a random effect of its interval")) if part)
            verdict, n_needed = UNRESOLVED, np.nan
        note = "; ".join(part for part in (regime_note, note) if part)
        paper_difference = float(entry.get("paper_difference", np.nan))
        self.rows.append({
            "dataset": dataset, "claim": claim, "seed": entry["seed"], "source": entry["source"],
            "statement": entry["statement"], "setting": setting, "quantity": quantity, "compared": compared,
            "paper_value": entry["paper_value"], "value": a["value"], "value_lo": a["lo"], "value_hi": a["hi"],
            "n": a["n"], "draws": a["draws"], "reference": b["value"], "reference_lo": b["lo"],
            "reference_hi": b["hi"], "n_reference": b["n"], "difference": d.value, "difference_lo": d.lo,
            "difference_hi": d.hi, "design": design, "test": test, "verdict": verdict,
            "unresolved_because": unresolved_because(verdict, n_needed, leak, few),
            "n_for_80pct_power": n_needed if verdict == UNRESOLVED else np.nan,
            # outside its regime a row's size follows from the regime: no finding about the paper's size
            "paper_difference": paper_difference,
            "magnitude": "" if leak is not None and not leak.reached else magnitude(d.lo, d.hi, paper_difference),
            **_regime_columns(leak), "note": note})

    def add_not_tested(self) -> None:
        """A row for every claim no row judges: a claim the config does not measure stays in the
        ledger, saying what would measure it, rather than vanish from it."""
        judged = {row["claim"] for row in self.rows}
        for claim in LEDGER_CLAIMS:
            if claim not in judged:
                entry = self.catalogue[claim]
                self.rows.append({column: np.nan for column in LEDGER_COLUMNS} | {
                    "dataset": "", "claim": claim, "seed": entry["seed"], "source": entry["source"],
                    "statement": entry["statement"], "setting": "", "quantity": "", "compared": "",
                    "paper_value": entry["paper_value"], "design": "", "test": "", "verdict": NOT_TESTED,
                    "unresolved_because": "", "magnitude": "", "regime": "", "regime_family": "", "regime_target": "",
                    "paper_difference": float(entry.get("paper_difference", np.nan)),
                    "note": f"this run measured nothing the claim compares; it needs {MEASURED_BY[claim]}"})

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=LEDGER_COLUMNS)


# --------------------------------------------------------------------------------- ALM paper (seed 000)

def _released(utility: pd.DataFrame) -> pd.DataFrame:
    """The post-hoc releases measured against the clean head (the noise-free limits, ε = ∞, compare nothing)."""
    return utility[np.isfinite(utility.eps) & utility.clean_decisions.notna()]


def alm_claims(ledger: Ledger, utility: pd.DataFrame, mia: pd.DataFrame, lira: pd.DataFrame | None = None) -> None:
    """The ALM paper's claims per image dataset: the unprotected head's vulnerability, ALM's
    protection to chance within the paper's 5 % utility loss, and ALM's utility loss below
    Laplace's and the (classical) Gaussian's at every ε of the grid. The two membership claims are
    judged twice, by the paper's attack and by the strongest attack of lira.csv on the same heads
    (privssl.reports.strongest_attack), as separate rows; the regime of ALM's protection is the leak
    the strongest attack sees on the unprotected head. The unprotected head's vulnerability is the
    leak itself: it has no regime (a claim cannot be its own premise)."""
    attacks = paper_attack(mia)
    utility = _released(utility)
    for dataset in dict.fromkeys(utility.dataset):
        rows, attacked = utility[utility.dataset == dataset], attacks[attacks.dataset == dataset]
        unprotected, leak = attacked[attacked.mechanism == "none"], None
        strongest, among = strongest_attack(lira, dataset) or (None, 0)
        if not unprotected.empty:
            a = mia_accuracy(unprotected)
            leak = Leak("alm", "the head released without noise, the paper's attack (adaptive shadow MLP)", a.value,
                        a.lo, a.hi, a.n, CHANCE)
            _vulnerable(ledger, dataset, a, "no noise", "MIA accuracy, adaptive shadow MLP (the paper's attack), "
                        "members + non-members")
        if strongest is not None:
            a = lira_accuracy(attack_rows(lira, dataset, strongest, "none").iloc[0], among)
            leak = Leak("alm", f"the head released without noise, the strongest attack ({strongest})", a.value, a.lo,
                        a.hi, a.n, CHANCE)
            _vulnerable(ledger, dataset, a, f"no noise, strongest attack ({strongest})",
                        f"MIA accuracy, {strongest} (the run's strongest on this head of {among} reference-model "
                        f"attacks; interval at 1 − 0.05/{among}), candidate records")
        alm = rows[rows.mechanism == "alm"]
        if alm.empty:
            continue
        releases = {eps: group for eps, group in alm.groupby("eps", sort=True)}
        _protects_to_chance(ledger, dataset, releases, attacked[attacked.mechanism == "alm"], leak)
        if strongest is not None:
            _protects_to_chance(ledger, dataset, releases, attack_rows(lira, dataset, strongest, "alm"), leak,
                                strongest)
        for other, claim, name in (("laplace", "alm_loss_below_laplace", "Laplace"),
                                   ("gaussian", "alm_loss_below_gaussian", "Gaussian (classical)")):
            for eps, group in rows[rows.mechanism == other].groupby("eps", sort=True):
                if eps not in releases:
                    continue
                # the same clean head and test records: ALM's loss is below the other's exactly when
                # its accuracy is above, so the test is on the accuracies' paired difference
                accuracy_gap = paired(releases[eps], group, TEST_RECORDS)
                verdict, need = directional(accuracy_gap)
                ledger.add(dataset, claim, f"ε = {eps:g}", "utility loss, test records × noise draws",
                           f"ALM vs {name} at equal ε", of(utility_loss(releases[eps])), of(utility_loss(group)),
                           _loss_difference(accuracy_gap, releases[eps]), PAIRED, "a − b < 0", verdict, need,
                           "ALM and Laplace use the sampled Δ1, the Gaussian Δ2 (both the sensitivity sampler's); "
                           "the difference is the accuracies' (paired on the test records) over the clean head's "
                           "accuracy, which both losses share" + _no_guarantee(other, eps))


def _no_guarantee(method: str, eps: float) -> str:
    """The note of a comparison with a release that claims nothing at this ε."""
    entry = release_method(method)
    return "" if entry.proof_holds(eps) else f"; the {entry.label} release has no guarantee here: {entry.proof_note}"


def _vulnerable(ledger: Ledger, dataset: str, a: Estimate, setting: str, quantity: str) -> None:
    d = versus_bound(a, CHANCE)
    verdict, need = directional(d)
    ledger.add(dataset, "alm_unprotected_vulnerable", setting, quantity, "unprotected head vs random guessing (0.5)",
               of(a), bound(CHANCE), d, VERSUS_BOUND, "a − 0.5 > 0", verdict, need)


def _loss_difference(accuracy_gap: Estimate, rows: pd.DataFrame) -> Estimate:
    """loss_a − loss_b = −(accuracy_a − accuracy_b) / clean accuracy, for two releases measured
    against one clean head on the same records (the clean accuracy a common scale: the verdict is
    the accuracy gap's, whose sign it cannot change)."""
    scale = 1 / float(test_accuracy(rows.iloc[:1].assign(decisions=rows.clean_decisions.iloc[0])).value)
    return Estimate(-accuracy_gap.value * scale, -accuracy_gap.hi * scale, -accuracy_gap.lo * scale, accuracy_gap.n,
                    accuracy_gap.draws, accuracy_gap.var_records * scale ** 2, accuracy_gap.var_draws * scale ** 2,
                    accuracy_gap.df)


def _protects_to_chance(ledger: Ledger, dataset: str, releases: dict[float, pd.DataFrame],
                        attacked: pd.DataFrame, leak: Leak | None, strongest: str | None = None) -> None:
    """At the most private ε whose utility loss is below 5 % (the paper's operating point, chosen
    by the point estimate), is the MIA accuracy within 0.5 ± CHANCE_MARGIN and the loss below 5 %,
    both beyond their intervals? When no ε of the grid has a loss below 5 %, the row tests the loss
    at the grid's largest ε: above 5 % beyond its interval contradicts the claim on this grid.

    The loss must stay below 5 % against both non-private heads: the released one (chosen for its
    noise) and the tuning grid's best noise-free one (the paper's baseline is its best head). The
    best is best on validation records: on the test records it may be the less accurate of the
    two, and one baseline alone would then let the other's loss pass. The row's loss is the larger
    of the two (the one that binds); the note gives both."""
    losses = {eps: (utility_loss(rows), utility_loss(rows, BEST_BASELINE)) for eps, rows in releases.items()}

    def binding(eps: float) -> Estimate:
        return max(losses[eps], key=lambda loss: loss.value)

    def loss_verdict(eps: float) -> tuple[str, float]:
        parts = [at_most(loss, UTILITY_LOSS_LIMIT) for loss in losses[eps]]
        verdict = combined([v for v, _ in parts])
        return verdict, largest_need([n for v, n in parts if v != REPRODUCED]) if verdict != REPRODUCED else np.nan

    def both(eps: float) -> str:
        released, best = losses[eps]
        return (f"utility loss against the released non-private head (chosen for its noise) "
                f"{interval_text(released.value, released.lo, released.hi)}, against the tuning grid's best "
                f"noise-free head {interval_text(best.value, best.lo, best.hi)}")
    useful = [eps for eps in losses if binding(eps).value < UTILITY_LOSS_LIMIT]
    loss_test = f"utility loss < {UTILITY_LOSS_LIMIT:g}"
    if not useful:
        if strongest:  # the loss alone decides, and the paper's attack's row already says it
            return
        largest = max(losses)
        loss = binding(largest)
        verdict, need = loss_verdict(largest)
        ledger.add(dataset, "alm_protects_to_chance", f"ε = {largest:g} (the grid's largest)",
                   "utility loss against the non-private heads (the larger of the two), test records × noise draws",
                   "ALM's utility loss vs the paper's 0.05", of(loss),
                   bound(UTILITY_LOSS_LIMIT), versus_bound(loss, UTILITY_LOSS_LIMIT), VERSUS_BOUND, loss_test, verdict,
                   need, "no ε of the grid keeps ALM's utility loss below 0.05, so the MIA side is not reached; "
                   + both(largest), leak=leak)
        return
    eps = min(useful)
    rows = attacked[attacked.eps == eps]
    table, attack = ("lira.csv", strongest) if strongest else ("mia.csv", "adaptive shadow MLP")
    if rows.empty:
        raise ValueError(f"{dataset}: {table} has no {attack} rows of ALM at ε = {eps:g}, the operating point of "
                         "alm_protects_to_chance (utility.csv has them): the two tables are of different grids")
    a = lira_accuracy(rows.iloc[0]) if strongest else mia_accuracy(rows)
    d = versus_bound(a, CHANCE)
    (mia_verdict, mia_need), (loss_result, loss_need) = within(d, CHANCE_MARGIN), loss_verdict(eps)
    verdict = combined([mia_verdict, loss_result])
    need = largest_need([n for v, n in ((mia_verdict, mia_need), (loss_result, loss_need)) if v != REPRODUCED])
    ledger.add(dataset, "alm_protects_to_chance", f"ε = {eps:g}" + (f", strongest attack ({strongest})" if strongest
                                                                      else ""),
               f"MIA accuracy, {attack}, at the most private ε with utility loss < 0.05",
               f"ALM vs random guessing, 0.5 ± {CHANCE_MARGIN:g}", of(a),
               side(CHANCE, CHANCE - CHANCE_MARGIN, CHANCE + CHANCE_MARGIN, np.nan, np.nan), d, VERSUS_BOUND,
               f"|a − 0.5| < {CHANCE_MARGIN:g} and {loss_test}", verdict, need,
               f"MIA within the margin: {mia_verdict}; {both(eps)}, both below {UTILITY_LOSS_LIMIT:g}: {loss_result}; "
               f"the ± {CHANCE_MARGIN:g} margin of 'roughly 50 %' is the ledger's", leak=leak)


# --------------------------------------------------------------------------------- branch tables

CONTRASTIVE_IDS = {"membership": "contrastive_less_membership", "attribute": "contrastive_more_attribute"}
TALOS_IDS = {"attribute": "talos_removes_attribute_leak", "task": "talos_no_task_cost",
             "membership": "talos_no_membership_cost"}


def _table_sides(row: dict) -> tuple[dict, dict, Estimate]:
    d = Estimate(row["difference"], row["difference_lo"], row["difference_hi"], row["n_a"], 1, np.nan, np.nan,
                 np.nan)
    return (side(row["value_a"], row["value_a_lo"], row["value_a_hi"], row["n_a"], row.get("draws_a", 1)),
            side(row["value_b"], row["value_b_lo"], row["value_b_hi"], row["n_b"], row.get("draws_b", 1)), d)


# the leak each thesis Ch. 4 claim rests on: the model of the report's side a, and its chance level
CONTRASTIVE_LEAKS = {"contrastive_less_membership": ("supervised_membership", "supervised"),
                     "talos_no_membership_cost": ("contrastive_membership", "contrastive (λ = 0)"),
                     "contrastive_more_attribute": ("contrastive_attribute", "contrastive"),
                     "talos_removes_attribute_leak": ("contrastive_attribute", "contrastive (λ = 0)")}


def _contrastive_leak(claim: str, row: dict) -> Leak | None:
    """The leak of the report's side a, which is the model the claim needs to leak (the
    supervised target for "contrastive leaks less", the contrastive model for Talos), against
    random guessing (membership) or the majority-class share of the same records (attribute)."""
    if claim not in CONTRASTIVE_LEAKS:
        return None
    family, model = CONTRASTIVE_LEAKS[claim]
    if not str(row["compared"]).startswith(model):
        raise ValueError(f"{row['dataset']}: the contrastive report's {claim} row compares {row['compared']!r}; its "
                         f"side a must be the {model} model, whose leak the claim rests on")
    chance = row["baseline_a"] if family == "contrastive_attribute" else CHANCE
    if pd.isna(chance):
        raise ValueError(f"{row['dataset']}: the contrastive report's {claim} row has no majority baseline of side a")
    return Leak(family, f"the {model} model's {row['quantity']}", row["value_a"], row["value_a_lo"], row["value_a_hi"],
                row["n_a"], float(chance))


def contrastive_claims(ledger: Ledger, table: pd.DataFrame) -> None:
    """Thesis Ch. 4: the contrastive report's rows (a: its side a, b: its side b)."""
    for row in table.to_dict("records"):
        claim = (CONTRASTIVE_IDS[row["claim"]] if row["claim"] in CONTRASTIVE_IDS
                 else TALOS_IDS[row["quantity"].split()[0]])
        a, b, d = _table_sides(row)
        lam = row["lambda"]
        setting = f"λ = {lam:g}" if pd.notna(lam) else row["quantity"].split(", ", 1)[-1]
        ledger.add(row["dataset"], claim, setting, row["quantity"], f"{row['compared']} (claimed: {row['claimed']})",
                   a, b, d, row["design"], row["test"], row["verdict"], row["n_for_80pct_power"],
                   row["note"] if isinstance(row["note"], str) else "", leak=_contrastive_leak(claim, row))


def _semileak_leaks(table: pd.DataFrame) -> dict[tuple[str, str], Leak]:
    """Each undefended target's A_DA AUC over all members at the last step (side a of its
    ada_above_baselines row), by (dataset, target): the leak every Semi-Leak claim rests on."""
    leaks = {}
    for row in table[table.claim == "ada_above_baselines"].to_dict("records"):
        leaks[row["dataset"], row["target"]] = Leak(
            "semileak", f"{row['target']}'s A_DA AUC (all members, last step)", row["value_a"], row["value_a_lo"],
            row["value_a_hi"], row["n_a"], CHANCE)
    return leaks


def semileak_claims(ledger: Ledger, table: pd.DataFrame) -> None:
    """Thesis Ch. 3: the semi-supervised report's rows, with its own need (members per side) and its
    independent trainings per arm (the fewer-trained model's, semileak_pooling.trainings_of). A
    defence by DP-SGD rests on the leak of the target it defends (FixMatch)."""
    leaks = _semileak_leaks(table)
    for row in table.to_dict("records"):
        a, b, d = _table_sides(row)
        a["draws"] = b["draws"] = row["trainings"]  # each record is measured once per training
        setting = row["target"] + ("" if pd.isna(row["eps"]) else f", target ε = {row['eps']:g}")
        undefended = DPSGD_BASE if row["target"] == DPSGD_TARGET else row["target"]
        ledger.add(row["dataset"], f"semileak_{row['claim']}", setting, row["quantity"], row["compared"], a, b, d,
                   row["design"], row["test"], row["verdict"], row["n_for_80pct_power"],
                   row["note"] if isinstance(row["note"], str) else "", leak=leaks.get((row["dataset"], undefended)),
                   trainings=float(row["trainings"]))


def dpadapter_claims(ledger: Ledger, results: pd.DataFrame) -> None:
    """DPAdapter Table 1: DPAdapter above vanilla SAM, SAM above standard pre-training, per ε and ρ,
    each a difference of downstream accuracy paired on the test records over the repeats. The
    claims compare pre-trainings: the trainings behind an arm are its distinct pre-trainings
    (`pretraining_seed`), not the DP-SGD fine-tunings of one pre-training that the repeats are."""
    for dataset, eps, rho, sides in dpadapter_comparisons(results):
        for claim, high, low, compared in (("dpadapter_above_sam", "dpadapter", "sam", "DPAdapter vs vanilla SAM"),
                                           ("sam_above_standard", "sam", "standard", "vanilla SAM vs standard")):
            d = paired(sides[high], sides[low], TEST_RECORDS)
            verdict, need = directional(d)
            pretrainings = min(distinct_pretrainings(sides[high]), distinct_pretrainings(sides[low]))
            tunings = sides[high].repeat.nunique()
            ledger.add(dataset, claim, f"ε = {eps:g}, ρ = {rho:g}", "DP-SGD downstream test accuracy",
                       f"{compared} pre-training", of(test_accuracy(sides[high])), of(test_accuracy(sides[low])), d,
                       PAIRED, "a − b > 0", verdict, need,
                       f"{tunings} DP-SGD fine-tuning{'s' if tunings > 1 else ''} of {pretrainings} pre-training"
                       f"{'s' if pretrainings > 1 else ''} per arm", trainings=float(pretrainings))


def dpcl_claims(ledger: Ledger, utility: pd.DataFrame) -> None:
    """DPCL above naive contrastive DP-SGD at every ε both were released at: test accuracy over the
    repeats, paired on the test records."""
    for (dataset, eps), group in utility[utility.mechanism.isin(["dpcl", "dpcl_naive"])].groupby(
            ["dataset", "eps"], sort=True):
        dpcl, naive = group[group.mechanism == "dpcl"], group[group.mechanism == "dpcl_naive"]
        if dpcl.empty or naive.empty or not np.isfinite(eps):
            continue
        d = paired(dpcl, naive, TEST_RECORDS)
        verdict, need = directional(d)
        ledger.add(dataset, "dpcl_above_naive", f"ε = {eps:g}", "test accuracy (test records × repeats)",
                   "DPCL vs naive contrastive DP-SGD at equal target ε", of(test_accuracy(dpcl)),
                   of(test_accuracy(naive)), d, PAIRED, "a − b > 0", verdict, need,
                   "DPCL's ε rests on the paper's heuristic gradient sensitivity (heuristic_dp), the naive "
                   "variant's on a proven one (approx_dp): equal ε is not an equal guarantee",
                   trainings=float(min(distinct_trainings(dpcl), distinct_trainings(naive))))


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
                   "our accountant vs the paper's ε", bound(shared), bound(claimed), NO_DIFFERENCE, "computation",
                   f"|ε − {claimed:g}| ≤ {EPS_MATCH:g} ε", verdict, np.nan, note)
