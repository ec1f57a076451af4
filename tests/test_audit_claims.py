"""The ledger's rows on the releases' guarantees (privssl.reports.audit_claims), from an audit
table whose verdicts are known by construction: which rows test a proven claim, the largest
bound-to-claim ratio (worked out here by hand), a violation that must contradict, and the tight
audits' verdicts with what caps each."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from privssl.artefacts.claims import PAPER_CLAIMS
from privssl.artefacts.tables import load_csv_file
from privssl.audit.gdp import expected_gdp_bound, gdp_epsilon
from privssl.reports.audit_claims import audit_claims
from privssl.reports.claims_ledger import Ledger
from privssl.reports.ledger_markdown import markdown
from privssl.reports.run_tables import ledger as run_ledger

CATALOGUE = Path(__file__).resolve().parents[1] / "resources" / "claims.csv"
NAN = math.nan


def row(method, eps, claimed, kind, audit, bound, ceiling, threat="black_box", attack="lira_online", **extra):
    return {"dataset": "digits", "method": method, "eps": eps, "attack": attack, "adaptive": True, "delta": 1e-5,
            "claimed_eps": claimed, "guarantee_kind": kind, "audit": audit, "threat_model": threat,
            "eps_lower_bound": bound, "eps_ceiling": ceiling, "n": 100, **extra}


def mu_of(eps: float, delta: float = 1e-5) -> float:
    """The shift whose μ-GDP ε at δ is `eps` (the crafted pair's D / σ)."""
    return optimize.brentq(lambda mu: gdp_epsilon(mu, delta) - eps, 1e-3, 50)


def audit_table(violation=False) -> pd.DataFrame:
    crafted = {"pair_fraction": 0.687, "runs_per_world": 20000, "attack": "crafted_pair", "threat": "final_model",
               "confidence": 0.95}
    canary = {"runs_per_world": 100, "confidence": 1 - 1e-4, "attack": "gradient_canary",
              "threat": "white_box_all_updates"}
    # μ* of a claim whose GDP ε is 0.99 of it at ε = 1 and 0.95 at ε = 10 (a correct trainer's reach)
    reach_1 = {"mu_reach": 0.2656, "eps_reach_unlimited": 0.99, "eps_reach": 0.0, "eps_reach_low": 0.0}
    reach_10 = {"mu_reach": 1.9187, "eps_reach_unlimited": 9.5, "eps_reach": 9.2, "eps_reach_low": 8.0}
    rows = [
        row("none", NAN, math.inf, "none", "hypothesis_test", 4.0, 5.8),  # no claim
        row("laplace", 1.0, 1.0, "random_dp", "hypothesis_test", 3.0, 5.8),  # above, but random DP: not tested here
        row("certified_gaussian", 1.0, 1.0, "approx_dp", "hypothesis_test", 0.2, 5.8),
        row("certified_gaussian", 10.0, 10.0, "approx_dp", "hypothesis_test", 2.5 if not violation else 10.5, 11.0),
        row("certified_gaussian", 1.0, 1.0, "approx_dp", "crafted_pair_gdp", 0.62, 1.0, eps_of_pair=0.66,
            pair_distance=mu_of(0.66), noise_scale=1.0, **crafted),
        row("certified_gaussian", 10.0, 10.0, "approx_dp", "crafted_pair_gdp", 6.3, 10.0, eps_of_pair=6.35,
            pair_distance=mu_of(6.35), noise_scale=1.0,
            **crafted),
        row("certified_pure", 1.0, 1.0, "pure_dp", "crafted_pair_test", 0.0, 9.7, **crafted),
        row("dpsgd", 1.0, 2.0, "approx_dp", "hypothesis_test", 0.5, 5.8),  # substitution claim 2ε
        row("dpsgd", 1.0, 1.0, "approx_dp", "white_box_gdp", 0.0, 1.0, **canary, **reach_1),
        row("dpsgd", 10.0, 10.0, "approx_dp", "white_box_gdp", 9.8, 10.0, **canary, **reach_10),
        row("dpsgd", 100.0, math.inf, "approx_dp", "hypothesis_test", 5.0, 5.8),  # ∞: no claim to test
    ]
    return pd.DataFrame(rows)


def ledger_of(frame: pd.DataFrame) -> pd.DataFrame:
    table = Ledger(load_csv_file(CATALOGUE, PAPER_CLAIMS))
    audit_claims(table, frame)
    return table.frame()


def test_every_proven_release_has_one_row_with_its_largest_ratio():
    rows = ledger_of(audit_table())
    below = rows[rows.claim == "proven_release_below_claim"].set_index("setting")
    assert sorted(below.index) == ["certified_gaussian", "certified_pure", "dpsgd"]  # not laplace (random DP)
    # by hand: certified_gaussian 0.62/1, 6.3/10, 0.2, 0.25 -> 0.63 (crafted_pair_gdp at ε = 10)
    assert below.loc["certified_gaussian", "value"] == pytest.approx(0.63)
    assert "crafted_pair_gdp" in below.loc["certified_gaussian", "note"] and "ε = 10" in below.loc[
        "certified_gaussian", "note"]
    assert below.loc["dpsgd", "value"] == pytest.approx(0.98)  # 9.8/10: not 5/∞, not 0.5/2
    assert "the largest of 3 audit rows" in below.loc["dpsgd", "quantity"]  # the ∞ claim tests nothing
    assert below.loc["certified_pure", "value"] == 0.0
    assert (below.verdict == "reproduced").all() and (below.reference == 1.0).all()


def test_a_bound_above_a_proven_claim_contradicts_it():
    rows = ledger_of(audit_table(violation=True))
    gaussian = rows[(rows.claim == "proven_release_below_claim") & (rows.setting == "certified_gaussian")].iloc[0]
    assert gaussian.verdict == "contradicted" and gaussian.value == pytest.approx(1.05)
    assert "1 of 4 audit rows above their claim" in gaussian.note and "hypothesis_test" in gaussian.note


def test_the_tight_audits_are_judged_at_ninety_percent_of_the_claim_against_their_reach():
    rows = ledger_of(audit_table())
    tight = rows[rows.claim == "tight_audit_reaches_claim"].set_index("setting")
    assert tight.loc["dpsgd, ε = 10", "verdict"] == "reproduced"  # 9.8 ≥ 9
    # ε = 1: a correct trainer's fit reaches 0 at 100 trainings: the audit cannot tell, and names the runs that would
    low = tight.loc["dpsgd, ε = 1"]
    assert low.verdict == "unresolved" and "the audit cannot reach the claim" in low.note
    need = low.n_for_80pct_power
    assert expected_gdp_bound(0.2656, need, need, 1e-5, 1 - 1e-4) >= 0.9 > expected_gdp_bound(0.2656, need - 1,
                                                                                               need - 1, 1e-5, 1 - 1e-4)
    # the crafted pair reaches 0.69 of Δ2: a perfect test shows 0.66 of the claim, below the margin
    gaussian = tight.loc["certified_gaussian, ε = 1"]
    assert gaussian.verdict == "unresolved" and np.isnan(gaussian.n_for_80pct_power)
    assert gaussian.unresolved_because == "not settled by data"  # no number of releases moves the pair
    assert "0.69 of the proven Δ2" in gaussian.note and "shows ε = 0.66" in gaussian.note
    # the Gamma-norm's loss is at most ε · 0.687 on this pair: out of reach too
    pure = tight.loc["certified_pure, ε = 1"]
    assert pure.verdict == "unresolved" and "shows ε = 0.687" in pure.note
    # only the tightest audit of each: no hypothesis-test rows
    assert len(tight) == 5 and tight.loc["dpsgd, ε = 10", "value"] == 9.8


def test_a_tight_audit_that_could_reach_the_claim_and_does_not_is_contradicted():
    frame = audit_table()
    frame.loc[(frame.audit == "white_box_gdp") & (frame.eps == 10.0), "eps_lower_bound"] = 7.0  # reach 9.2
    at_claim = frame.audit == "crafted_pair_gdp"  # a pair at Δ2: its perfect test shows the claim
    frame.loc[at_claim, "eps_of_pair"] = frame.claimed_eps
    frame.loc[at_claim, "pair_distance"] = [mu_of(e) for e in frame.claimed_eps[at_claim]]
    rows = ledger_of(frame)
    tight = rows[rows.claim == "tight_audit_reaches_claim"].set_index("setting")
    assert tight.loc["dpsgd, ε = 10", "verdict"] == "contradicted"
    assert tight.loc[["certified_gaussian, ε = 1", "certified_gaussian, ε = 10"], "verdict"].tolist() == [
        "contradicted", "contradicted"]


def test_a_tight_audit_below_the_margin_but_within_a_correct_releases_spread_is_unresolved():
    """The white box at ε = 10 reaches 9.2 on a correct trainer and stays above 8.0 95 % of the time:
    a bound of 8.5 is below the margin (9) but no evidence against the claim's tightness."""
    frame = audit_table()
    frame.loc[(frame.audit == "white_box_gdp") & (frame.eps == 10.0), "eps_lower_bound"] = 8.5
    row = ledger_of(frame).set_index("setting").loc["dpsgd, ε = 10"]
    assert row.verdict == "unresolved" and row.note.startswith("below the margin, but within what a release")
    assert "(≥ 8 95 % of the time)" in row.note


def test_the_crafted_pairs_spread_is_its_gdp_fits_at_its_releases():
    """A pair at Δ2 (μ of the claim) audited with 20,000 releases per world at 95 %: the fit stays above
    the ε of μ − (z₀.₉₅ + z₀.₉₅) SE 95 % of the time, the contradiction's threshold."""
    from privssl.reports.audit_claims import reach

    frame = audit_table()
    row = frame[(frame.audit == "crafted_pair_gdp") & (frame.eps == 1.0)].iloc[0].copy()
    row["eps_of_pair"], row["pair_distance"] = 1.0, mu_of(1.0)
    value, low, _, _ = reach(row)
    mu, r = mu_of(1.0), 20000
    se = math.sqrt(2 / r + mu ** 2 / (4 * r))
    assert value == 1.0 and low == pytest.approx(gdp_epsilon(mu - 2 * 1.6448536269514722 * se, 1e-5), rel=1e-9)


def test_a_white_box_without_a_clean_coordinate_cannot_reach_the_claim():
    """No dead feature: the white-box rows read 0 because the audit did not run, which says nothing of
    the release (not "contradicted", which the reach of 9.2 alone would give)."""
    frame = audit_table()
    at_10 = (frame.audit == "white_box_gdp") & (frame.eps == 10.0)
    frame.loc[at_10, "eps_lower_bound"], frame["coordinate_clean"] = 0.0, True
    frame.loc[at_10, "coordinate_clean"] = False
    row = ledger_of(frame).set_index("setting").loc["dpsgd, ε = 10"]
    assert row.verdict == "unresolved" and "the white-box audit did not run" in row.note


def test_a_tight_audit_whose_ceiling_is_below_the_margin_is_unresolved_for_more_runs():
    frame = audit_table()
    at_claim = frame.audit == "crafted_pair_gdp"
    frame.loc[at_claim, "eps_of_pair"] = frame.claimed_eps
    frame.loc[at_claim, "pair_distance"] = [mu_of(e) for e in frame.claimed_eps[at_claim]]
    frame.loc[at_claim, "eps_ceiling"] = 0.5
    rows = ledger_of(frame)
    gaussian = rows[(rows.claim == "tight_audit_reaches_claim") & (rows.setting == "certified_gaussian, ε = 1")]
    assert gaussian.iloc[0].verdict == "unresolved" and np.isinf(gaussian.iloc[0].n_for_80pct_power)
    assert "ceiling at these runs is 0.5" in gaussian.iloc[0].note


def test_the_largest_bound_states_its_family_wise_level():
    rows = ledger_of(audit_table())
    dpsgd = rows[(rows.claim == "proven_release_below_claim") & (rows.setting == "dpsgd")].iloc[0]
    # three finite-claim rows: the hypothesis test at 95 % and two canary fits at 1 − 1e-4
    assert "probability ≤ 0.0502" in dpsgd.note
    many = pd.concat([audit_table()] + [pd.DataFrame([row("dpsgd", 1.0, 2.0, "approx_dp", "hypothesis_test", 0.1,
                                                          5.8)])] * 40, ignore_index=True)
    rows = ledger_of(many)
    dpsgd = rows[(rows.claim == "proven_release_below_claim") & (rows.setting == "dpsgd")].iloc[0]
    assert "Σ (1 − confidence) = 2.05: one bound above its claim would not by itself reject" in dpsgd.note


def test_the_run_ledger_judges_the_audit_claims_only_when_given_audits():
    catalogue = load_csv_file(CATALOGUE, PAPER_CLAIMS)
    without = run_ledger(catalogue)
    assert (without[without.claim.isin(["proven_release_below_claim", "tight_audit_reaches_claim"])].verdict
            == "not tested").all()
    with_audits = run_ledger(catalogue, audit=audit_table())
    judged = with_audits[with_audits.claim == "tight_audit_reaches_claim"]
    assert len(judged) == 5 and "not tested" not in set(judged.verdict)
    assert "tight_audit_reaches_claim" in markdown(with_audits)
