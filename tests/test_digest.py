"""The run's digest (privssl.reports.digest) copies figures from the run's files without changing
them: the means, maxima and flags it shows are recomputed here from the same frames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privssl.reports import digest


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    """The cells of every Markdown table row of `text` whose first cell is `first_cell`."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            rows.append(cells)
    return rows


def test_numbers_are_written_to_three_decimals_or_three_digits():
    assert [digest.fmt(v) for v in (0.76666, 1.0, 9.9996, 12.345, 1603.4, 1e5)] == \
        ["0.767", "1.000", "10.000", "12.345", "1603.4", "100000"]
    assert digest.fmt(math.inf) == "∞" and digest.fmt(float("nan")) == "n/a"


def test_release_accuracy_pools_the_draws_with_the_clopper_pearson_interval_of_the_pooled_count():
    rng = np.random.default_rng(0)
    n_test = 40
    rows = [{"mechanism": m, "eps": e, "repeat": r, "accuracy": rng.integers(0, n_test + 1) / n_test,
             "guarantee_kind": k, "clean_accuracy": 30 / n_test}
            for m, k, draws in (("alm", "random_dp", 5), ("dpsgd", "approx_dp", 3)) for e in (1.0, 100.0)
            for r in range(draws)]
    text = digest.release_accuracy("digits", pd.DataFrame(rows), n_test)
    for method, draws in (("alm", 5), ("dpsgd", 3)):
        (cells,) = table_rows(text, f"`{method}`")
        for column, eps in ((2, 1.0), (3, 100.0)):
            correct = round(sum(r["accuracy"] * n_test for r in rows if r["mechanism"] == method and r["eps"] == eps))
            n = n_test * draws
            lo, hi = stats.beta.ppf(0.025, correct, n - correct + 1), stats.beta.ppf(0.975, correct + 1, n - correct)
            assert cells[column] == f"{correct / n:.3f} [{lo:.3f}, {hi:.3f}] ({n})"
    assert "the non-private head: 0.750 [" in text and "(40)." in text
    assert "`results/digits/utility.csv`" in text and "`results/digits/splits.json`" in text


def test_a_fall_of_accuracy_as_eps_grows_is_named_only_where_the_intervals_are_disjoint():
    n_test = 100
    rows = [{"mechanism": m, "eps": e, "repeat": 0, "accuracy": a, "guarantee_kind": "approx_dp",
             "clean_accuracy": 0.9}
            for m, points in (("dpsgd", ((1.0, 0.50), (10.0, 0.80), (100.0, 0.40), (math.inf, 0.45))),
                              ("alm", ((1.0, 0.50), (10.0, 0.45), (math.inf, 0.90))))
            for e, a in points]
    # dpsgd 0.80 → 0.40 over 100 decisions each: disjoint Clopper–Pearson intervals; alm 0.50 → 0.45: overlapping
    assert digest.accuracy_drops(pd.DataFrame(rows), n_test) == [("dpsgd", 10.0, 100.0, 0.80, 0.40)]
    text = digest.release_accuracy("digits", pd.DataFrame(rows), n_test)
    assert "`dpsgd` from ε = 10 to 100 (0.800 → 0.400)" in text and "`alm` from" not in text
    rows = [r for r in rows if r["mechanism"] == "alm"]
    assert "No method's accuracy falls as ε grows" in digest.release_accuracy("digits", pd.DataFrame(rows), n_test)


def test_release_accuracy_refuses_accuracies_that_are_no_counts_over_the_test_split():
    utility = pd.DataFrame([{"mechanism": "alm", "eps": 1.0, "repeat": 0, "accuracy": 0.123, "guarantee_kind": "none",
                             "clean_accuracy": 0.5}])
    with pytest.raises(ValueError, match="not counts over 40 test images"):
        digest.release_accuracy("digits", utility, 40)


def audit_row(method, eps, kind, claimed, audit, attack, bound, n=100, adaptive=True, ceiling=12.0):
    return {"method": method, "eps": eps, "guarantee_kind": kind, "claimed_eps": claimed, "audit": audit,
            "attack": attack, "adaptive": adaptive, "eps_lower_bound": bound, "eps_ceiling": ceiling, "n": n}


def test_audits_show_the_largest_bound_and_flag_only_proven_claims_it_exceeds():
    audit = pd.DataFrame([
        audit_row("certified_pure", 1.0, "pure_dp", 1.0, "hypothesis_test", "loss", 0.4, n=10, ceiling=1.0),
        audit_row("certified_pure", 1.0, "pure_dp", 1.0, "hypothesis_test", "lira_online", 1.3, n=20,
                  ceiling=2.0),  # above
        audit_row("certified_pure", 10.0, "pure_dp", 10.0, "hypothesis_test", "lira_online", 10.0),  # on y = x
        audit_row("alm", 1.0, "random_dp", 1.0, "hypothesis_test", "lira_online", 2.5),  # random DP: not a proof
        audit_row("none", float("nan"), "none", math.inf, "hypothesis_test", "lira_online", 3.0),
    ])
    text = digest.audits("digits", audit)
    certified = table_rows(text, "`certified_pure`")
    assert [(c[1], c[5], c[6], c[7], c[8], c[9]) for c in certified] == [
        ("1", "1.300", "2.000", "`lira_online` (adaptive)", "20", "**violation**"),  # the strongest row's ceiling
        ("10", "10", "12", "`lira_online` (adaptive)", "100", "")]
    (alm,) = table_rows(text, "`alm`")
    assert alm[5] == "2.500" and alm[9] == ""
    (none,) = table_rows(text, "`none`")
    assert none[3] == "∞" and none[9] == ""


def test_clean_head_copies_the_attacks_on_the_unprotected_head_with_their_intervals():
    metrics = {"train_accuracy": 0.99, "test_accuracy": 0.7666, "finetune_size": 150}
    base = {"accuracy": 0.583, "accuracy_lo": 0.525, "accuracy_hi": 0.640, "auc": 0.636, "auc_lo": 0.57,
            "auc_hi": 0.70, "tpr_at_1pct_fpr": 0.02, "tpr_at_1pct_fpr_lo": 0.004, "tpr_at_1pct_fpr_hi": 0.057,
            "fp_at_1pct_fpr": 1, "n_members": 150, "n_nonmembers": 150}
    mia = pd.DataFrame([{**base, "mechanism": "none", "attack": "shadow_mlp"},
                        {**base, "mechanism": "alm", "attack": "shadow_mlp", "accuracy": 0.5}])
    lira = pd.DataFrame([{**base, "method": "none", "attack": "lira_online", "adaptive": False, "auc": 0.766,
                          "n_members": 2400, "n_nonmembers": 2400}])
    text = digest.clean_head("digits", metrics, mia, lira)
    assert "test accuracy 0.767" in text and "|d| = 150" in text
    (paper,) = table_rows(text, "paper: `shadow_mlp`")  # the alm release is not the unprotected head
    assert paper[1:] == ["0.583 [0.525, 0.640]", "0.636 [0.570, 0.700]", "0.020 [0.004, 0.057] (1)", "150 + 150"]
    (lira_row,) = table_rows(text, "LiRA: `lira_online`")
    assert lira_row[2] == "0.766 [0.570, 0.700]" and lira_row[4] == "2400 + 2400"


def test_link_protection_averages_draws_and_keeps_the_unprotected_head_apart():
    rows = [{"mechanism": "none", "eps": float("nan"), "repeat": 0, "attack": "attack-0", "distance": "correlation",
             "auc": 0.8}]
    rows += [{"mechanism": "alm", "eps": e, "repeat": r, "attack": "attack-0", "distance": d, "auc": auc}
             for e, r, auc in ((1.0, 0, 0.5), (1.0, 1, 0.6), (1000.0, 0, 0.7), (1000.0, 1, 0.75))
             for d in ("correlation", "cosine")]
    text = digest.link_protection("sbm", pd.DataFrame(rows))
    (alm,) = table_rows(text, "`alm`")
    assert alm[1:] == ["attack-0", f"0.550 ± {np.std([0.5, 0.6], ddof=1):.3f} (2)",
                       f"0.725 ± {np.std([0.7, 0.75], ddof=1):.3f} (2)"]
    (none,) = table_rows(text, "`none`")
    assert none[2] == "0.800"
