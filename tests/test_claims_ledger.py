"""The claims ledger: verdicts from intervals, the n that would resolve an open claim, the ALM
paper's operating point, and the mapping of the branch reports' verdicts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privssl.artefacts import PAPER_CLAIMS, load_csv_file
from privssl.reports import claims_ledger as ledger_module
from privssl.reports.claims_ledger import (
    Ledger,
    above,
    alm_claims,
    bound,
    branch_verdict,
    dpcl_accounting_claims,
    markdown,
    side,
)
from privssl.reports.claims_spec import LEDGER_CLAIMS
from privssl.reports.contrastive_report import NO_DIFFERENCE, OVERLAP, no_cost_verdict

CATALOGUE = "resources/claims.csv"


@pytest.fixture
def ledger():
    return Ledger(load_csv_file(CATALOGUE, PAPER_CLAIMS))


def test_the_catalogue_names_every_claim_once():
    catalogue = load_csv_file(CATALOGUE, PAPER_CLAIMS)
    assert sorted(catalogue.claim) == sorted(LEDGER_CLAIMS)
    assert catalogue.statement.str.len().min() > 20 and catalogue.paper_value.str.len().min() > 5


def test_above_reads_disjoint_intervals_and_sizes_the_overlap():
    a, b = side(0.60, 0.55, 0.65, 400), side(0.50, 0.45, 0.55, 400)
    verdict, need = above(a, b)
    assert verdict == "unresolved"  # touching intervals overlap
    # the facing half-widths 0.05 + 0.05 against the gap 0.10: the smallest n > 400 (0.1 / 0.1)² = 400
    assert need == 401
    assert above(side(0.7, 0.66, 0.74, 400), b) == ("reproduced", pytest.approx(np.nan, nan_ok=True))
    assert above(b, side(0.7, 0.66, 0.74, 400))[0] == "contradicted"
    verdict, need = above(side(0.52, 0.47, 0.57, 300), bound(0.5))
    assert verdict == "unresolved" and need == math.floor(300 * (0.05 / 0.02) ** 2) + 1


@pytest.mark.parametrize("text, expected", [
    ("reproduced", "reproduced"),
    (OVERLAP, "unresolved"),
    (NO_DIFFERENCE, "unresolved"),
    ("not resolved: its comparisons point in opposite directions", "unresolved"),
    (no_cost_verdict(0.70, 0.75, 0.60, 0.65, higher_is_worse=False, quantity="task accuracy"), "contradicted"),
    (no_cost_verdict(0.50, 0.55, 0.40, 0.45, higher_is_worse=True, quantity="membership"), "reproduced"),
])
def test_branch_verdicts_map_onto_three(text, expected):
    assert branch_verdict(text) == expected


def test_the_ledger_refuses_an_unknown_claim_or_verdict(ledger):
    a = side(0.6, 0.5, 0.7, 100)
    with pytest.raises(ValueError, match="alm_is_great"):
        ledger.add("digits", "alm_is_great", "", "", "", a, a, "reproduced")
    with pytest.raises(ValueError, match="'shown'"):
        ledger.add("digits", "alm_unprotected_vulnerable", "", "", "", a, a, "shown")


def _utility(dataset: str, n_test_rows: dict[tuple[str, float], list[float]], clean: float) -> pd.DataFrame:
    rows = [{"dataset": dataset, "mechanism": m, "eps": e, "repeat": r, "accuracy": acc, "clean_accuracy": clean,
             "utility_loss": 1 - acc / clean}
            for (m, e), draws in n_test_rows.items() for r, acc in enumerate(draws)]
    return pd.DataFrame(rows)


def _mia(dataset: str, accuracies: dict[tuple[str, float], float], decisions: int) -> pd.DataFrame:
    return pd.DataFrame([{"dataset": dataset, "mechanism": m, "eps": e, "repeat": 0, "attack": "shadow_mlp",
                          "adaptive": True, "accuracy": acc, "auc": acc, "n_members": decisions // 2,
                          "n_nonmembers": decisions // 2} for (m, e), acc in accuracies.items()])


def test_alm_claims_pick_the_papers_operating_point(ledger):
    """Utility loss 0.5 at ε = 1, 0.01 at ε = 10 and 0 at ε = 100: the operating point is ε = 10,
    the most private ε below 5 % loss; the MIA there is 0.50 on 20,000 decisions, inside 0.5 ± 0.05."""
    clean = 0.8
    utility = _utility("d", {("alm", 1.0): [0.4] * 5, ("alm", 10.0): [0.792] * 5, ("alm", 100.0): [0.8] * 5,
                             ("laplace", 1.0): [0.2] * 5, ("laplace", 10.0): [0.79] * 5,
                             ("laplace", float("inf")): [0.8] * 5}, clean)
    mia = _mia("d", {("none", np.nan): 0.70, ("alm", 1.0): 0.5, ("alm", 10.0): 0.50, ("alm", 100.0): 0.6}, 20000)
    alm_claims(ledger, utility, mia, {"d": 2000})
    rows = ledger.frame().set_index(["claim", "setting"])
    assert rows.loc[("alm_unprotected_vulnerable", "no noise"), "verdict"] == "reproduced"
    chance = rows.loc[("alm_protects_to_chance", "ε = 10")]
    assert chance.verdict == "reproduced" and chance.n == 20000
    # ALM keeps 0.4 of 0.8 at ε = 1 against Laplace's 0.2 on 10,000 decisions each: disjoint
    laplace = rows.loc[("alm_loss_below_laplace", "ε = 1")]
    assert laplace.verdict == "reproduced" and laplace.value == pytest.approx(0.5)
    assert laplace.reference == pytest.approx(0.75)
    assert ("alm_loss_below_laplace", "ε = inf") not in rows.index  # the noise-free limit compares nothing
    assert rows.loc[("alm_loss_below_laplace", "ε = 10"), "verdict"] == "unresolved"


def test_protection_to_chance_is_contradicted_when_the_attack_stays_above_the_margin(ledger):
    utility = _utility("d", {("alm", 10.0): [0.8] * 5}, 0.8)
    alm_claims(ledger, utility, _mia("d", {("alm", 10.0): 0.62}, 20000), {"d": 2000})
    (row,) = ledger.frame().query("claim == 'alm_protects_to_chance'").itertuples()
    assert row.verdict == "contradicted"


def test_without_a_useful_eps_the_chance_claim_rests_on_the_utility_loss(ledger):
    utility = _utility("d", {("alm", 1.0): [0.2] * 5, ("alm", 10.0): [0.4] * 5}, 0.8)
    alm_claims(ledger, utility, _mia("d", {("alm", 1.0): 0.5, ("alm", 10.0): 0.5}, 2000), {"d": 2000})
    (row,) = ledger.frame().query("claim == 'alm_protects_to_chance'").itertuples()
    assert row.verdict == "contradicted" and row.setting == "ε = 10 (the grid's largest)"
    assert row.value == pytest.approx(0.5) and row.reference == ledger_module.UTILITY_LOSS_LIMIT


def test_dpcl_accounting_reproduces_a_match_and_leaves_shared_batches_open(ledger):
    settings = [{"objective": "simclr", "variant": v, "steps": 10, "paper_noise_multipliers": "0.4", "eps": 1000.0,
                 "delta": 1e-5, "eps_rdp_without_replacement": shared, "eps_rdp_without_replacement_separate": 1000.5,
                 "eps_pld_poisson": 20.0} for v, shared in (("naive", 1005.0), ("dpcl", 1.1e5))]
    dpcl_accounting_claims(ledger, settings)
    frame = ledger.frame()
    assert list(frame.verdict) == ["reproduced", "unresolved"]
    assert "1000" in frame.note.iloc[1] and np.isnan(frame.n_to_resolve.iloc[1])


def test_markdown_counts_each_seeds_verdicts(ledger):
    a, b = side(0.7, 0.65, 0.75, 1000), bound(0.5)
    ledger.add("d", "alm_unprotected_vulnerable", "no noise", "q", "c", a, b, "reproduced")
    ledger.add("d", "talos_no_task_cost", "λ = 1", "q", "c", a, side(0.6, 0.55, 0.75, 1000), "unresolved", 5000.0)
    text = markdown(ledger.frame())
    assert "| 000 Yang, Gohari & Topcu: Additive Logistic Mechanism | 1 | 0 | 0 |" in text
    assert "| 003 He thesis, Ch. 4 (contrastive privacy) | 0 | 0 | 1 |" in text
    assert "| 5e+03 |" in text
