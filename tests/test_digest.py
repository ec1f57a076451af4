"""The run's digest (privssl.reports.digest) copies figures from the run's files without changing
them: the means, maxima and flags it shows are recomputed here from the same frames; the release
accuracies from utility rows whose decision cells are packed from known 0/1 arrays."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privssl.io import pack_decisions
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


N_TEST = 200


def bits(p: float, seed: int, n: int = N_TEST) -> np.ndarray:
    """n decisions with exactly round(p n) right, at positions drawn from `seed`."""
    out = np.zeros(n, bool)
    out[np.random.default_rng(seed).choice(n, round(p * n), replace=False)] = True
    return out


def moved(base: np.ndarray, lost: int, won: int, seed: int) -> np.ndarray:
    """`base` with `lost` right decisions made wrong and `won` wrong ones made right."""
    rng, out = np.random.default_rng(seed), base.copy()
    out[rng.choice(np.flatnonzero(base), lost, replace=False)] = False
    out[rng.choice(np.flatnonzero(~base), won, replace=False)] = True
    return out


CLEAN = bits(0.85, 0)


def utility(points: dict, kinds: dict | None = None) -> pd.DataFrame:
    """utility.csv rows from {(mechanism, ε): [decisions per draw]}, each draw deciding the same
    N_TEST test records; the clean head's decisions on every row."""
    kinds = kinds or {}
    return pd.DataFrame([{"mechanism": m, "eps": e, "repeat": r, "guarantee_kind": kinds.get(m, "approx_dp"),
                          "n_test": N_TEST, "accuracy": d.mean(), "clean_accuracy": CLEAN.mean(),
                          "decisions": pack_decisions(d), "clean_decisions": pack_decisions(CLEAN),
                          "best_clean_decisions": pack_decisions(CLEAN)}
                         for (m, e), draws in points.items() for r, d in enumerate(draws)])


def cp(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else stats.beta.ppf(0.025, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(0.975, k + 1, n - k)
    return float(lo), float(hi)


def parse(cell: str) -> tuple[float, float, float, int]:
    """'0.700 [0.632, 0.762] (5)' -> (0.7, 0.632, 0.762, 5)."""
    value, rest = cell.split(" [")
    lo, rest = rest.split(", ")
    hi, draws = rest.split("] (")
    return float(value), float(lo), float(hi), int(draws.rstrip(")"))


def test_release_accuracy_is_over_the_draws_clustered_by_test_record():
    same = bits(0.7, 1)
    independent = [bits(0.6, s) for s in range(10, 13)]
    points = {("alm", 1.0): [same] * 5,  # five draws that decide every record alike: one draw's information
              ("alm", 100.0): [bits(0.8, 2)],  # one draw: the exact interval of k of n
              ("dpsgd", 1.0): independent, ("dpsgd", 100.0): [bits(0.75, 3)] * 3}
    text = digest.release_accuracy("digits", utility(points, {"alm": "random_dp"}), N_TEST)
    (alm,) = table_rows(text, "`alm`")
    (dpsgd,) = table_rows(text, "`dpsgd`")
    assert (alm[1], dpsgd[1]) == ("random_dp", "approx_dp")
    value, lo, hi, draws = parse(alm[2])
    single = cp(140, N_TEST)
    assert (value, draws) == (0.7, 5)
    assert lo == pytest.approx(single[0], abs=0.004) and hi == pytest.approx(single[1], abs=0.004)
    pooled = cp(5 * 140, 5 * N_TEST)
    assert hi - lo > 1.5 * (pooled[1] - pooled[0])  # not 5 × 200 independent decisions
    assert alm[3] == f"0.800 [{cp(160, N_TEST)[0]:.3f}, {cp(160, N_TEST)[1]:.3f}] (1)"
    value, lo, hi, draws = parse(dpsgd[2])
    assert value == pytest.approx(np.mean(independent), abs=5e-4) and draws == 3
    # independent draws of one release: narrower than one draw's interval
    assert hi - lo < 0.9 * (cp(120, N_TEST)[1] - cp(120, N_TEST)[0])
    assert parse(dpsgd[3])[3] == 3
    lo, hi = cp(170, N_TEST)
    assert f"the non-private head: 0.850 [{lo:.3f}, {hi:.3f}]" in text
    assert f"the same {N_TEST} test images" in text
    assert "`results/digits/utility.csv`" in text and "`results/digits/splits.json`" in text


def test_the_noise_free_limit_of_an_output_perturbation_method_is_one_head():
    head, trainings = bits(0.9, 4), [bits(0.88, s) for s in (20, 21, 22)]
    points = {("alm", 1.0): [bits(0.5, 5)] * 2, ("alm", math.inf): [head] * 5,
              ("dpsgd", 1.0): [bits(0.5, 6)] * 2, ("dpsgd", math.inf): trainings}
    text = digest.release_accuracy("digits", utility(points), N_TEST)
    (alm,) = table_rows(text, "`alm`")
    (dpsgd,) = table_rows(text, "`dpsgd`")
    lo, hi = cp(180, N_TEST)
    assert alm[3] == f"0.900 [{lo:.3f}, {hi:.3f}] (1)"  # counted once, its exact interval
    assert parse(dpsgd[3])[3] == 3  # DP-SGD's σ = 0 trainings: independent draws
    assert "ε = ∞ (no noise)" in text


def expected_paired(after: np.ndarray, before: np.ndarray) -> tuple[float, float]:
    """The t interval of the per-record differences of two one-draw releases (n − 1 df)."""
    per_record = after.astype(float) - before
    half = stats.t.ppf(0.975, N_TEST - 1) * per_record.std(ddof=1) / np.sqrt(N_TEST)
    return per_record.mean() - half, per_record.mean() + half


def test_a_fall_of_accuracy_as_eps_grows_is_named_only_where_the_paired_interval_lies_below_0():
    at_10 = bits(0.60, 7)
    points = {
        # 0.50 → 0.60 (a rise) → 0.56 (12 of 200 images lost, 4 won: paired, clearly below 0, though the
        # two accuracies' own intervals overlap) → ∞ 0.90
        ("dpsgd", 1.0): [bits(0.50, 8)], ("dpsgd", 10.0): [at_10], ("dpsgd", 100.0): [moved(at_10, 12, 4, 9)],
        ("dpsgd", math.inf): [bits(0.90, 10)],
        # 0.50 → 0.48 on unrelated records: not beyond the interval; then a large rise at ∞
        ("alm", 1.0): [bits(0.50, 11)], ("alm", 10.0): [bits(0.48, 12)], ("alm", math.inf): [bits(0.95, 13)] * 4}
    frame = utility(points)
    fall = expected_paired(points["dpsgd", 100.0][0], at_10)
    assert fall[1] < 0 and cp(112, N_TEST)[1] > cp(120, N_TEST)[0]
    assert expected_paired(points["alm", 10.0][0], points["alm", 1.0][0])[1] > 0
    assert digest.accuracy_drops(frame) == [("dpsgd", 10.0, 100.0, 0.60, 0.56)]
    text = digest.release_accuracy("digits", frame, N_TEST)
    assert "`dpsgd` from ε = 10 to 100 (0.600 → 0.560)" in text and "`alm` from" not in text
    calm = frame[frame.mechanism == "alm"]
    assert digest.accuracy_drops(calm) == []
    assert "No method's accuracy falls as ε grows" in digest.release_accuracy("digits", calm, N_TEST)


def test_a_fall_to_the_noise_free_limit_counts_its_one_head():
    at_100 = bits(0.80, 14)
    frame = utility({("alm", 100.0): [at_100], ("alm", math.inf): [moved(at_100, 40, 0, 15)] * 5})
    assert digest.accuracy_drops(frame) == [("alm", 100.0, math.inf, 0.80, 0.60)]
    assert "`alm` from ε = 100 to ∞ (no noise) (0.800 → 0.600)" in digest.release_accuracy("digits", frame, N_TEST)


def test_release_accuracy_refuses_rows_that_decided_another_test_set():
    frame = utility({("alm", 1.0): [bits(0.5, 16)]})
    with pytest.raises(ValueError, match=rf"decides \[{N_TEST}\] test records per row, the splits' test set has 201"):
        digest.release_accuracy("digits", frame, N_TEST + 1)
    mixed = pd.concat([frame, utility({("alm", 10.0): [bits(0.5, 17, N_TEST - 8)]}).assign(n_test=N_TEST - 8)])
    with pytest.raises(ValueError, match="test records per row"):
        digest.release_accuracy("digits", mixed, N_TEST)


def audit_row(method, eps, kind, claimed, audit, attack, bound, n=100, adaptive=True, ceiling=12.0,
              threat_model="black_box"):
    return {"method": method, "eps": eps, "guarantee_kind": kind, "claimed_eps": claimed, "audit": audit,
            "threat_model": threat_model, "attack": attack, "adaptive": adaptive, "eps_lower_bound": bound,
            "eps_ceiling": ceiling, "n": n}


def test_audits_show_the_largest_bound_and_flag_only_proven_claims_it_exceeds():
    audit = pd.DataFrame([
        audit_row("certified_pure", 1.0, "pure_dp", 1.0, "hypothesis_test", "loss", 0.4, n=10, ceiling=1.0),
        audit_row("certified_pure", 1.0, "pure_dp", 1.0, "hypothesis_test", "lira_online", 1.3, n=20,
                  ceiling=2.0),  # above
        audit_row("certified_pure", 10.0, "pure_dp", 10.0, "hypothesis_test", "lira_online", 10.0),  # on y = x
        audit_row("alm", 1.0, "random_dp", 1.0, "hypothesis_test", "lira_online", 2.5),  # random DP: not a proof
        audit_row("none", float("nan"), "none", math.inf, "hypothesis_test", "lira_online", 3.0),
        audit_row("dpsgd", 1.0, "approx_dp", 1.0, "white_box_gdp", "gradient_canary", 0.98, ceiling=1.0,
                  threat_model="white_box_all_updates"),
    ])
    text = digest.audits("digits", audit)
    certified = table_rows(text, "`certified_pure`")
    assert [(c[1], c[5], c[6], c[7], c[8], c[9], c[10]) for c in certified] == [
        ("1", "black box", "1.300", "2.000", "`lira_online` (adaptive)", "20", "**violation**"),  # the strongest's ceiling
        ("10", "black box", "10", "12", "`lira_online` (adaptive)", "100", "")]
    (alm,) = table_rows(text, "`alm`")
    assert alm[6] == "2.500" and alm[10] == ""
    (none,) = table_rows(text, "`none`")
    assert none[3] == "∞" and none[10] == ""
    (dpsgd,) = table_rows(text, "`dpsgd`")
    assert (dpsgd[4], dpsgd[5], dpsgd[6], dpsgd[10]) == ("`white_box_gdp`", "white box all updates", "0.980", "")


def test_audits_say_what_caps_the_crafted_pair():
    pair = {"pair_design": "design A", "pair_distance": 0.1375, "pair_fraction": 0.6869, "sensitivity": 0.2002}
    audit = pd.DataFrame([
        audit_row("certified_gaussian", 1.0, "approx_dp", 1.0, "crafted_pair_gdp", "crafted_pair", 0.62,
                  ceiling=1.0, threat_model="final_model") | pair | {"eps_of_pair": 0.663},
        audit_row("certified_gaussian", 10.0, "approx_dp", 10.0, "crafted_pair_gdp", "crafted_pair", 6.3,
                  ceiling=10.0, threat_model="final_model") | pair | {"eps_of_pair": 6.35},
        audit_row("certified_pure", 1.0, "pure_dp", 1.0, "crafted_pair_test", "crafted_pair", 0.0, ceiling=9.7,
                  threat_model="final_model") | pair | {"eps_of_pair": float("nan")},
        audit_row("dpsgd", 1.0, "approx_dp", 1.0, "white_box_gdp", "gradient_canary", 0.98, ceiling=1.0,
                  threat_model="white_box_all_updates"),
    ])
    text = digest.audits("digits", audit)
    assert ("The crafted pair (design A) moves the certified head ‖W_d − W_d'‖ = 0.1375, 0.687 of the proven "
            "Δ2 = 0.2002; a perfect test of this pair would show ε = `certified_gaussian` at ε = 1: 0.663; "
            "`certified_gaussian` at ε = 10: 6.350.") in text
    assert "The crafted pair" not in digest.audits("digits", audit.iloc[3:].dropna(axis=1, how="all"))


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
