"""The claims ledger on synthetic utility, MIA and DPAdapter rows whose per-record decisions are
built here from known 0/1 arrays: every verdict, value and count is checked against plain numpy
on those arrays, and the data are built so that the truth of each claim is unambiguous (or, where
the test is about an open claim, so that only the interval can tell)."""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privssl.artefacts.claims import PAPER_CLAIMS
from privssl.artefacts.tables import load_csv_file
from privssl.attacks.repeated import Estimate
from privssl.io import pack_decisions
from privssl.reports import contrastive_report, semileak_report
from privssl.reports.claims_ledger import (
    LEDGER_COLUMNS,
    Ledger,
    alm_claims,
    bound,
    contrastive_claims,
    dpadapter_claims,
    dpcl_accounting_claims,
    dpcl_claims,
    semileak_claims,
    side,
)
from privssl.reports.claims_spec import (
    ALM_CLAIMS,
    CONTRASTIVE_CLAIMS,
    DPADAPTER_CLAIMS,
    DPCL_CLAIMS,
    LEDGER_CLAIMS,
    SEMILEAK_CLAIMS,
)
from privssl.reports.ledger_markdown import markdown
from privssl.reports.regime import FEW_TRAININGS

CATALOGUE = Path(__file__).resolve().parents[1] / "resources" / "claims.csv"
Z_POWER = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
N_TEST, N_MIA = 300, 2000


@pytest.fixture
def catalogue():
    return load_csv_file(CATALOGUE, PAPER_CLAIMS)


@pytest.fixture
def ledger(catalogue):
    """Most tests hold a builder to its numbers and words on one synthetic training per arm: the rule
    that a training-procedure claim needs 3 has its own tests (test_..._trainings_...), with the default."""
    return Ledger(catalogue, min_trainings=1)


# --------------------------------------------------------------------------------- synthetic decisions

def exact(rng, n: int, k: int) -> np.ndarray:
    """n records, exactly k of them right, at random places."""
    bits = np.zeros(n, bool)
    bits[rng.choice(n, k, replace=False)] = True
    return bits


def flip(rng, base: np.ndarray, off: int = 0, on: int = 0) -> np.ndarray:
    """`base` with `off` of its right records made wrong and `on` of its wrong ones made right."""
    out = base.copy()
    out[rng.choice(np.flatnonzero(base), off, replace=False)] = False
    out[rng.choice(np.flatnonzero(~base), on, replace=False)] = True
    return out


def draws_of(rng, base: np.ndarray, count: int, swaps: int = 5) -> list[np.ndarray]:
    """`count` draws that each swap `swaps` right and wrong records of `base`: every draw has the
    same mean (no draw effect), the records disagree between draws."""
    return [flip(rng, base, swaps, swaps) for _ in range(count)]


def utility_rows(dataset, mechanism, eps, draws, clean=None, best=None) -> list[dict]:
    """utility.csv rows, one per draw; post-hoc releases carry the clean head's decisions (the same
    in every row) and the tuning grid's best noise-free head's (`best`, else the clean head's),
    training-time ones none."""
    best = clean if best is None else best
    clean_accuracy = float(clean.mean()) if clean is not None else 0.9
    return [{"dataset": dataset, "mechanism": mechanism, "eps": float(eps), "delta": 1e-5, "repeat": r,
             "guarantee_kind": "random_dp", "guarantee": "synthetic", "clean_accuracy": clean_accuracy,
             "accuracy": float(d.mean()), "utility_loss": 1 - float(d.mean()) / clean_accuracy, "n_test": d.size,
             "decisions": pack_decisions(d),
             "clean_decisions": pack_decisions(clean) if clean is not None else np.nan,
             "best_clean_decisions": pack_decisions(best) if clean is not None else np.nan}
            for r, d in enumerate(draws)]


def mia_rows(dataset, mechanism, eps, draws, attack="shadow_mlp", adaptive=True) -> list[dict]:
    return [{"dataset": dataset, "mechanism": mechanism, "eps": float(eps), "repeat": r, "attack": attack,
             "adaptive": adaptive, "accuracy": float(d.mean()), "auc": float(d.mean()), "n_members": d.size // 2,
             "n_nonmembers": d.size - d.size // 2, "decisions": pack_decisions(d)} for r, d in enumerate(draws)]


def frame(*groups: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([row for group in groups for row in group])


def layout(draws) -> np.ndarray:
    return np.stack(draws).astype(float)


def paired_t(a, b) -> tuple[float, float, float]:
    """mean(a) − mean(b) on the same records with the t interval of the per-record differences of
    the record means (n − 1 df): the paired difference when the draws add no variance of their own."""
    a, b = layout(a), layout(b)
    per_record = a.mean(0) - b.mean(0)
    d = a.mean() - b.mean()
    half = stats.t.ppf(0.975, per_record.size - 1) * per_record.std(ddof=1) / math.sqrt(per_record.size)
    return d, d - half, d + half


def paired_loss(release, clean) -> tuple[float, float, float, float]:
    """1 − mean(release)/mean(clean) with its delta-method t interval on the paired records, and
    n · (the loss's per-record variance): u_i = (a_i − r c_i) / c̄, the records' a_i the draws' mean."""
    a, c = layout(release).mean(0), np.asarray(clean, float)
    r = a.mean() / c.mean()
    u = (a - r * c) / c.mean()
    half = stats.t.ppf(0.975, u.size - 1) * u.std(ddof=1) / math.sqrt(u.size)
    return 1 - r, 1 - r - half, 1 - r + half, u.var(ddof=1)


def cp(k, n):
    return (stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0, stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0)


def need(d: float, n_var_records: float) -> float:
    """Records for 80 % power when the draws add no variance: n·var_records / (d / (z_.975 + z_.8))², ceiled."""
    return math.ceil(n_var_records / (d / Z_POWER) ** 2)


def one(table: pd.DataFrame, claim: str, setting: str | None = None, dataset: str | None = None):
    rows = table[table.claim == claim]
    if setting is not None:
        rows = rows[rows.setting == setting]
    if dataset is not None:
        rows = rows[rows.dataset == dataset]
    assert len(rows) == 1, f"{claim} {setting} {dataset}: {len(rows)} rows ({list(table.setting)})"
    return rows.iloc[0]


# --------------------------------------------------------------------------------- catalogue and Ledger.add

def test_the_catalogue_names_every_ledger_claim_once_under_its_seed():
    raw = pd.read_csv(CATALOGUE)  # not the schema loader, which would refuse an unknown id before we look
    counts = raw.claim.value_counts()
    assert len(set(LEDGER_CLAIMS)) == len(LEDGER_CLAIMS)
    assert sorted(counts[counts > 1].index) == [], "a claim listed twice"
    assert sorted(set(LEDGER_CLAIMS) - set(raw.claim)) == [], "a ledger claim missing from the catalogue"
    assert sorted(set(raw.claim) - set(LEDGER_CLAIMS)) == [], "a catalogue row no builder writes"
    seeds = raw.set_index("claim").seed
    families = ((ALM_CLAIMS, "000 "), (DPADAPTER_CLAIMS, "002 "), (CONTRASTIVE_CLAIMS, "003 He thesis, Ch. 4"),
                (SEMILEAK_CLAIMS, "003 He thesis, Ch. 3"), (DPCL_CLAIMS, "004 "))
    for family, prefix in families:
        assert all(seeds[c].startswith(prefix) for c in family), (prefix, seeds[list(family)].to_dict())
    assert raw.statement.str.len().min() > 20 and raw.paper_value.str.len().min() > 5


def test_the_ledger_refuses_an_unknown_claim_or_verdict(ledger):
    a, d = side(0.6, 0.5, 0.7, 100), Estimate(0.1, 0.0, 0.2, 100, 1, 0.0025, 0.0, 99.0)
    with pytest.raises(ValueError, match="alm_is_great"):
        ledger.add("digits", "alm_is_great", "", "", "", a, bound(0.5), d, "x", "x", "reproduced")
    with pytest.raises(ValueError, match="'shown'"):
        ledger.add("digits", "alm_unprotected_vulnerable", "", "", "", a, bound(0.5), d, "x", "x", "shown")
    assert ledger.rows == []


def test_the_ledger_refuses_a_claim_missing_from_the_catalogue(catalogue):
    partial = Ledger(catalogue[catalogue.claim != "dpcl_above_naive"])
    a, d = side(0.6, 0.5, 0.7, 100), Estimate(0.1, 0.0, 0.2, 100, 1, 0.0025, 0.0, 99.0)
    with pytest.raises(ValueError, match="dpcl_above_naive.*not in resources/claims.csv"):
        partial.add("d", "dpcl_above_naive", "", "", "", a, a, d, "x", "x", "reproduced")
    rng = np.random.default_rng(0)
    base = exact(rng, N_TEST, 200)
    utility = frame(utility_rows("d", "dpcl", 1, [base]), utility_rows("d", "dpcl_naive", 1, [base]))
    with pytest.raises(ValueError, match="not in resources/claims.csv"):
        dpcl_claims(partial, utility)


def test_a_row_keeps_the_catalogue_and_a_need_only_when_unresolved(ledger, catalogue):
    d = Estimate(0.1, 0.05, 0.15, 100, 2, 0.0006, 0.0, 99.0)
    for verdict in ("reproduced", "unresolved"):
        ledger.add("d", "dpcl_above_naive", "ε = 1", "q", "c", side(0.7, 0.6, 0.8, 100, 2),
                   side(0.6, 0.5, 0.7, 100, 2), d, "paired by record", "a − b > 0", verdict, 123.0)
    table = ledger.frame()
    assert list(table.columns) == LEDGER_COLUMNS
    entry = catalogue.set_index("claim").loc["dpcl_above_naive"]
    assert (table.seed == entry.seed).all() and (table.statement == entry.statement).all()
    assert np.isnan(table.n_for_80pct_power.iloc[0]) and table.n_for_80pct_power.iloc[1] == 123.0
    assert list(table.n) == [100, 100] and list(table.draws) == [2, 2]


# --------------------------------------------------------------------------------- ALM: the unprotected head

def test_the_unprotected_head_against_chance(ledger):
    rng = np.random.default_rng(1)
    strong = [exact(rng, N_MIA, 1200), exact(rng, N_MIA, 1200)]  # 0.6 over 2 draws of 2000 records
    weak = [exact(rng, 200, 104)]  # 0.52 on 200 records: not beyond chance
    clean = exact(rng, N_TEST, 240)
    utility = frame(utility_rows("strong", "laplace", 1, [clean], clean),
                    utility_rows("weak", "laplace", 1, [clean], clean))
    mia = frame(mia_rows("strong", "none", np.nan, strong), mia_rows("weak", "none", np.nan, weak),
                mia_rows("strong", "none", np.nan, [exact(rng, N_MIA, 300)], attack="threshold"))  # not the paper's
    alm_claims(ledger, utility, mia)
    table = ledger.frame()
    row = one(table, "alm_unprotected_vulnerable", dataset="strong")
    assert row.verdict == "reproduced" and row.setting == "no noise"
    assert row.value == pytest.approx(layout(strong).mean()) and row.reference == 0.5
    assert row.difference == pytest.approx(0.1) and (row.n, row.draws) == (N_MIA, 2)
    assert row.difference_lo == pytest.approx(row.value_lo - 0.5) and row.difference_lo > 0
    row = one(table, "alm_unprotected_vulnerable", dataset="weak")
    x = weak[0].astype(float)
    assert row.verdict == "unresolved" and row.value == pytest.approx(0.52)
    assert row.n_for_80pct_power == need(0.02, x.var(ddof=1)) and row.n_for_80pct_power > 200


# --------------------------------------------------------------------------------- ALM vs Laplace and Gaussian

def alm_grid(rng):
    """ALM above Laplace at ε = 1 and below it at ε = 10; below the Gaussian at ε = 1 and above it at
    ε = 10; all on the same clean head (270 of 300 right), 3 draws each."""
    clean = exact(rng, N_TEST, 270)
    rights = {("alm", 1): 240, ("laplace", 1): 150, ("gaussian", 1): 260,
              ("alm", 10): 150, ("laplace", 10): 240, ("gaussian", 10): 120}
    draws = {key: draws_of(rng, flip(rng, clean, off=270 - k), 3) for key, k in rights.items()}
    groups = [utility_rows("d", m, e, ds, clean) for (m, e), ds in draws.items()]
    groups += [utility_rows("d", "laplace", 100, draws_of(rng, clean, 3), clean),  # no ALM at ε = 100
               utility_rows("d", "alm", np.inf, [clean], clean), utility_rows("d", "laplace", np.inf, [clean], clean)]
    return clean, draws, frame(*groups)


@pytest.mark.parametrize("claim, other, expected", [
    ("alm_loss_below_laplace", "laplace", {1: "reproduced", 10: "contradicted"}),
    ("alm_loss_below_gaussian", "gaussian", {1: "contradicted", 10: "reproduced"})])
def test_alm_against_laplace_and_gaussian_in_the_claimed_order(ledger, claim, other, expected):
    rng = np.random.default_rng(2)
    clean, draws, utility = alm_grid(rng)
    attacks = [mia_rows("d", "none", np.nan, [exact(rng, N_MIA, 1200)])]
    attacks += [mia_rows("d", "alm", e, draws_of(rng, exact(rng, N_MIA, 1000), 3)) for e in (1, 10)]
    alm_claims(ledger, utility, frame(*attacks))
    table = ledger.frame()
    assert sorted(table[table.claim == claim].setting) == ["ε = 1", "ε = 10"]  # not ∞, not Laplace's lone ε = 100
    for eps, verdict in expected.items():
        row = one(table, claim, f"ε = {eps}")
        alm, them = draws[("alm", eps)], draws[(other, eps)]
        d, lo, hi = paired_t(alm, them)
        assert row.verdict == verdict
        assert row.value == pytest.approx(1 - layout(alm).mean() / clean.mean())  # ALM's loss
        assert row.reference == pytest.approx(1 - layout(them).mean() / clean.mean())  # the other's loss
        # loss(ALM) − loss(other) = −(accuracy(ALM) − accuracy(other)) / clean accuracy
        assert row.difference == pytest.approx(-d / clean.mean())
        assert (row.difference_lo, row.difference_hi) == (pytest.approx(-hi / clean.mean()),
                                                          pytest.approx(-lo / clean.mean()))
        assert (row.n, row.draws, row.n_reference) == (N_TEST, 3, N_TEST) and row.design == "paired by record"


def test_the_utility_loss_is_paired_with_the_clean_heads_decisions(ledger):
    """ALM's three draws each lose 5 of the clean head's 240 right records: a loss of 0.021 whose
    paired interval is narrow; with the clean accuracy as a constant it would be over twice as wide."""
    rng = np.random.default_rng(3)
    clean = exact(rng, N_TEST, 240)
    alm = [flip(rng, clean, off=5) for _ in range(3)]
    laplace = [flip(rng, clean, off=120) for _ in range(3)]
    utility = frame(utility_rows("d", "alm", 1, alm, clean), utility_rows("d", "laplace", 1, laplace, clean))
    alm_claims(ledger, utility, frame(mia_rows("d", "none", np.nan, [exact(rng, N_MIA, 1200)]),
                                      mia_rows("d", "alm", 1, draws_of(rng, exact(rng, N_MIA, 1000), 3))))
    row = one(ledger.frame(), "alm_loss_below_laplace")
    loss, lo, hi, _ = paired_loss(alm, clean)
    assert loss == pytest.approx(5 / 240)
    assert (row.value, row.value_lo, row.value_hi) == (pytest.approx(loss), pytest.approx(lo), pytest.approx(hi))
    constant_lo, constant_hi = cp(int(layout(alm).sum()), 3 * N_TEST)
    assert (hi - lo) * 2 < (constant_hi - constant_lo) / clean.mean()


# --------------------------------------------------------------------------------- ALM: protection to chance

def protection(rng, clean, alm_by_eps: dict, mia_by_eps: dict, best=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    utility = frame(*[utility_rows("d", "alm", eps, draws, clean, best) for eps, draws in alm_by_eps.items()])
    mia = frame(*[mia_rows("d", "alm", eps, [exact(rng, N_MIA, k) for _ in range(3)]) for eps, k in mia_by_eps.items()])
    return utility, mia


def test_protection_at_the_most_private_useful_eps(ledger):
    """Loss 0.5 at ε = 1, 0.021 at ε = 10 (paired interval below 0.05), 0 at ε = 100: the operating
    point is ε = 10, where the attack is exactly at chance on 3 × 2000 decisions."""
    rng = np.random.default_rng(4)
    clean = exact(rng, N_TEST, 240)
    alm = {1: [flip(rng, clean, off=120)], 10: [flip(rng, clean, off=5) for _ in range(3)], 100: [clean]}
    utility, mia = protection(rng, clean, alm, {1: 1000, 10: 1000, 100: 1400})
    # the design: with the clean accuracy as a constant the loss's interval would straddle 0.05
    constant_lo, constant_hi = cp(235, N_TEST)
    assert 1 - constant_hi / clean.mean() < 0 < 0.05 < 1 - constant_lo / clean.mean()
    alm_claims(ledger, utility, mia)
    row = one(ledger.frame(), "alm_protects_to_chance")
    assert row.setting == "ε = 10"
    assert row.value == 0.5 and row.difference == 0.0 and (row.n, row.draws) == (N_MIA, 3)
    assert (row.reference, row.reference_lo, row.reference_hi) == (0.5, pytest.approx(0.45), pytest.approx(0.55))
    assert math.isnan(row.n_reference)  # a margin around a fixed value counts no records
    assert row.verdict == "reproduced" and np.isnan(row.n_for_80pct_power)


def test_the_operating_point_is_chosen_by_the_point_estimate(ledger):
    """ε = 1 loses 0.042 by its point estimate, its interval across 0.05: still the operating point
    (not ε = 10, whose loss is 0 but whose attack is at 0.7); the loss leaves the claim open."""
    rng = np.random.default_rng(5)
    clean = exact(rng, N_TEST, 240)
    alm = {1: [flip(rng, clean, off=20, on=10)], 10: [clean]}
    utility, mia = protection(rng, clean, alm, {1: 1000, 10: 1400})
    loss, lo, hi, n_var = paired_loss(alm[1], clean)
    assert loss == pytest.approx(10 / 240) and lo < 0.05 < hi
    alm_claims(ledger, utility, mia)
    row = one(ledger.frame(), "alm_protects_to_chance")
    assert row.setting == "ε = 1" and row.value == 0.5
    assert row.verdict == "unresolved"
    assert row.n_for_80pct_power == need(loss - 0.05, n_var) and row.n_for_80pct_power > N_TEST


@pytest.mark.parametrize("rights", [700, 1240])  # 0.35: below 0.45 beyond its interval; 0.62 above 0.55
def test_an_attack_wholly_outside_chance_contradicts_protection(ledger, rights):
    rng = np.random.default_rng(6)
    clean = exact(rng, N_TEST, 240)
    utility, mia = protection(rng, clean, {10: [clean]}, {10: rights})
    alm_claims(ledger, utility, mia)
    row = one(ledger.frame(), "alm_protects_to_chance")
    assert row.setting == "ε = 10" and row.value == pytest.approx(rights / N_MIA)
    assert row.verdict == "contradicted" and np.isnan(row.n_for_80pct_power)


@pytest.mark.parametrize("off, on, verdict", [(60, 0, "contradicted"), (25, 10, "unresolved")])
def test_without_a_useful_eps_the_largest_eps_tests_the_loss(ledger, off, on, verdict):
    """Loss 0.5 at ε = 1 and 0.25 (or 0.0625, its interval across 0.05) at ε = 10: no ε is useful,
    the row tests ε = 10's loss against 0.05, and the attack's chance level plays no part."""
    rng = np.random.default_rng(7)
    clean = exact(rng, N_TEST, 240)
    alm = {1: [flip(rng, clean, off=120)], 10: [flip(rng, clean, off=off, on=on)]}
    utility, mia = protection(rng, clean, alm, {1: 1000, 10: 1000})
    alm_claims(ledger, utility, mia)
    row = one(ledger.frame(), "alm_protects_to_chance")
    loss, lo, hi, n_var = paired_loss(alm[10], clean)
    assert loss == pytest.approx((off - on) / 240)
    assert row.setting == "ε = 10 (the grid's largest)" and row.design == "against a fixed value"
    assert (row.dataset, row.quantity, row.compared, row.test) == (
        "d", "utility loss against the non-private heads (the larger of the two), test records × noise draws",
        "ALM's utility loss vs the paper's 0.05", "utility loss < 0.05")
    assert row.note.startswith("no ε of the grid keeps ALM's utility loss below 0.05, so the MIA side is not reached; "
                               "utility loss against the released non-private head (chosen for its noise) ")
    assert (row.value, row.value_lo, row.value_hi) == (pytest.approx(loss), pytest.approx(lo), pytest.approx(hi))
    assert row.reference == 0.05 and row.difference == pytest.approx(loss - 0.05) and row.n == N_TEST
    assert row.verdict == verdict
    if verdict == "unresolved":
        assert row.n_for_80pct_power == need(loss - 0.05, n_var)


@pytest.mark.parametrize("best_extra", [0, 30, -30])
def test_the_loss_of_protection_is_against_both_non_private_heads(ledger, best_extra):
    """The released head (240 of 1000 right) and ALM at ε = 10 on it (235 right, loss 0.021 against
    it, interval below 0.05): reproduced when the grid's best noise-free head is the released one;
    when the best head decides 30 more records right (270), the loss against it is 0.13, beyond
    0.05, and the same release no longer supports the claim's "< 5 %" half. A best head 30 records
    worse on test (the referee's case: best on validation only) must not rescue a release that
    loses too much against the released head: there the released head binds."""
    rng = np.random.default_rng(4)
    clean = exact(rng, N_TEST, 240)
    best = clean.copy()
    if best_extra >= 0:
        best[np.flatnonzero(~clean)[:best_extra]] = True
    else:
        best[np.flatnonzero(clean)[:-best_extra]] = False
    alm = {10: [flip(rng, clean, off=5) for _ in range(3)]}
    utility, mia = protection(rng, clean, alm, {10: 1000}, best)
    alm_claims(ledger, utility, mia)
    row = one(ledger.frame(), "alm_protects_to_chance")
    against_best = 1 - np.mean([d.mean() for d in alm[10]]) / best.mean()
    assert row.setting == ("ε = 10" if best_extra <= 0 else "ε = 10 (the grid's largest)")
    if best_extra <= 0:  # the released head binds (loss 0.021 < 0.05 beyond its interval)
        assert row.verdict == "reproduced"
        assert "against the released non-private head (chosen for its noise) 0.021" in row.note
    else:
        assert against_best == pytest.approx(1 - 235 / 270)
        assert row.value == pytest.approx(against_best) and row.value_lo > 0.05
        assert row.verdict == "contradicted"
        assert "against the released non-private head (chosen for its noise) 0.021" in row.note


def test_a_best_head_worse_on_test_does_not_rescue_a_costly_release(ledger):
    """The referee's case: ALM loses 60 of the released head's 240 right records (loss 0.25), and
    the grid's best head (best on validation) is right on only those 180 on test: against it alone
    the loss would be 0 and the claim reproduced; against both, the released head binds."""
    rng = np.random.default_rng(13)
    clean = exact(rng, N_TEST, 240)
    alm = {10: [flip(rng, clean, off=60) for _ in range(3)]}
    best = alm[10][0].copy()
    utility, mia = protection(rng, clean, alm, {10: 1000}, best)
    alm_claims(ledger, utility, mia)
    row = one(ledger.frame(), "alm_protects_to_chance")
    assert row.setting == "ε = 10 (the grid's largest)" and row.verdict == "contradicted"
    assert row.value == pytest.approx(60 / 240)


# --------------------------------------------------------------------------------- DPCL

def test_dpcl_above_naive_in_the_claimed_order(ledger):
    rng = np.random.default_rng(8)
    base = exact(rng, N_TEST, 240)
    high, low = draws_of(rng, base, 3), draws_of(rng, flip(rng, base, off=90), 3)
    utility = frame(utility_rows("up", "dpcl", 10, high), utility_rows("up", "dpcl_naive", 10, low),
                    utility_rows("down", "dpcl", 10, low), utility_rows("down", "dpcl_naive", 10, high),
                    utility_rows("up", "dpcl", np.inf, high), utility_rows("up", "dpcl_naive", np.inf, low))
    dpcl_claims(ledger, utility)
    table = ledger.frame()
    assert len(table) == 2  # ε = ∞ compares nothing
    for dataset, a, b, verdict in (("up", high, low, "reproduced"), ("down", low, high, "contradicted")):
        row = one(table, "dpcl_above_naive", "ε = 10", dataset)
        d, lo, hi = paired_t(a, b)
        assert row.verdict == verdict
        assert row.value == pytest.approx(layout(a).mean()) and row.reference == pytest.approx(layout(b).mean())
        assert (row.difference, row.difference_lo, row.difference_hi) == (pytest.approx(d), pytest.approx(lo),
                                                                         pytest.approx(hi))
        assert (row.n, row.draws, row.n_reference) == (N_TEST, 3, N_TEST)


def test_a_point_estimate_on_the_claimed_side_is_not_a_verdict(ledger):
    """DPCL right on 62 of 100 records, naive on 60, disagreeing on 10: +0.02, the interval across 0."""
    rng = np.random.default_rng(9)
    naive = exact(rng, 100, 60)
    dpcl = flip(rng, naive, off=4, on=6)
    dpcl_claims(ledger, frame(utility_rows("d", "dpcl", 1, [dpcl]), utility_rows("d", "dpcl_naive", 1, [naive])))
    row = one(ledger.frame(), "dpcl_above_naive")
    per_record = dpcl.astype(float) - naive
    assert row.difference == pytest.approx(0.02) and row.difference_lo < 0 < row.difference_hi
    assert row.verdict == "unresolved"
    assert row.n_for_80pct_power == need(0.02, per_record.var(ddof=1)) and row.n_for_80pct_power > 100


def test_copies_of_one_draw_give_the_single_draw_interval_not_the_pooled_one(ledger):
    """Two draws that repeat one draw exactly are one measurement of each of the 400 records, not
    800 decisions: n = 400, draws = 2, and the intervals of the single draw."""
    rng = np.random.default_rng(10)
    naive = exact(rng, 400, 240)
    dpcl = flip(rng, naive, off=20, on=60)
    utility = frame(utility_rows("d", "dpcl", 1, [dpcl, dpcl]), utility_rows("d", "dpcl_naive", 1, [naive, naive]))
    dpcl_claims(ledger, utility)
    row = one(ledger.frame(), "dpcl_above_naive")
    assert (row.n, row.draws, row.n_reference) == (400, 2, 400)
    d, lo, hi = paired_t([dpcl], [naive])  # the single draw's paired interval
    assert row.verdict == "reproduced"
    assert (row.difference, row.difference_lo, row.difference_hi) == (pytest.approx(0.1), pytest.approx(lo),
                                                                     pytest.approx(hi))
    single, pooled = cp(280, 400), cp(560, 800)
    width = row.value_hi - row.value_lo
    assert width == pytest.approx(single[1] - single[0], rel=0.01)
    assert width > 1.3 * (pooled[1] - pooled[0])


def test_dpcl_repeats_that_copy_one_training_count_once(catalogue):
    """DPCL 0.7 against naive 0.55 with 3 repeats per arm: 3 distinct trainings are judged; the
    same 3 repeats as copies of one training (one seed every repeat) are 1 training per arm."""
    rng = np.random.default_rng(13)
    naive = exact(rng, 400, 220)
    dpcl = flip(rng, naive, on=60)
    distinct = frame(utility_rows("d", "dpcl", 10, draws_of(rng, dpcl, 3)),
                     utility_rows("d", "dpcl_naive", 10, draws_of(rng, naive, 3)))
    copies = frame(utility_rows("d", "dpcl", 10, [dpcl] * 3), utility_rows("d", "dpcl_naive", 10, [naive] * 3))
    verdicts = {}
    for name, utility in (("distinct", distinct), ("copies", copies)):
        ledger = Ledger(catalogue, min_trainings=3)
        dpcl_claims(ledger, utility)
        row = one(ledger.frame(), "dpcl_above_naive")
        verdicts[name] = (row.verdict, row.unresolved_because)
    assert verdicts == {"distinct": ("reproduced", ""), "copies": ("unresolved", FEW_TRAININGS)}


# --------------------------------------------------------------------------------- DPAdapter

def dpadapter_rows(dataset, pretraining, rho, draws, seeds=None, networks=None) -> list[dict]:
    """dpadapter/results.csv rows, one per repeat; `seeds`: each repeat's pre-training seed (default:
    one pre-training that every repeat fine-tunes); `networks`: which pre-trained network each
    repeat's seed gave (default: one per seed), its test accuracies telling it apart."""
    seeds = seeds or [0] * len(draws)
    networks = networks or seeds
    return [{"dataset": dataset, "pretraining": pretraining, "rho": rho, "eps": 1.0, "repeat": r,
             "pretraining_seed": seed, "accuracy": float(d.mean()), "n_test": d.size, "decisions": pack_decisions(d),
             "robust_accuracy": 0.5, "pretrain_accuracy": 0.6 + 0.001 * net,
             "pretrain_robust_accuracy": 0.5 + 0.001 * net, "robust_noise": 0.1, "robust_draws": 8,
             "noise_multiplier": 1.0, "eps_spent": 1.0}
            for r, (d, seed, net) in enumerate(zip(draws, seeds, networks))]


def test_dpadapter_and_sam_in_the_papers_order(ledger):
    """'up': DPAdapter 0.8 > SAM 0.65 > standard 0.5 at two radii; 'mixed': DPAdapter 0.65 > SAM
    0.5 < standard 0.8; 'down': the reverse of 'up'."""
    rng = np.random.default_rng(11)
    base = exact(rng, N_TEST, 240)
    levels = {k: draws_of(rng, flip(rng, base, off=240 - k), 3) for k in (240, 195, 150)}
    orders = {"up": (240, 195, 150), "mixed": (195, 150, 240), "down": (150, 195, 240)}
    rhos = {"up": (0.05, 0.1), "mixed": (0.05,), "down": (0.05,)}
    groups = []
    for dataset, (dpadapter, sam, standard) in orders.items():
        groups.append(dpadapter_rows(dataset, "standard", 0.0, levels[standard]))
        for rho in rhos[dataset]:
            groups += [dpadapter_rows(dataset, "dpadapter", rho, levels[dpadapter]),
                       dpadapter_rows(dataset, "sam", rho, levels[sam])]
    dpadapter_claims(ledger, frame(*groups))
    table = ledger.frame()
    assert len(table) == 2 * 4
    for dataset, (dpadapter, sam, standard) in orders.items():
        for rho in rhos[dataset]:
            for claim, high, low in (("dpadapter_above_sam", dpadapter, sam), ("sam_above_standard", sam, standard)):
                row = one(table, claim, f"ε = 1, ρ = {rho:g}", dataset)
                d, lo, hi = paired_t(levels[high], levels[low])
                assert row.verdict == ("reproduced" if high > low else "contradicted"), (dataset, claim)
                assert row.value == pytest.approx(high / N_TEST) and row.reference == pytest.approx(low / N_TEST)
                assert (row.difference, row.difference_lo, row.difference_hi) == (
                    pytest.approx(d), pytest.approx(lo), pytest.approx(hi))
                assert (row.n, row.draws, row.n_reference) == (N_TEST, 3, N_TEST)


@pytest.mark.parametrize("seeds, networks, verdict", [([5, 5, 5], None, "unresolved"),
                                                     ([5, 6, 7], None, "reproduced"),
                                                     ([5, 6, 7], [5, 5, 5], "unresolved")])
def test_dpadapter_claims_count_pre_trainings_not_fine_tunings(catalogue, seeds, networks, verdict):
    """DPAdapter 0.8 against SAM 0.5 on 3 repeats each: the records alone reproduce the order, but
    3 DP-SGD fine-tunings of one pre-training per arm are one training of the procedure compared:
    unresolved under the 3-trainings rule; 3 pre-trainings per arm are judged, unless their seeds
    gave one network (a seed recorded but not used: the same test accuracies every repeat)."""
    rng = np.random.default_rng(12)
    base = exact(rng, N_TEST, 240)
    high, low = draws_of(rng, base, 3), draws_of(rng, flip(rng, base, off=90), 3)
    ledger = Ledger(catalogue, min_trainings=3)
    dpadapter_claims(ledger, frame(dpadapter_rows("d", "dpadapter", 0.05, high, seeds, networks),
                                   dpadapter_rows("d", "sam", 0.05, low, seeds, networks),
                                   dpadapter_rows("d", "standard", 0.0, low, seeds, networks)))
    row = one(ledger.frame(), "dpadapter_above_sam")
    assert row.verdict == verdict and row.draws == 3
    trainings = len(set(networks or seeds))
    assert f"3 DP-SGD fine-tunings of {trainings} pre-training" in row.note
    if verdict == "unresolved":
        assert "1 training per arm (the records alone read reproduced)" in row.note


# --------------------------------------------------------------------------------- branch tables

# the report's side a of each claim, the model whose leak the claim rests on (as contrastive_report words it)
COMPARED = {"membership": "supervised vs contrastive", "attribute": "contrastive vs supervised",
            "talos": "contrastive (λ = 0) vs Talos (λ = 1)"}


def contrastive_row(**values) -> dict:
    row = dict.fromkeys(contrastive_report.CLAIM_COLUMNS, np.nan)
    row.update(dataset="utk", compared=COMPARED[values["claim"]], claimed="a > b", design="paired by record",
               test="a − b > 0", value_a=0.7, value_a_lo=0.68, value_a_hi=0.72, n_a=1000, draws_a=3, value_b=0.6,
               value_b_lo=0.58, value_b_hi=0.62, n_b=1000, draws_b=3, difference=0.1, difference_lo=0.07,
               difference_hi=0.13, baseline_a=0.2, baseline_b=0.2)
    return row | values


def test_contrastive_rows_map_onto_their_claims(ledger):
    table = pd.DataFrame([
        contrastive_row(claim="membership", quantity="membership inference accuracy, NN attack (nn)",
                        verdict="unresolved", n_for_80pct_power=5000.0, difference=0.01, difference_lo=-0.02),
        contrastive_row(claim="attribute", quantity="attribute inference accuracy (mlp)", verdict="reproduced",
                        note="not above the majority baseline beyond the intervals: supervised"),
        contrastive_row(claim="talos", quantity="attribute inference accuracy (mlp)", **{"lambda": 1.0},
                        verdict="reproduced"),
        contrastive_row(claim="talos", quantity="task accuracy", **{"lambda": 3.0}, verdict="contradicted",
                        n_test=500, n_a=500, n_b=500),
        contrastive_row(claim="talos", quantity="membership inference accuracy, NN attack (nn)", **{"lambda": 1.0},
                        verdict="unresolved", n_for_80pct_power=np.inf, difference=0.0, difference_lo=-0.03)],
        columns=contrastive_report.CLAIM_COLUMNS)
    contrastive_claims(ledger, table)
    out = ledger.frame()
    assert list(out.claim) == ["contrastive_less_membership", "contrastive_more_attribute",
                               "talos_removes_attribute_leak", "talos_no_task_cost", "talos_no_membership_cost"]
    assert list(out.setting) == ["NN attack (nn)", "attribute inference accuracy (mlp)", "λ = 1", "λ = 3", "λ = 1"]
    assert list(out.verdict) == list(table.verdict)
    assert list(out.difference) == list(table.difference) and list(out.difference_lo) == list(table.difference_lo)
    assert list(out.n) == list(table.n_a) and list(out.draws) == [3] * 5 and list(out.n_reference) == list(table.n_b)
    assert out.n_for_80pct_power.iloc[0] == 5000 and np.isinf(out.n_for_80pct_power.iloc[4])
    assert out.n_for_80pct_power.iloc[1:4].isna().all()
    assert out.note.iloc[1].startswith("not above") and out.note.iloc[0] == ""


def test_semileak_rows_map_onto_their_claims(ledger):
    base = dict(dataset="cifar", quantity="A_DA AUC", compared="a vs b", value_a=0.7, value_a_lo=0.65,
                value_a_hi=0.75, n_a=500, value_b=0.6, value_b_lo=0.55, value_b_hi=0.65, n_b=500, difference=0.1,
                difference_lo=0.04, difference_hi=0.16, design="paired by record (DeLong)", test="a − b > 0",
                trainings=1,
                note=np.nan)
    table = pd.DataFrame([
        base | dict(claim="dpsgd", target="fixmatch_dpsgd", eps=8.0, verdict="reproduced", n_for_80pct_power=np.nan),
        base | dict(claim="top1", target="fixmatch", eps=np.nan, verdict="unresolved", n_for_80pct_power=2400.0,
                    difference=-0.01, difference_lo=-0.05, difference_hi=0.03)],
        columns=semileak_report.CLAIM_COLUMNS)
    semileak_claims(ledger, table)
    out = ledger.frame()
    assert list(out.claim) == ["semileak_dpsgd", "semileak_top1"]
    assert list(out.setting) == ["fixmatch_dpsgd, target ε = 8", "fixmatch"]
    assert list(out.verdict) == ["reproduced", "unresolved"] and list(out.difference) == [0.1, -0.01]
    assert list(out.n) == [500, 500] and list(out.draws) == [1, 1]
    assert np.isnan(out.n_for_80pct_power.iloc[0]) and out.n_for_80pct_power.iloc[1] == 2400


def test_dpcl_accounting_reproduces_a_match_and_leaves_shared_batches_open(ledger):
    settings = [{"objective": "simclr", "variant": v, "steps": 10, "paper_noise_multipliers": "0.4", "eps": 1000.0,
                 "delta": 1e-5, "eps_rdp_without_replacement": shared, "eps_rdp_without_replacement_separate": 1000.5,
                 "eps_pld_poisson": 20.0} for v, shared in (("naive", 1005.0), ("dpcl", 1.1e5), ("naive", 1020.0))]
    dpcl_accounting_claims(ledger, settings)
    table = ledger.frame()
    assert list(table.verdict) == ["reproduced", "unresolved", "unresolved"]  # 1005 within 1 %, 1020 not
    assert list(table.value) == [1005.0, 1.1e5, 1020.0] and (table.reference == 1000.0).all()
    assert "1000" in table.note.iloc[1] and table.n_for_80pct_power.isna().all() and table.difference.isna().all()
    assert (table.design == "computation").all()


# --------------------------------------------------------------------------------- Markdown

def test_markdown_counts_each_seeds_verdicts_and_shows_records_by_draws(ledger):
    rng = np.random.default_rng(12)
    base = exact(rng, N_TEST, 240)
    dpcl_claims(ledger, frame(utility_rows("d", "dpcl", 10, draws_of(rng, base, 3)),
                              utility_rows("d", "dpcl_naive", 10, draws_of(rng, flip(rng, base, off=90), 3))))
    dpcl_accounting_claims(ledger, [{"objective": "simclr", "variant": v, "steps": 10,
                                     "paper_noise_multipliers": "0.4", "eps": 1000.0, "delta": 1e-5,
                                     "eps_rdp_without_replacement": shared,
                                     "eps_rdp_without_replacement_separate": 1000.0, "eps_pld_poisson": 20.0}
                                    for v, shared in (("naive", 1000.0), ("dpcl", 1.1e5))])
    contrastive_claims(ledger, pd.DataFrame([contrastive_row(
        claim="talos", quantity="membership inference accuracy, NN attack (nn)", **{"lambda": 1.0},
        verdict="unresolved", n_for_80pct_power=np.inf, difference=0.0, difference_lo=-0.03)],
        columns=contrastive_report.CLAIM_COLUMNS))
    text = markdown(ledger.frame())
    # the paper-σ row of DPCL's shared batches is open, and no data can close it; Talos's open
    # membership row rests on a contrastive model that leaks (0.68 > 0.5): it needs more data
    assert "| 004 DPCL | 2 | 0 | 0 | 0 | 0 | 1 | 0 |" in text
    assert "| 003 He thesis, Ch. 4 (contrastive privacy) | 0 | 0 | 0 | 0 | 1 | 0 | 0 |" in text
    assert f"({N_TEST} × 3)" in text and "(1000 × 3)" in text
    assert "(paired by record)" in text and "**reproduced**" in text
    assert "| more draws, not records |" in text
    assert "- **dpcl_above_naive** (004 DPCL," in text and "- **talos_no_membership_cost**" in text
    assert markdown(ledger.frame().iloc[:0]).startswith("No claim was measured")


def test_a_claim_the_run_does_not_measure_stays_in_the_ledger_as_not_tested(ledger, catalogue):
    rng = np.random.default_rng(5)
    base = exact(rng, N_TEST, 240)
    dpcl_claims(ledger, frame(utility_rows("d", "dpcl", 10, draws_of(rng, base, 2)),
                              utility_rows("d", "dpcl_naive", 10, draws_of(rng, flip(rng, base, off=90), 2))))
    judged = len(ledger.rows)
    ledger.add_not_tested()
    table = ledger.frame()
    untested = table[table.verdict == "not tested"]
    # one row for each claim of the catalogue but the one judged
    assert untested.claim.is_unique and set(untested.claim) == set(catalogue.claim) - {"dpcl_above_naive"}
    assert len(table) == judged + len(catalogue) - 1
    views = untested.set_index("claim").loc["semileak_views"]
    assert views.note == ("this run measured nothing the claim compares; it needs semileak.attack.views_grid with a "
                          "count of views other than semileak.attack.views")
    assert views.paper_value == catalogue.set_index("claim").loc["semileak_views"].paper_value
    assert untested[["value", "n", "difference", "n_for_80pct_power"]].isna().all().all()
    text = markdown(table)
    assert "| 004 DPCL | 1 | 0 | 0 | 0 | 0 | 0 | 1 |" in text  # dpcl_above_naive reproduced, the paper-σ row not tested
    assert "| | semileak_views | |" in text and "**not tested**" in text


def test_draws_measured_against_different_clean_heads_are_refused(ledger):
    rng = np.random.default_rng(21)
    clean, other = exact(rng, N_TEST, 270), exact(rng, N_TEST, 210)
    rows = frame(utility_rows("d", "alm", 1, [clean], clean), utility_rows("d", "alm", 1, [clean], other))
    rows["repeat"] = [0, 1]
    with pytest.raises(ValueError, match="different (best_)?clean_decisions cells"):
        alm_claims(ledger, rows, frame(mia_rows("d", "alm", 1, [exact(rng, N_MIA, 1000)] * 2)))


def test_inconsistent_releases_are_refused_most_private_first(ledger):
    """ALM at ε = 10 (listed first) has draws against three different clean heads, ALM at ε = 1
    against two: the refusal is ε = 1's, the grid being read from its most private ε."""
    rng = np.random.default_rng(23)
    heads = [exact(rng, N_TEST, k) for k in (270, 250, 230)]
    rows = frame(*[utility_rows("d", "alm", 10, [head], head) for head in heads],
                 *[utility_rows("d", "alm", 1, [head], head) for head in heads[:2]])
    rows["repeat"] = [0, 1, 2, 0, 1]
    with pytest.raises(ValueError, match=r"different (best_)?clean_decisions cells \(2 distinct\)"):
        alm_claims(ledger, rows, frame(mia_rows("d", "alm", 1, [exact(rng, N_MIA, 1000)])))


def test_an_operating_point_without_attack_rows_is_refused_not_dropped(ledger):
    rng = np.random.default_rng(22)
    clean = exact(rng, N_TEST, 270)
    utility = frame(utility_rows("d", "alm", 10, [clean, clean], clean))
    with pytest.raises(ValueError, match="operating point"):
        alm_claims(ledger, utility, frame(mia_rows("d", "alm", 100, [exact(rng, N_MIA, 1000)])))


# --------------------------------------------------------------------------------- the rows' own words
# The ledger's quantity, compared, test and note columns are what a reader sees beside each number;
# the tests below hold each builder to its wording, and markdown() to its layout, verbatim.

ALM_LOSS_NOTE = ("ALM and Laplace use the sampled Δ1, the Gaussian Δ2 (both the sensitivity sampler's); the "
                 "difference is the accuracies' (paired on the test records) over the clean head's accuracy, which "
                 "both losses share")


def test_alm_rows_say_what_they_compare_in_the_grids_order(ledger):
    """One dataset: the unprotected head; ALM at ε = 1 (one draw losing 5 of the clean head's 240
    right records) and ε = 10 (the clean head's decisions); Laplace at ε = 0.5 (no ALM there), 10
    and 1, in that order in utility.csv; the Gaussian at ε = 1. At ε = 10 Laplace is right on 2
    records fewer than ALM (3 lost, 1 gained): too close to call on 300 records."""
    rng = np.random.default_rng(31)
    clean = exact(rng, N_TEST, 240)
    alm1, laplace10 = flip(rng, clean, off=5), flip(rng, clean, off=3, on=1)
    utility = frame(utility_rows("d", "laplace", 0.5, [flip(rng, clean, off=100)], clean),
                    utility_rows("d", "laplace", 10, [laplace10], clean),
                    utility_rows("d", "alm", 10, [clean], clean),
                    utility_rows("d", "laplace", 1, [flip(rng, clean, off=100)], clean),
                    utility_rows("d", "alm", 1, [alm1], clean),
                    utility_rows("d", "gaussian", 1, [flip(rng, clean, off=150)], clean))
    mia = frame(mia_rows("d", "none", np.nan, [exact(rng, N_MIA, 1200)]),
                mia_rows("d", "alm", 1, [exact(rng, N_MIA, 1000)] * 3))
    alm_claims(ledger, utility, mia)
    table = ledger.frame()
    assert list(zip(table.claim, table.setting)) == [
        ("alm_unprotected_vulnerable", "no noise"), ("alm_protects_to_chance", "ε = 1"),
        ("alm_loss_below_laplace", "ε = 1"), ("alm_loss_below_laplace", "ε = 10"), ("alm_loss_below_gaussian", "ε = 1")]
    assert (table.dataset == "d").all()
    texts = table[["quantity", "compared", "design", "test"]].to_dict("records")
    assert texts[0] == {"quantity": "MIA accuracy, adaptive shadow MLP (the paper's attack), members + non-members",
                        "compared": "unprotected head vs random guessing (0.5)", "design": "against a fixed value",
                        "test": "a − 0.5 > 0"}
    assert texts[1] == {"quantity": "MIA accuracy, adaptive shadow MLP, at the most private ε with utility loss < 0.05",
                        "compared": "ALM vs random guessing, 0.5 ± 0.05", "design": "against a fixed value",
                        "test": "|a − 0.5| < 0.05 and utility loss < 0.05"}
    for i, name in ((2, "Laplace"), (3, "Laplace"), (4, "Gaussian (classical)")):
        assert texts[i] == {"quantity": "utility loss, test records × noise draws",
                            "compared": f"ALM vs {name} at equal ε", "design": "paired by record", "test": "a − b < 0"}
        assert table.note.iloc[i].startswith(ALM_LOSS_NOTE)
    assert table.note.iloc[2] == ALM_LOSS_NOTE  # Laplace is ε-DP at every ε; the classical Gaussian only below 1
    assert table.note.iloc[4] == (ALM_LOSS_NOTE + "; the Gaussian (classical) release has no guarantee here: the "
                                  "classical Gaussian calibration is a proof only for ε < 1")
    assert table.note.iloc[0] == ""
    loss, lo, hi, _ = paired_loss([alm1], clean)
    assert loss == pytest.approx(5 / 240) and hi < 0.05
    interval = f"{loss:.3f} [{lo:.3f}, {hi:.3f}]"  # the best noise-free head is the released one here
    assert table.note.iloc[1] == (f"MIA within the margin: reproduced; utility loss against the released non-private "
                                  f"head (chosen for its noise) {interval}, against the tuning grid's best noise-free "
                                  f"head {interval}, both below 0.05: reproduced; the ± 0.05 margin of 'roughly 50 %' "
                                  "is the ledger's")
    row = table.iloc[3]  # Laplace at ε = 10: open, with the records its accuracy gap needs
    per_record = clean.astype(float) - laplace10
    assert row.verdict == "unresolved" and row.difference == pytest.approx(-(2 / N_TEST) / clean.mean())
    assert row.n_for_80pct_power == need(2 / N_TEST, per_record.var(ddof=1))
    assert np.isnan(table.n_for_80pct_power.iloc[2])


def test_branch_rows_keep_their_tables_words(ledger):
    """The contrastive and semi-supervised reports' rows keep their dataset, quantity, comparison,
    design, test and note; a contrastive row without λ is set by its quantity after the first comma."""
    contrastive_claims(ledger, pd.DataFrame([contrastive_row(
        claim="membership", quantity="membership inference accuracy, NN attack, shadow (nn)", verdict="reproduced",
        design="unpaired", test="a − b < 0", difference_hi=0.14)], columns=contrastive_report.CLAIM_COLUMNS))
    base = dict(dataset="cifar", quantity="A_DA AUC", compared="a vs b", value_a=0.7, value_a_lo=0.65,
                value_a_hi=0.75, n_a=500, value_b=0.6, value_b_lo=0.55, value_b_hi=0.65, n_b=500, difference=0.1,
                difference_lo=0.04, difference_hi=0.16, design="paired by record (DeLong)", test="a − b > 0",
                trainings=1,
                claim="dpsgd", target="fixmatch_dpsgd", eps=8.0, verdict="reproduced", n_for_80pct_power=np.nan)
    semileak_claims(ledger, pd.DataFrame([base | dict(note="members only"), base | dict(note=np.nan)],
                                         columns=semileak_report.CLAIM_COLUMNS))
    out = ledger.frame()
    columns = ["dataset", "setting", "quantity", "compared", "design", "test", "note"]
    assert out[columns].iloc[0].to_dict() == {
        "dataset": "utk", "setting": "NN attack, shadow (nn)", "quantity": "membership inference accuracy, NN attack, "
        "shadow (nn)", "compared": "supervised vs contrastive (claimed: a > b)", "design": "unpaired",
        "test": "a − b < 0", "note": ""}
    assert (out.difference.iloc[0], out.difference_lo.iloc[0], out.difference_hi.iloc[0]) == (0.1, 0.07, 0.14)
    for i, note in ((1, "members only"), (2, "")):
        assert out[columns].iloc[i].to_dict() == {
            "dataset": "cifar", "setting": "fixmatch_dpsgd, target ε = 8", "quantity": "A_DA AUC", "compared": "a vs b",
            "design": "paired by record (DeLong)", "test": "a − b > 0", "note": note}
        assert (out.difference.iloc[i], out.difference_lo.iloc[i], out.difference_hi.iloc[i]) == (0.1, 0.04, 0.16)


def test_dpadapter_rows_say_what_they_compare_and_what_an_open_one_needs(ledger):
    """One draw each: SAM right on 30 more records than standard pre-training; DPAdapter on 2 more
    than SAM (3 gained, 1 lost), which 300 records cannot settle."""
    rng = np.random.default_rng(32)
    standard = exact(rng, N_TEST, 180)
    sam = flip(rng, standard, on=30)
    dpadapter = flip(rng, sam, off=1, on=3)
    dpadapter_claims(ledger, frame(dpadapter_rows("cifar", "standard", 0.0, [standard]),
                                   dpadapter_rows("cifar", "dpadapter", 0.05, [dpadapter]),
                                   dpadapter_rows("cifar", "sam", 0.05, [sam])))
    table = ledger.frame()
    assert list(table.claim) == ["dpadapter_above_sam", "sam_above_standard"]
    assert list(table.compared) == ["DPAdapter vs vanilla SAM pre-training", "vanilla SAM vs standard pre-training"]
    assert (table.setting == "ε = 1, ρ = 0.05").all() and (table.dataset == "cifar").all()
    assert (table.quantity == "DP-SGD downstream test accuracy").all() and (table.design == "paired by record").all()
    assert (table.test == "a − b > 0").all()
    assert (table.note == "1 DP-SGD fine-tuning of 1 pre-training per arm").all()
    assert list(table.verdict) == ["unresolved", "reproduced"]
    per_record = dpadapter.astype(float) - sam
    assert table.difference.iloc[0] == pytest.approx(2 / N_TEST)
    assert table.n_for_80pct_power.iloc[0] == need(2 / N_TEST, per_record.var(ddof=1))
    assert np.isnan(table.n_for_80pct_power.iloc[1])


def test_dpcl_rows_come_in_dataset_and_eps_order_and_skip_a_one_sided_eps(ledger):
    """utility.csv lists b at ε = 10, b at ε = 1, then a at ε = 5 with DPCL only: the ledger has b
    at ε = 1 then ε = 10, and nothing for a (no naive release to compare with)."""
    rng = np.random.default_rng(33)
    base = exact(rng, N_TEST, 240)
    high, low = draws_of(rng, base, 2), draws_of(rng, flip(rng, base, off=90), 2)
    dpcl_claims(ledger, frame(utility_rows("b", "dpcl", 10, high), utility_rows("b", "dpcl_naive", 10, low),
                              utility_rows("b", "dpcl", 1, low), utility_rows("b", "dpcl_naive", 1, high),
                              utility_rows("a", "dpcl", 5, high)))
    table = ledger.frame()
    assert list(zip(table.dataset, table.setting, table.verdict)) == [("b", "ε = 1", "contradicted"),
                                                                      ("b", "ε = 10", "reproduced")]
    assert (table.quantity == "test accuracy (test records × repeats)").all()
    assert (table.compared == "DPCL vs naive contrastive DP-SGD at equal target ε").all()
    assert (table.design == "paired by record").all() and (table.test == "a − b > 0").all()
    assert (table.note == "DPCL's ε rests on the paper's heuristic gradient sensitivity (heuristic_dp), the naive "
                          "variant's on a proven one (approx_dp): equal ε is not an equal guarantee").all()


def accounting_setting(variant, shared) -> dict:
    return {"objective": "simclr", "variant": variant, "steps": 10, "paper_noise_multipliers": "0.4, 0.6",
            "eps": 1000.0, "delta": 1e-5, "eps_rdp_without_replacement": shared,
            "eps_rdp_without_replacement_separate": 1000.5, "eps_pld_poisson": 20.0}


def test_dpcl_accounting_rows_in_full(ledger, catalogue):
    """ε = 1010 is exactly 1 % off the paper's 1000: reproduced; 1.1e5 is not, and stays open."""
    dpcl_accounting_claims(ledger, [accounting_setting("naive", 1010.0), accounting_setting("dpcl", 1.1e5)])
    table = ledger.frame()
    assert list(table.verdict) == ["reproduced", "unresolved"]
    assert list(table.setting) == ["simclr, naive: 10 steps, σ = 0.4, 0.6", "simclr, dpcl: 10 steps, σ = 0.4, 0.6"]
    assert (table.dataset == "cifar10 (the paper's settings)").all()
    assert (table.quantity == "ε at δ = 1e-05, RDP accountant, batches without replacement").all()
    assert (table.compared == "our accountant vs the paper's ε").all() and (table.test == "|ε − 1000| ≤ 0.01 ε").all()
    assert list(table.note) == ["", "the mechanisms share each step's batch; sampled separately (the paper's "
                                "accounting) they give ε = 1000; sharing, the RDP bound is 1.1e+05, an upper bound "
                                "that is loose there, and the PLD accountant on the Poisson analogue gives 20: the "
                                "claim needs an accountant for mechanisms sharing a batch, not more data"]
    # a computed value and the stated one: intervals of width 0, no records, no draws, no difference
    assert list(table.value_lo) == [1010.0, 1.1e5] and list(table.value_hi) == [1010.0, 1.1e5]
    assert (table[["reference", "reference_lo", "reference_hi"]] == 1000.0).all().all()
    for column in ("n", "draws", "n_reference", "difference", "difference_lo", "difference_hi", "n_for_80pct_power"):
        assert np.isnan(table[column].to_numpy()).all(), column
    alone = Ledger(catalogue)  # an open computation alone: still no records to ask for
    dpcl_accounting_claims(alone, [accounting_setting("dpcl", 1.1e5)])
    assert math.isnan(alone.frame().n_for_80pct_power.iloc[0])


MARKDOWN_RULES = (
    "Intervals are 95 % with the record as the independent unit: (records × draws) counts the records and the noise "
    "draws or trainings each was decided under, which are repeated measurements, not new records. Two releases "
    "decided on the same records are compared by their difference paired on the records. A claim is tested as "
    "worded: 'a > b' is reproduced when the difference's interval lies above 0 and contradicted when below; "
    "'roughly', 'barely' and 'no cost' by the margin named in the test column (the ledger's; the papers give none). "
    "A claim about leaks is judged only in its regime (the table above): on a model whose leak is not above chance "
    "a reproduction is unresolved (regime not reached). Otherwise unresolved, with the records at which a "
    "replication would settle the claim (of several parts: its least settled part) with 80 % power if the measured "
    "difference held ('more draws, not records' "
    "where the noise draws' spread alone prevents it; not settled by data where no n can). Where the paper states "
    "the size of the difference (its smallest), 'size vs the paper's' says whether our interval lies below it, "
    "above it, or covers it. A value without an interval is a bound or a computation.")


def test_markdown_writes_every_row_in_full(ledger, catalogue):
    """Three rows added by hand, in an order that is not the claims' alphabetical one: a paired
    difference measured once (no '× draws'), a value against a margin (0.5 ± 0.05) with a note
    holding a '|', and a computation (no interval, no difference)."""
    ledger.add("d", "dpcl_above_naive", "ε = 10", "test accuracy", "DPCL vs naive", side(0.8, 0.75, 0.85, 300),
               side(0.7, 0.65, 0.75, 300, 3), Estimate(0.1, 0.05, 0.15, 300, 1, 0.0006, 0.0, 299.0),
               "paired by record", "a − b > 0", "reproduced")
    ledger.add("d", "alm_protects_to_chance", "ε = 1", "MIA accuracy", "ALM vs chance", side(0.52, 0.5, 0.54, 2000, 3),
               side(0.5, 0.45, 0.55, np.nan, np.nan), Estimate(0.02, 0.0, 0.04, 2000, 3, 0.0001, 0.0, 1999.0),
               "against a fixed value", "|a − 0.5| < 0.05", "unresolved", 1234.0, "n | b")
    ledger.add("cifar10", "dpcl_paper_sigmas_eps_1000", "simclr", "ε at δ = 1e-05", "accountant vs paper",
               bound(1010.0), bound(1000.0), Estimate(np.nan, np.nan, np.nan, 0, 0, 0.0, 0.0, np.nan), "computation",
               "|ε − 1000| ≤ 0.01 ε", "reproduced")
    table = ledger.frame()
    assert list(table.paper_value) == list(catalogue.set_index("claim").paper_value[
        ["dpcl_above_naive", "alm_protects_to_chance", "dpcl_paper_sigmas_eps_1000"]])
    entry = catalogue.set_index("claim")
    claims = [f"- **{c}** ({entry.seed[c]}, {entry.source[c]}): {entry.statement[c]}"
              for c in ("dpcl_above_naive", "alm_protects_to_chance", "dpcl_paper_sigmas_eps_1000")]
    assert markdown(table) == "\n".join([
        "| seed | reproduced | contradicted | unresolved: regime not reached | unresolved: fewer than 3 trainings "
        "per arm | unresolved: more data needed | unresolved: not settled by data | not tested |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        "| 000 Yang, Gohari & Topcu: Additive Logistic Mechanism | 0 | 0 | 0 | 0 | 1 | 0 | 0 |",
        "| 004 DPCL | 2 | 0 | 0 | 0 | 0 | 0 | 0 |",
        "",
        "| dataset | claim | setting | paper | ours [95 % CI] (records × draws) | reference [95 % CI] "
        "| difference [95 % CI] | test | verdict | records for 80 % power | size vs the paper's | note |",
        "|---|---|---|---|---:|---:|---:|---|---|---:|---|---|",
        "| d | dpcl_above_naive | ε = 10 | curves in Figs. 2 and 5, no numbers in the text | 0.800 [0.750, 0.850] (300) "
        "| 0.700 [0.650, 0.750] (300) | +0.100 [+0.050, +0.150] (paired by record) | a − b > 0 | **reproduced** |  "
        "|  | test accuracy; DPCL vs naive |",
        "| d | alm_protects_to_chance | ε = 1 | MIA accuracy ≈ 0.50 at utility loss < 0.05 (no ε named) "
        "| 0.520 [0.500, 0.540] (2000 × 3) | 0.5 ± 0.05 (margin) | +0.020 [+0.000, +0.040] (against a fixed value) "
        "| \\|a − 0.5\\| < 0.05 | **unresolved** (more data needed) | 1234 |  | MIA accuracy; ALM vs chance; n \\| b |",
        "| cifar10 | dpcl_paper_sigmas_eps_1000 | simclr | ε = 1000 at δ = 1e-5 | 1010 | 1000 |  "
        "| \\|ε − 1000\\| ≤ 0.01 ε | **reproduced** |  |  | ε at δ = 1e-05; accountant vs paper |",
        "",
        "The claims:",
        "",
        *claims,
        "",
        MARKDOWN_RULES]) + "\n"


def test_not_tested_rows_in_the_table_and_in_markdown(ledger, catalogue):
    """A ledger nothing was measured for: its frame still has the ledger's columns, and every claim
    gets a not-tested row with the catalogue's words and empty texts where nothing was compared."""
    assert list(ledger.frame().columns) == LEDGER_COLUMNS and ledger.frame().empty
    ledger.add_not_tested()
    table = ledger.frame()
    assert list(table.claim) == list(LEDGER_CLAIMS) and (table.verdict == "not tested").all()
    entry = catalogue.set_index("claim").loc[list(LEDGER_CLAIMS)]
    for column in ("seed", "source", "statement", "paper_value"):
        assert list(table[column]) == list(entry[column]), column
    for column in ("dataset", "setting", "quantity", "compared", "design", "test"):
        assert (table[column] == "").all(), column
    text = markdown(table)
    assert ("\n| | alm_loss_below_gaussian | | 'significantly higher' for Gaussian (Fig. 1), no numbers in the text "
            "| | | | | **not tested** | | | this run measured nothing the claim compares; it needs an image dataset "
            "with `alm` and `gaussian` in protect.mechanisms at a common ε |\n") in text
    assert f"\n- **semileak_views** ({entry.seed['semileak_views']}, Sec. 3.4.5, Fig. 3.5): More augmented views make " \
           "A_DA stronger.\n" in text


# --------------------------------------------------------------------------------- the regime and the paper's size

@pytest.mark.parametrize("unprotected_rights, reached", [(1300, True), (1010, False)])  # 0.65; 0.505 of 2000
def test_protection_to_chance_is_reproduced_only_where_the_unprotected_head_leaks(ledger, unprotected_rights,
                                                                                    reached):
    """ALM at ε = 10 loses nothing and its attack is exactly at chance, which reproduces the claim by
    its own comparison; whether the ledger says so rests on the unprotected head's leak, the exact
    Clopper–Pearson interval of one draw of 2000 decisions."""
    rng = np.random.default_rng(31)
    clean = exact(rng, N_TEST, 240)
    utility, mia = protection(rng, clean, {10: [clean]}, {10: 1000})
    mia = pd.concat([mia, frame(mia_rows("d", "none", np.nan, [exact(rng, N_MIA, unprotected_rights)]))])
    alm_claims(ledger, utility, mia)
    table = ledger.frame()
    lo, hi = cp(unprotected_rights, N_MIA)
    assert (lo > 0.5) == reached
    assert one(table, "alm_unprotected_vulnerable").regime == ""  # the leak itself: not its own premise
    for claim in ("alm_protects_to_chance",):
        row = one(table, claim)
        assert row.regime == ("reached" if reached else "not reached") and row.regime_family == "alm"
        assert row.regime_value == unprotected_rights / N_MIA and row.regime_n == N_MIA
        assert (row.regime_lo, row.regime_hi) == (pytest.approx(lo), pytest.approx(hi))
        assert row.regime_chance == 0.5 and row.regime_paper == 0.61
    protect = one(table, "alm_protects_to_chance")
    if reached:
        assert protect.verdict == "reproduced" and protect.unresolved_because == ""
    else:
        assert protect.verdict == "unresolved" and protect.unresolved_because == "regime not reached"
        assert protect.note.startswith("the comparison alone reads reproduced, but its premise fails: the head "
                                       "released without noise")
        assert np.isnan(protect.n_for_80pct_power)
        vulnerable = one(table, "alm_unprotected_vulnerable")
        assert vulnerable.verdict == "unresolved" and vulnerable.unresolved_because == "more data needed"


def test_a_contradiction_stands_outside_the_regime(ledger):
    """The release's attack at 0.62 lies above 0.55 beyond its interval: a leak of its own, which
    contradicts "protected to chance" whatever the unprotected head does."""
    rng = np.random.default_rng(32)
    clean = exact(rng, N_TEST, 240)
    utility, mia = protection(rng, clean, {10: [clean]}, {10: 1240})
    mia = pd.concat([mia, frame(mia_rows("d", "none", np.nan, [exact(rng, N_MIA, 1000)]))])
    alm_claims(ledger, utility, mia)
    row = one(ledger.frame(), "alm_protects_to_chance")
    assert row.regime == "not reached" and row.verdict == "contradicted" and row.unresolved_because == ""


def test_contrastive_claims_rest_on_the_leak_of_their_side_a(ledger):
    """Talos's membership cost rests on the contrastive model's MIA against 0.5, the attribute claims
    on the contrastive model's attribute inference against the majority share of the same records."""
    at_chance = dict(value_a=0.505, value_a_lo=0.483, value_a_hi=0.527)
    table = pd.DataFrame([
        contrastive_row(claim="talos", quantity="membership inference accuracy, NN attack (nn)", **{"lambda": 1.0},
                        verdict="reproduced", **at_chance),
        contrastive_row(claim="talos", quantity="membership inference accuracy, NN attack (nn)", **{"lambda": 3.0},
                        verdict="reproduced"),  # side a 0.7 [0.68, 0.72]
        contrastive_row(claim="attribute", quantity="attribute inference accuracy (mlp)", verdict="reproduced",
                        value_a=0.31, value_a_lo=0.29, value_a_hi=0.33, baseline_a=0.3),  # not above the majority
        contrastive_row(claim="talos", quantity="attribute inference accuracy (mlp)", **{"lambda": 1.0},
                        verdict="reproduced", value_a=0.31, value_a_lo=0.29, value_a_hi=0.33, baseline_a=0.2),
        contrastive_row(claim="talos", quantity="task accuracy", **{"lambda": 1.0}, verdict="reproduced",
                        **at_chance),  # an accuracy claim rests on no leak
        contrastive_row(claim="membership", quantity="membership inference accuracy, NN attack (nn)",
                        verdict="unresolved", n_for_80pct_power=900.0, **at_chance)],
        columns=contrastive_report.CLAIM_COLUMNS)
    contrastive_claims(ledger, table)
    out = ledger.frame()
    assert list(out.verdict) == ["unresolved", "reproduced", "unresolved", "reproduced", "reproduced", "unresolved"]
    assert list(out.unresolved_because) == ["regime not reached", "", "regime not reached", "", "",
                                            "regime not reached"]
    assert list(out.regime) == ["not reached", "reached", "not reached", "reached", "", "not reached"]
    assert list(out.regime_family) == ["contrastive_membership", "contrastive_membership", "contrastive_attribute",
                                       "contrastive_attribute", "", "supervised_membership"]
    assert list(out.regime_chance.iloc[:4]) == [0.5, 0.5, 0.3, 0.2] and np.isnan(out.regime_chance.iloc[4])
    assert out.regime_target.iloc[5] == "the supervised model's membership inference accuracy, NN attack (nn)"
    assert out.n_for_80pct_power.iloc[5] == 900.0  # what the comparison would need, once the target leaks


def test_a_contrastive_row_whose_side_a_is_not_the_claims_model_is_refused(ledger):
    table = pd.DataFrame([contrastive_row(claim="membership", quantity="membership inference accuracy, NN attack (nn)",
                                          verdict="reproduced", compared="contrastive vs supervised")],
                         columns=contrastive_report.CLAIM_COLUMNS)
    with pytest.raises(ValueError, match="side a must be the supervised model"):
        contrastive_claims(ledger, table)
    assert ledger.rows == []


def test_semileak_claims_rest_on_their_targets_a_da_auc(ledger):
    """FixMatch's A_DA AUC 0.51 [0.48, 0.54] does not leak, FlexMatch's 0.60 [0.55, 0.65] does; the
    DP-SGD defence rests on FixMatch's; a target without its A_DA row rests on nothing."""
    base = dict(dataset="cifar", quantity="A_DA AUC", compared="a vs b", n_a=500, value_b=0.5, value_b_lo=0.45,
                value_b_hi=0.55, n_b=500, difference=0.01, difference_lo=-0.02, difference_hi=0.02,
                design="paired by record (DeLong)", test="a − b > 0", note=np.nan, eps=np.nan,
                n_for_80pct_power=np.nan, trainings=1)
    fix = dict(value_a=0.51, value_a_lo=0.48, value_a_hi=0.54)
    flex = dict(value_a=0.60, value_a_lo=0.55, value_a_hi=0.65)
    table = pd.DataFrame([
        base | fix | dict(claim="ada_above_baselines", target="fixmatch", verdict="unresolved",
                          n_for_80pct_power=4000.0),
        base | flex | dict(claim="ada_above_baselines", target="flexmatch", verdict="unresolved",
                           n_for_80pct_power=2400.0),
        base | fix | dict(claim="top1", target="fixmatch", verdict="reproduced"),
        base | flex | dict(claim="top1", target="flexmatch", verdict="reproduced"),
        base | dict(value_a=0.2, value_a_lo=0.1, value_a_hi=0.3, claim="js_rises_with_auc", target="flexmatch",
                    verdict="reproduced"),  # side a a JS distance: the leak is still FlexMatch's AUC
        base | fix | dict(claim="dpsgd", target="fixmatch_dpsgd", eps=8.0, verdict="reproduced"),
        base | flex | dict(claim="top1", target="uda", verdict="reproduced")],
        columns=semileak_report.CLAIM_COLUMNS)
    semileak_claims(ledger, table)
    out = ledger.frame()
    assert list(out.verdict) == ["unresolved", "unresolved", "unresolved", "reproduced", "reproduced", "unresolved",
                                 "reproduced"]
    assert list(out.unresolved_because) == ["regime not reached", "more data needed", "regime not reached", "", "",
                                            "regime not reached", ""]
    assert list(out.regime) == ["not reached", "reached", "not reached", "reached", "reached", "not reached", ""]
    assert list(out.regime_value.iloc[:6]) == [0.51, 0.60, 0.51, 0.60, 0.60, 0.51]
    assert out.regime_target.iloc[5] == "fixmatch's A_DA AUC (all members, last step)"
    assert (out.regime_paper.iloc[:6] == 0.78).all()


def test_the_size_of_a_difference_against_the_papers(ledger, catalogue):
    """DPAdapter over SAM: the paper's smallest gap is 0.0084; an interval below it, around it and
    above it; a claim whose paper states no size gets none."""
    paper = catalogue.set_index("claim").paper_difference["dpadapter_above_sam"]
    assert paper == 0.0084
    for lo, hi in ((-0.003, 0.006), (0.002, 0.02), (0.01, 0.03)):
        ledger.add("d", "dpadapter_above_sam", "ε = 1", "q", "c", side(0.8, 0.75, 0.85, 300),
                   side(0.79, 0.74, 0.84, 300), Estimate((lo + hi) / 2, lo, hi, 300, 1, 1e-5, 0.0, 299.0),
                   "paired by record", "a − b > 0", "unresolved" if lo < 0 else "reproduced", 5000.0)
    ledger.add("d", "dpcl_above_naive", "ε = 1", "q", "c", side(0.8, 0.75, 0.85, 300), side(0.7, 0.65, 0.75, 300),
               Estimate(0.1, 0.05, 0.15, 300, 1, 1e-4, 0.0, 299.0), "paired by record", "a − b > 0", "reproduced")
    out = ledger.frame()
    assert list(out.magnitude) == ["smaller than the paper's", "covers the paper's", "larger than the paper's", ""]
    assert list(out.paper_difference.iloc[:3]) == [paper] * 3 and np.isnan(out.paper_difference.iloc[3])
    assert list(out.unresolved_because) == ["more data needed", "", "", ""]  # an accuracy claim rests on no leak
    text = markdown(out)
    assert "| smaller than the paper's (+0.0084) |" in text and "**unresolved** (more data needed)" in text


def test_an_open_row_no_data_can_settle_says_so(ledger):
    ledger.add("d", "dpcl_above_naive", "ε = 1", "q", "c", side(0.8, 0.75, 0.85, 300), side(0.8, 0.75, 0.85, 300),
               Estimate(0.0, -0.01, 0.01, 300, 1, 1e-5, 0.0, 299.0), "paired by record", "a − b > 0", "unresolved",
               np.nan)
    assert ledger.frame().unresolved_because.iloc[0] == "not settled by data"


def test_markdown_shows_each_leak_beside_the_papers_with_the_verdicts_resting_on_it(ledger):
    at_chance = dict(value_a=0.505, value_a_lo=0.483, value_a_hi=0.527, n_a=2000)
    contrastive_claims(ledger, pd.DataFrame([
        contrastive_row(claim="talos", quantity="membership inference accuracy, NN attack (nn)", **{"lambda": lam},
                        verdict=verdict, n_for_80pct_power=need, **at_chance)
        for lam, verdict, need in ((1.0, "reproduced", np.nan), (3.0, "unresolved", 800.0))],
        columns=contrastive_report.CLAIM_COLUMNS))
    text = markdown(ledger.frame())
    assert ("| utk | the contrastive (λ = 0) model's membership inference accuracy, NN attack (nn) "
            "| 0.505 [0.483, 0.527] (2000) | 0.500 | NN MIA accuracy 0.625 (MobileNetV2, CIFAR-100) and 0.620 "
            "(ResNet-50, STL-10) on the contrastive model (thesis Sec. 4.2.4, Fig. 4.2; Sec. 4.1) | **not reached** "
            "| talos_no_membership_cost: 2 unresolved (regime not reached) |") in text
    assert "| 003 He thesis, Ch. 4 (contrastive privacy) | 0 | 0 | 2 | 0 | 0 | 0 | 0 |" in text


def lira_row(method, eps, attack, accuracy, lo, hi, records=600):
    return {"dataset": "d", "method": method, "eps": eps, "attack": attack, "adaptive": True, "accuracy": accuracy,
            "accuracy_lo": lo, "accuracy_hi": hi, "records": records, "draws": 16}


def test_the_alm_claims_are_judged_again_by_the_strongest_attack_which_sets_the_regime(ledger):
    """The paper's attack is blind on the unprotected head (0.505 of 2000), LiRA is not (0.56 [0.54, 0.58]):
    the regime of ALM's protection is LiRA's, so a protection the paper's attack calls chance is now judged
    in its regime; RMIA, weaker on this head, is not the strongest; each attack has its own rows."""
    rng = np.random.default_rng(33)
    clean = exact(rng, N_TEST, 240)
    utility, mia = protection(rng, clean, {10: [clean]}, {10: 1000})
    mia = pd.concat([mia, frame(mia_rows("d", "none", np.nan, [exact(rng, N_MIA, 1010)]))])
    lira = pd.DataFrame([lira_row("none", np.nan, "lira_online", 0.56, 0.54, 0.58),
                         lira_row("none", np.nan, "rmia_online", 0.57, 0.53, 0.61),  # higher, but its lower end is not
                         lira_row("none", np.nan, "loss", 0.60, 0.59, 0.61),  # not a reference-model attack
                         lira_row("none", np.nan, "lira_offline", 0.70, np.nan, np.nan),  # no interval: no candidate
                         {**lira_row("none", np.nan, "rmia_offline", 0.70, 0.68, 0.72), "adaptive": False},
                         lira_row("alm", 10.0, "lira_online", 0.51, 0.49, 0.53),
                         lira_row("alm", 10.0, "rmia_online", 0.50, 0.47, 0.53)])
    alm_claims(ledger, utility, mia, lira)
    table = ledger.frame()
    vulnerable = table[table.claim == "alm_unprotected_vulnerable"].set_index("setting")
    assert list(vulnerable.index) == ["no noise", "no noise, strongest attack (lira_online)"]
    assert vulnerable.loc["no noise", "verdict"] == "unresolved"
    strongest = vulnerable.loc["no noise, strongest attack (lira_online)"]
    assert strongest.verdict == "reproduced" and (strongest.value, strongest.n) == (0.56, 600)
    # chosen as the best of the two reference-model attacks with an interval: Bonferroni's 1 − 0.05/2
    widen = stats.norm.ppf(1 - 0.025 / 2) / stats.norm.ppf(0.975)
    assert strongest.value_lo == pytest.approx(0.56 - 0.02 * widen) and "of 2 reference-model attacks" in \
        strongest.quantity
    protect = table[table.claim == "alm_protects_to_chance"].set_index("setting")
    assert list(protect.index) == ["ε = 10", "ε = 10, strongest attack (lira_online)"]
    assert (protect.regime == "reached").all() and (protect.regime_value == 0.56).all()
    by_lira = protect.loc["ε = 10, strongest attack (lira_online)"]
    assert by_lira.value == 0.51 and (by_lira.value_lo, by_lira.value_hi) == (0.49, 0.53)
    assert by_lira.verdict == "reproduced"  # [0.49, 0.53] inside 0.5 ± 0.05, loss 0
    assert protect.loc["ε = 10", "verdict"] == "reproduced"  # the paper's attack, now in the regime LiRA shows


def test_outside_its_regime_a_row_has_no_size_against_the_papers(ledger):
    """A difference measured on a model that does not leak says nothing of the paper's size (0.11 for
    the unprotected head's leak): the column is empty there, and filled where the regime is reached
    or the row rests on none."""
    from privssl.reports.regime import Leak

    for value in (0.51, 0.60):
        leak = Leak("alm", "the unprotected head", value, value - 0.02, value + 0.02, 2000, 0.5)
        ledger.add("d", "alm_unprotected_vulnerable", f"leak {value}", "q", "c", side(0.52, 0.50, 0.54, 2000),
                   side(0.5, 0.5, 0.5, 0), Estimate(0.02, 0.0, 0.04, 2000, 1, 1e-4, 0.0, 1999.0),
                   "against a fixed value", "a − 0.5 > 0", "unresolved", leak=leak)
    ledger.add("d", "alm_unprotected_vulnerable", "no noise", "q", "c", side(0.52, 0.50, 0.54, 2000),
               side(0.5, 0.5, 0.5, 0), Estimate(0.02, 0.0, 0.04, 2000, 1, 1e-4, 0.0, 1999.0),
               "against a fixed value", "a − 0.5 > 0", "unresolved")
    out = ledger.frame()
    assert list(out.regime) == ["not reached", "reached", ""]
    assert list(out.magnitude) == ["", "smaller than the paper's", "smaller than the paper's"]


# --------------------------------------------------------------------------------- trainings behind a verdict

def _procedure_row(table_ledger, claim, draws_a, draws_b, lo=0.05, hi=0.15, verdict="reproduced", need=np.nan):
    table_ledger.add("d", claim, f"{draws_a} × {draws_b}", "q", "c", side(0.8, 0.75, 0.85, 300, draws_a),
                     side(0.7, 0.65, 0.75, 300, draws_b), Estimate((lo + hi) / 2, lo, hi, 300, 3, 1e-4, 1e-4, 10.0),
                     "paired by record", "a − b > 0", verdict, need)


def test_a_training_procedure_verdict_on_fewer_than_three_trainings_per_arm_is_unresolved(catalogue):
    """DPCL over naive at 1 and 2 trainings per arm, however clear its records' interval, stays open
    (the training's luck is not in it) with no records to ask for; at 3 per arm its verdict stands;
    an arm of 3 against one of 1 counts as 1. A release comparison (ALM vs Laplace: one trained
    head, noise draws) keeps its verdict on one draw."""
    table = Ledger(catalogue)
    for draws_a, draws_b in ((1, 1), (2, 2), (3, 3), (3, 1)):
        _procedure_row(table, "dpcl_above_naive", draws_a, draws_b)
    _procedure_row(table, "dpcl_above_naive", 1, 1, lo=-0.15, hi=-0.05, verdict="contradicted")
    _procedure_row(table, "dpcl_above_naive", 1, 1, lo=-0.01, hi=0.15, verdict="unresolved", need=900.0)
    _procedure_row(table, "alm_loss_below_laplace", 1, 1)
    out = table.frame()
    assert list(out.verdict) == ["unresolved", "unresolved", "reproduced", "unresolved", "unresolved", "unresolved",
                                 "reproduced"]
    few = out.iloc[[0, 1, 3, 4, 5]]
    assert (few.unresolved_because == "fewer than 3 trainings per arm").all() and few.n_for_80pct_power.isna().all()
    assert out.note.iloc[0] == ("1 training per arm (the records alone read reproduced): a verdict about a training "
                                "procedure needs 3 independent trainings per arm, the training a random effect of "
                                "its interval")
    assert out.note.iloc[1].startswith("2 trainings per arm (the records alone read reproduced)")
    assert out.note.iloc[4].startswith("1 training per arm (the records alone read contradicted)")
    assert out.note.iloc[5].startswith("1 training per arm: ")  # open already: nothing withdrawn
    assert out.note.iloc[2] == "" and out.note.iloc[6] == ""


def test_a_claim_against_a_fixed_value_counts_the_trainings_of_its_one_arm(catalogue):
    """A Semi-Leak claim against chance has one arm: a bound has no draws, the arm's count decides."""
    table = Ledger(catalogue)
    for draws in (1, 3):
        table.add("d", "semileak_ada_above_baselines", f"{draws}", "q", "c", side(0.7, 0.65, 0.75, 300, draws),
                  side(0.5, 0.5, 0.5, np.nan, np.nan), Estimate(0.2, 0.15, 0.25, 300, draws, 1e-4, 0.0, 299.0),
                  "against a fixed value", "a − 0.5 > 0", "reproduced")
    assert list(table.frame().verdict) == ["unresolved", "reproduced"]


def test_a_measured_arm_that_lost_its_count_of_trainings_is_refused_not_counted_as_enough(catalogue):
    """A measured side (it has an n) whose draws are missing is not a fixed reference: the row is
    refused, on either side, rather than read as ∞ trainings and judged."""
    for draws_a, draws_b in ((np.nan, 3), (3, np.nan), (np.nan, np.nan)):
        with pytest.raises(ValueError, match="trainings per arm are missing"):
            _procedure_row(Ledger(catalogue), "dpcl_above_naive", draws_a, draws_b)
    with pytest.raises(ValueError, match="trainings per arm are missing"):
        Ledger(catalogue).add("d", "semileak_ada_above_baselines", "x", "q", "c", side(0.7, 0.65, 0.75, 300, np.nan),
                              side(0.5, 0.5, 0.5, np.nan, np.nan), Estimate(0.2, 0.15, 0.25, 300, 3, 1e-4, 0.0, 299.0),
                              "against a fixed value", "a − 0.5 > 0", "reproduced")


def test_a_semileak_row_is_judged_only_with_three_trainings_behind_it(catalogue):
    """The report's `trainings` (its fewer-trained arm's independent trainings) decides, not the
    report's own verdict: 2 leave a reproduced row unresolved, 3 keep it; a row without its count
    is refused."""
    base = dict(dataset="cifar", quantity="A_DA AUC", compared="a vs b", value_a=0.7, value_a_lo=0.65,
                value_a_hi=0.75, n_a=500, value_b=0.6, value_b_lo=0.55, value_b_hi=0.65, n_b=500, difference=0.1,
                difference_lo=0.04, difference_hi=0.16, design="paired by record (DeLong)", test="a − b > 0",
                note=np.nan, claim="views", target="fixmatch", eps=np.nan, verdict="reproduced",
                n_for_80pct_power=np.nan)
    ledger = Ledger(catalogue)
    semileak_claims(ledger, pd.DataFrame([base | dict(trainings=2), base | dict(trainings=3)],
                                         columns=semileak_report.CLAIM_COLUMNS))
    out = ledger.frame()
    assert list(out.verdict) == ["unresolved", "reproduced"]
    assert out.note.iloc[0].startswith("2 trainings per arm (the records alone read reproduced)")
    assert list(out.draws) == [2, 3]
    with pytest.raises(ValueError, match="trainings per arm are missing"):
        semileak_claims(Ledger(catalogue), pd.DataFrame([base | dict(trainings=np.nan)],
                                                        columns=semileak_report.CLAIM_COLUMNS))
