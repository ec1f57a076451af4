"""The contrastive branch's claims table and figures (thesis Ch. 4) from synthetic metrics.csv
frames whose decision cells are packed from known 0/1 arrays: pooling over repeats is the mean
decision with the record as the unit, each comparison is the paired difference the claim is about
(recomputed here from the arrays), each verdict follows in clear cases both ways, the Markdown has
every row, both figures render, the script runs end to end, and bad input is refused by name."""

import os
import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402
from scored_files import load_written, write_contrastive  # noqa: E402
from warm_scripts import script_python

import privssl  # noqa: E402
from privssl.artefacts.claims import THESIS_CLAIMS  # noqa: E402
from privssl.artefacts.contrastive import CONTRASTIVE  # noqa: E402
from privssl.artefacts.tables import load_csv_file, load_csv_files  # noqa: E402
from privssl.attacks.contrastive_spec import ATTRIBUTE_ATTACK, MEMBERSHIP_ATTACKS, NN_ATTACK  # noqa: E402
from privssl.io import pack_decisions  # noqa: E402
from privssl.reports.contrastive_plots import privacy_figure, talos_lambda_figure  # noqa: E402
from privssl.reports.contrastive_report import CLAIM_COLUMNS, claims_table, markdown, pool  # noqa: E402
from privssl.reports.verdicts import CONTRADICTED, NO_COST_MARGIN, REPRODUCED, UNRESOLVED  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
THESIS_CSV = ROOT / "resources" / "thesis_contrastive.csv"
N_MEMBERS, N_ATTRIBUTE, N_TEST = 200, 300, 400  # membership records: the members, then as many non-members
N_MIA = 2 * N_MEMBERS
OTHER_ATTACKS = [a for a in MEMBERSHIP_ATTACKS if a != NN_ATTACK]


def cp(k: int, n: int) -> tuple[float, float]:
    """Clopper–Pearson 95 % by the beta quantiles (independent of privssl)."""
    lo = 0.0 if k == 0 else stats.beta.ppf(0.025, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(0.975, k + 1, n - k)
    return float(lo), float(hi)


def bits(p: float, n: int, seed: int) -> np.ndarray:
    """n decisions with exactly round(p n) right, at positions drawn from `seed`."""
    out = np.zeros(n, bool)
    out[np.random.default_rng(seed).choice(n, round(p * n), replace=False)] = True
    return out


def flipped(base: np.ndarray, count: int, to: bool, seed: int) -> np.ndarray:
    """`base` with `count` of its decisions that are not `to` turned into `to` (a near copy)."""
    out = base.copy()
    out[np.random.default_rng(seed).choice(np.flatnonzero(base != to), count, replace=False)] = to
    return out


class Model:
    """One trained model (one repeat) as known arrays: its task decisions on the N_TEST held-out
    images, each membership attack's decisions on the N_MIA records, and (where measured) the
    attribute attack's and the majority baseline's decisions on the N_ATTRIBUTE members."""

    def __init__(self, task, membership: dict, attribute=None, baseline=None, auc: float = 0.6):
        self.task, self.membership, self.attribute, self.baseline, self.auc = task, membership, attribute, baseline, auc


_seed = iter(range(10_000, 1_000_000))


def fresh(accuracies: dict, task: float, attribute: float | None, baseline: np.ndarray | None) -> Model:
    return Model(bits(task, N_TEST, next(_seed)), {a: bits(p, N_MIA, next(_seed)) for a, p in accuracies.items()},
                 None if attribute is None else bits(attribute, N_ATTRIBUTE, next(_seed)), baseline)


def membership_accuracies(nn: float, strongest: tuple[str, float] | None = None, others: float = 0.5) -> dict:
    """NN at `nn`, one named attack at its value, every other attack at `others` minus a little."""
    values = {NN_ATTACK: nn} | {a: others - 0.01 * i for i, a in enumerate(OTHER_ATTACKS)}
    return values | (dict([strongest]) if strongest else {})


def scenario() -> dict:
    """{(dataset, target, λ): [Model per repeat]} on the same records within a dataset.

    utkface: the thesis's claims hold (supervised leaks membership more, contrastive the attribute;
    Talos λ = 1 lowers it at a tiny cost, Talos λ = 3 raises it at a large cost);
    celeba: every directional claim is contradicted, every no-cost one reproduced by a gain;
    cifar10: one repeat, no attribute, membership nearly equal (unresolved)."""
    models = {}
    baseline = bits(0.40, N_ATTRIBUTE, 1)  # the majority guess: one array for every model of a dataset
    models["utkface", "supervised", np.nan] = [
        fresh(membership_accuracies(0.80, ("confidence", 0.86), 0.72), 0.75, 0.42, baseline) for _ in range(2)]
    contrastive = [fresh(membership_accuracies(0.55, ("entropy", 0.60), 0.53), 0.85, 0.70, baseline)
                   for _ in range(2)]
    models["utkface", "contrastive", 0.0] = contrastive
    # λ = 1: 2 of 400 test images lost, 2 of 400 membership records won: a cost of 0.005
    models["utkface", "talos", 1.0] = [
        Model(flipped(c.task, 2, False, next(_seed)), {a: flipped(d, 2, True, next(_seed)) for a, d in
                                                         c.membership.items()},
              bits(0.45, N_ATTRIBUTE, next(_seed)), baseline) for c in contrastive]
    # λ = 3: a cost of 0.2 in task accuracy and membership; repeats differ a little
    models["utkface", "talos", 3.0] = [
        fresh(membership_accuracies(0.75 + 0.01 * r, None, 0.70), 0.65 + 0.01 * r, 0.85 + 0.01 * r, baseline)
        for r in range(2)]
    baseline = bits(0.38, N_ATTRIBUTE, 2)
    models["celeba", "supervised", np.nan] = [fresh(membership_accuracies(0.52, ("entropy", 0.56), 0.50), 0.70,
                                                    0.70, baseline)]
    models["celeba", "contrastive", 0.0] = [fresh(membership_accuracies(0.70, None, 0.60), 0.80, 0.42, baseline)
                                            for _ in range(2)]
    models["celeba", "talos", 2.0] = [fresh(membership_accuracies(0.45, None, 0.45), 0.92, 0.60, baseline)
                                      for _ in range(2)]
    models["cifar10", "supervised", np.nan] = [fresh(membership_accuracies(0.61), 0.60, None, None)]
    models["cifar10", "contrastive", 0.0] = [fresh(membership_accuracies(0.60), 0.80, None, None)]
    return models


def _row(dataset, target, lam, repeat, model: Model) -> list[dict]:
    n_right = int(model.task.sum())
    lo, hi = cp(n_right, N_TEST)
    base = {"dataset": dataset, "target": target, "lambda": lam, "repeat": repeat, "task_accuracy": n_right / N_TEST,
            "task_accuracy_lo": lo, "task_accuracy_hi": hi, "n_test": N_TEST,
            "task_decisions": pack_decisions(model.task),
            **{f"queried_{split}_accuracy{end}": 0.5 for split in ("train", "test") for end in ("", "_lo", "_hi")}}
    rows = []
    for attack, decisions in model.membership.items():
        k = int(decisions.sum())
        rows.append(base | {"inference": "membership", "attack": attack, "accuracy": k / N_MIA,
                            "accuracy_lo": cp(k, N_MIA)[0], "accuracy_hi": cp(k, N_MIA)[1], "n": N_MIA,
                            "auc": model.auc, "auc_lo": model.auc - 0.05, "auc_hi": model.auc + 0.05,
                            "n_members": N_MEMBERS, "n_nonmembers": N_MEMBERS, "tpr_at_1pct_fpr": 0.05,
                            "tpr_at_1pct_fpr_lo": 0.02, "tpr_at_1pct_fpr_hi": 0.09, "fp_at_1pct_fpr": 2,
                            "baseline": np.nan, "baseline_lo": np.nan, "baseline_hi": np.nan,
                            "decisions": pack_decisions(decisions), "baseline_decisions": np.nan})
    if model.attribute is not None:
        k, b = int(model.attribute.sum()), int(model.baseline.sum())
        rows.append(base | {"inference": "attribute", "attack": ATTRIBUTE_ATTACK, "accuracy": k / N_ATTRIBUTE,
                            "accuracy_lo": cp(k, N_ATTRIBUTE)[0], "accuracy_hi": cp(k, N_ATTRIBUTE)[1],
                            "n": N_ATTRIBUTE, "auc": np.nan, "auc_lo": np.nan, "auc_hi": np.nan,
                            "n_members": np.nan, "n_nonmembers": np.nan, "tpr_at_1pct_fpr": np.nan,
                            "tpr_at_1pct_fpr_lo": np.nan, "tpr_at_1pct_fpr_hi": np.nan, "fp_at_1pct_fpr": np.nan,
                            "baseline": b / N_ATTRIBUTE, "baseline_lo": cp(b, N_ATTRIBUTE)[0],
                            "baseline_hi": cp(b, N_ATTRIBUTE)[1], "decisions": pack_decisions(model.attribute),
                            "baseline_decisions": pack_decisions(model.baseline)})
    return rows


def frame_of(models: dict) -> pd.DataFrame:
    rows = [row for (dataset, target, lam), repeats in models.items() for r, model in enumerate(repeats)
            for row in _row(dataset, target, lam, r, model)]
    return pd.DataFrame(rows)


MODELS = scenario()


@pytest.fixture(scope="module")
def csv_paths(tmp_path_factory) -> list[tuple[str, str, str | None]]:
    """One metrics.csv, scores.parquet and attribute_guesses.parquet per dataset (none where it has
    no attribute rows), as the attack rule writes them (repeats in reverse: the report must not
    rely on row order)."""
    folder = tmp_path_factory.mktemp("results")
    frame = frame_of(MODELS).iloc[::-1]
    return [write_contrastive(frame[frame.dataset == dataset], folder, f"{dataset}_metrics")
            for dataset in dict.fromkeys(frame.dataset.iloc[::-1])]


@pytest.fixture(scope="module")
def metrics(csv_paths) -> pd.DataFrame:
    # the synthetic frames pass the schema, each membership row's decisions read back from its scores
    return load_written(csv_paths)


@pytest.fixture(scope="module")
def thesis() -> pd.DataFrame:
    return load_csv_file(THESIS_CSV, THESIS_CLAIMS)


@pytest.fixture(scope="module")
def table(metrics, thesis) -> pd.DataFrame:
    return claims_table(metrics, thesis)


def layout(dataset, target, lam, part: str, attack: str | None = None) -> np.ndarray:
    """(repeats, records) of one model kind's known arrays."""
    repeats = MODELS[dataset, target, lam]
    if part == "membership":
        return np.stack([m.membership[attack] for m in repeats])
    return np.stack([getattr(m, part) for m in repeats])


def expected_paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """mean(a) − mean(b) with the t interval of the per-record differences of the record means,
    n − 1 df: the paired interval where neither layout has a draw effect (checked here: the draws'
    mean square does not exceed the error's, so the ANOVA draw component is 0)."""
    for m in (a, b):
        if m.shape[0] > 1:
            cells, grand = m.astype(float), m.mean()
            ms_draws = m.shape[1] * ((cells.mean(1) - grand) ** 2).sum() / (m.shape[0] - 1)
            residual = cells - cells.mean(0) - cells.mean(1)[:, None] + grand
            ms_error = (residual ** 2).sum() / ((m.shape[0] - 1) * (m.shape[1] - 1))
            assert ms_draws <= ms_error  # the precondition of this closed form
    per_record = a.mean(0) - b.mean(0)
    n = per_record.size
    half = stats.t.ppf(0.975, n - 1) * per_record.std(ddof=1) / np.sqrt(n)
    d = a.mean() - b.mean()
    return d, d - half, d + half


def claim_row(table, dataset, quantity_start, lam=None) -> pd.Series:
    rows = table[(table.dataset == dataset) & table.quantity.str.startswith(quantity_start)]
    rows = rows[rows["lambda"].isna()] if lam is None else rows[rows["lambda"] == lam]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def assert_difference(row, expected) -> None:
    assert (row.difference, row.difference_lo, row.difference_hi) == pytest.approx(expected, abs=1e-12)
    assert row.design == "paired by record"


# --------------------------------------------------------------------------------- pooling


def test_thesis_reference_quotes_the_numbers_of_the_text(thesis):
    assert list(thesis.claim) == ["membership", "attribute", "talos"]
    values = dict(zip(thesis.claim, thesis.quoted_values))
    assert "0.931" in values["membership"] and "0.625" in values["membership"]
    assert "0.701" in values["attribute"] and "0.422" in values["attribute"] and "0.421" in values["attribute"]
    assert all(v in values["talos"] for v in ("0.701", "0.602", "0.513", "0.132"))
    assert all("Sec. 4." in s for s in thesis.source)


def test_pool_is_the_mean_decision_over_repeats_per_record(metrics):
    pooled = pool(metrics)
    assert len(pooled) == len(metrics.drop_duplicates(["dataset", "target", "lambda", "inference", "attack"]))
    for r in (pd.Series(row) for row in pooled.to_dict("records")):
        repeats = MODELS[r.dataset, r.target, np.nan if r.target == "supervised" else r["lambda"]]
        part = "attribute" if r.inference == "attribute" else "membership"
        decisions = np.stack([m.attribute if part == "attribute" else m.membership[r.attack] for m in repeats])
        task = np.stack([m.task for m in repeats])
        assert (r.repeats, r.n, r.n_test) == (len(repeats), decisions.shape[1], N_TEST)  # records, not decisions
        assert r.accuracy == pytest.approx(decisions.mean(), abs=1e-12)
        assert r.task_accuracy == pytest.approx(task.mean(), abs=1e-12)
        assert r.accuracy_lo < r.accuracy < r.accuracy_hi and r.task_accuracy_lo < r.task_accuracy < r.task_accuracy_hi
        per_repeat = decisions.mean(1)
        assert (np.isnan(r.accuracy_std) if len(repeats) == 1 else
                r.accuracy_std == pytest.approx(per_repeat.std(ddof=1), abs=1e-12))
        if part == "attribute":
            baseline = np.stack([m.baseline for m in repeats])
            assert r.baseline == pytest.approx(baseline.mean(), abs=1e-12) and r.baseline != r.accuracy
            assert r.baseline_lo < r.baseline < r.baseline_hi and np.isnan(r.auc_mean)
        else:
            assert np.isnan(r.baseline) and np.isnan(r.baseline_lo) and r.auc_mean == pytest.approx(0.6)
        if len(repeats) == 1:  # one repeat: the exact interval of k of n records
            assert (r.accuracy_lo, r.accuracy_hi) == pytest.approx(cp(int(decisions.sum()), r.n), abs=1e-12)
            assert (r.task_accuracy_lo, r.task_accuracy_hi) == pytest.approx(cp(int(task.sum()), N_TEST), abs=1e-12)


def width(lo_hi) -> float:
    return lo_hi[1] - lo_hi[0]


def test_identical_repeats_give_the_one_repeat_interval():
    """Two trainings that decide every record alike carry the information of one: the interval is
    that of k of n records (up to the t correction of n − 1 df), not of 2k of 2n decisions."""
    base = Model(bits(0.8, N_TEST, 3), {a: bits(0.62, N_MIA, 4 + i) for i, a in enumerate(MEMBERSHIP_ATTACKS)},
                 bits(0.55, N_ATTRIBUTE, 5), bits(0.4, N_ATTRIBUTE, 6))
    one = pool(frame_of({("utkface", "contrastive", 0.0): [base]})).set_index("attack")
    two = pool(frame_of({("utkface", "contrastive", 0.0): [base, base]})).set_index("attack")
    for attack, decisions, n, column in ((NN_ATTACK, base.membership[NN_ATTACK], N_MIA, "accuracy"),
                                         (ATTRIBUTE_ATTACK, base.attribute, N_ATTRIBUTE, "accuracy"),
                                         (ATTRIBUTE_ATTACK, base.baseline, N_ATTRIBUTE, "baseline"),
                                         (NN_ATTACK, base.task, N_TEST, "task_accuracy")):
        k = int(decisions.sum())
        single, repeated = one.loc[attack], two.loc[attack]
        assert (single[f"{column}_lo"], single[f"{column}_hi"]) == pytest.approx(cp(k, n), abs=1e-12)
        assert repeated[column] == pytest.approx(k / n) and repeated.repeats == 2
        got = (repeated[f"{column}_lo"], repeated[f"{column}_hi"])
        assert got == pytest.approx(cp(k, n), abs=0.003)
        assert width(got) == pytest.approx(width(cp(k, n)), rel=0.01)
        assert width(got) > 1.3 * width(cp(2 * k, 2 * n))  # the pooled interval would be √2 narrower


# --------------------------------------------------------------------------------- the claims


def test_claims_table_has_one_row_per_comparison_measured(table):
    assert list(table.columns) == CLAIM_COLUMNS
    # utkface: 2 membership + 1 attribute + 3 per λ (1, 3); celeba: 2 + 1 + 3 (λ = 2); cifar10: 2 membership only
    counts = table.groupby(["dataset", "claim"], sort=False).size().to_dict()
    assert counts == {("utkface", "membership"): 2, ("utkface", "attribute"): 1, ("utkface", "talos"): 6,
                      ("celeba", "membership"): 2, ("celeba", "attribute"): 1, ("celeba", "talos"): 3,
                      ("cifar10", "membership"): 2}
    assert (table.design == "paired by record").all()
    assert table[table.verdict != UNRESOLVED].n_for_80pct_power.isna().all()
    assert (table[table.claim == "talos"].thesis_values.str.contains("0.602")).all()


@pytest.mark.parametrize("dataset, verdict", [("utkface", REPRODUCED), ("celeba", CONTRADICTED)])
def test_membership_claim_is_supervised_minus_contrastive_nn(table, dataset, verdict):
    row = claim_row(table, dataset, "membership inference accuracy, NN")
    assert (row.compared, row.claimed, row.attack_a, row.attack_b) == ("supervised vs contrastive", "a > b", "nn", "nn")
    supervised, contrastive = (layout(dataset, *side, "membership", NN_ATTACK)
                               for side in (("supervised", np.nan), ("contrastive", 0.0)))
    assert_difference(row, expected_paired(supervised, contrastive))
    assert row.value_a == pytest.approx(supervised.mean()) and row.value_b == pytest.approx(contrastive.mean())
    assert (row.n_a, row.n_b) == (N_MIA, N_MIA)
    assert (row.draws_a, row.draws_b) == (len(supervised), len(contrastive))
    assert row.verdict == verdict


def test_an_unresolved_membership_claim_says_how_many_records_would_settle_it(table):
    row = claim_row(table, "cifar10", "membership inference accuracy, NN")
    assert row.verdict == UNRESOLVED and row.difference_lo < 0 < row.difference_hi
    assert row.difference == pytest.approx(0.01) and N_MIA < row.n_for_80pct_power < np.inf


@pytest.mark.parametrize("dataset, supervised, contrastive, verdict", [
    ("utkface", "confidence", "entropy", REPRODUCED), ("celeba", "entropy", "nn", CONTRADICTED),
    ("cifar10", "nn", "nn", UNRESOLVED)])
def test_strongest_attack_is_the_most_accurate_of_each_model(table, dataset, supervised, contrastive, verdict):
    row = claim_row(table, dataset, "membership inference accuracy, strongest")
    assert (row.attack_a, row.attack_b) == (supervised, contrastive)
    assert f"supervised: {supervised}; contrastive: {contrastive}" in row.quantity
    a, b = layout(dataset, "supervised", np.nan, "membership", supervised), layout(
        dataset, "contrastive", 0.0, "membership", contrastive)
    for attack in MEMBERSHIP_ATTACKS:  # nothing beats the chosen one
        assert layout(dataset, "supervised", np.nan, "membership", attack).mean() <= a.mean()
        assert layout(dataset, "contrastive", 0.0, "membership", attack).mean() <= b.mean()
    assert_difference(row, expected_paired(a, b))
    assert row.verdict == verdict


@pytest.mark.parametrize("dataset, verdict", [("utkface", REPRODUCED), ("celeba", CONTRADICTED)])
def test_attribute_claim_is_contrastive_minus_supervised_beside_the_baseline(table, dataset, verdict):
    row = claim_row(table, dataset, "attribute")
    assert (row.compared, row.attack_a, row.attack_b) == ("contrastive vs supervised", ATTRIBUTE_ATTACK,
                                                          ATTRIBUTE_ATTACK)
    contrastive, supervised = layout(dataset, "contrastive", 0.0, "attribute"), layout(
        dataset, "supervised", np.nan, "attribute")
    assert_difference(row, expected_paired(contrastive, supervised))
    assert (row.n_a, row.n_b) == (N_ATTRIBUTE, N_ATTRIBUTE)
    assert row.verdict == verdict
    # the majority baseline of each side, from its baseline_decisions (not the attack's)
    baseline = MODELS[dataset, "contrastive", 0.0][0].baseline.mean()
    assert row.baseline_a == pytest.approx(baseline) and row.baseline_b == pytest.approx(baseline)
    assert row.baseline_a_lo < baseline < row.baseline_a_hi
    weak = "supervised" if dataset == "utkface" else "contrastive"  # 0.42 against a baseline of 0.40 / 0.38
    assert row.note.startswith("not above the majority baseline") and row.note.endswith(weak)


@pytest.mark.parametrize("dataset, lam, verdict", [("utkface", 1.0, REPRODUCED), ("utkface", 3.0, CONTRADICTED),
                                                   ("celeba", 2.0, CONTRADICTED)])
def test_talos_lowers_the_attribute_accuracy_of_the_contrastive_model(table, dataset, lam, verdict):
    row = claim_row(table, dataset, "attribute", lam)
    assert row.claim == "talos" and row.compared == f"contrastive (λ = 0) vs Talos (λ = {lam:g})"
    assert_difference(row, expected_paired(layout(dataset, "contrastive", 0.0, "attribute"),
                                           layout(dataset, "talos", lam, "attribute")))
    assert row.verdict == verdict


@pytest.mark.parametrize("dataset, lam, verdict", [
    ("utkface", 1.0, REPRODUCED),  # 2 of 400 images lost: a cost of 0.005, its interval below the margin
    ("utkface", 3.0, CONTRADICTED),  # a cost of about 0.2, beyond the margin
    ("celeba", 2.0, REPRODUCED)])  # a gain of 0.12
def test_no_cost_in_task_accuracy_reads_the_accuracy_talos_loses(table, dataset, lam, verdict):
    row = claim_row(table, dataset, "task accuracy", lam)
    contrastive, talos = layout(dataset, "contrastive", 0.0, "task"), layout(dataset, "talos", lam, "task")
    expected = expected_paired(contrastive, talos)  # contrastive − Talos: the accuracy lost
    assert_difference(row, expected)
    assert (row.value_a, row.value_b) == pytest.approx((contrastive.mean(), talos.mean()))
    assert (row.n_a, row.n_b, row.draws_a, row.draws_b) == (N_TEST, N_TEST, 2, 2)
    assert row.claimed == f"a − b ≤ {NO_COST_MARGIN:g} (no cost)" and f"{NO_COST_MARGIN:g}" in row.note
    assert row.verdict == verdict
    if (dataset, lam) == ("utkface", 1.0):  # the tiny cost: not shown to be 0, shown to be below the margin
        assert expected[0] == pytest.approx(0.005) and 0 < expected[2] < NO_COST_MARGIN
    if (dataset, lam) == ("utkface", 3.0):
        assert expected[1] > NO_COST_MARGIN


@pytest.mark.parametrize("dataset, lam, verdict", [
    ("utkface", 1.0, REPRODUCED),  # 2 of 400 records won by the attack: 0.005 added
    ("utkface", 3.0, CONTRADICTED),  # about 0.2 added
    ("celeba", 2.0, REPRODUCED)])  # Talos lowers it by 0.25
def test_no_cost_in_membership_privacy_reads_the_accuracy_talos_adds(table, dataset, lam, verdict):
    row = claim_row(table, dataset, "membership inference accuracy, NN", lam)
    contrastive = layout(dataset, "contrastive", 0.0, "membership", NN_ATTACK)
    talos = layout(dataset, "talos", lam, "membership", NN_ATTACK)
    assert_difference(row, expected_paired(talos, contrastive))  # b − a: what Talos adds
    assert (row.value_a, row.value_b) == pytest.approx((contrastive.mean(), talos.mean()))
    assert row.claimed == f"b − a ≤ {NO_COST_MARGIN:g} (no cost)"
    assert row.verdict == verdict


def test_markdown_has_every_row(table):
    text = markdown(table)
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(lines) == len(table) + 1  # the header, then one line per row
    for r, line in zip(table.itertuples(index=False), lines[1:]):
        assert f"| {r.dataset} | {r.claim} | {r.quantity} |" in line
        assert f"{r.value_a:.3f} [{r.value_a_lo:.3f}, {r.value_a_hi:.3f}] ({r.n_a})" in line
        assert f"{r.difference:+.3f} [{r.difference_lo:+.3f}, {r.difference_hi:+.3f}]" in line
        assert f"| {min(r.draws_a, r.draws_b)} | {r.verdict} |" in line  # the trainings the ledger's rule reads
    unresolved = claim_row(table, "cifar10", "membership inference accuracy, NN")
    assert f"| {UNRESOLVED} | {int(unresolved.n_for_80pct_power)} |" in text
    assert "0.931" in text and "clustered by record" in text and f"margin of {NO_COST_MARGIN:g}" in text


@pytest.mark.parametrize("make", [privacy_figure, talos_lambda_figure])
def test_figures_show_every_dataset_with_n_and_chance(metrics, make):
    """Built, not drawn (the script test below writes them as PNG and PDF: drawing is the slow part)."""
    fig = make(metrics)
    titles = [ax.get_title() for ax in fig.axes]
    datasets = ("utkface", "celeba", "cifar10")
    assert len(fig.axes) == 3 * len(datasets) and all(any(t.startswith(d) for t in titles) for d in datasets)
    assert any(f"n = {N_MIA} " in t for t in titles)  # records, not records × repeats
    assert "cifar10: attribute inference\n(not measured)" in titles  # no attribute on that dataset
    assert sum(line.get_gid() == "chance" for ax in fig.axes for line in ax.get_lines()) == len(datasets)
    plt.close(fig)


def test_script_end_to_end(csv_paths, tmp_path):
    """One metrics.csv (utkface: every claim) through the CLI: the claims as CSV and Markdown, one
    figure as PNG and the other as PDF, no temporary file left."""
    out = tmp_path / "out"
    library = Path(privssl.__file__).parents[1]  # the privssl this test imported
    python = script_python()  # first: its server's socket goes into os.environ
    env = {**os.environ, "PYTHONPATH": str(library), "MPLBACKEND": "Agg"}
    utkface, scores, guesses = next(p for p in csv_paths if Path(p[0]).name.startswith("utkface"))
    subprocess.run([python, str(ROOT / "scripts" / "contrastive_report.py"), "--metrics", utkface, "--scores", scores,
                    "--guesses", guesses, "--thesis", str(THESIS_CSV), "--fig-privacy", str(out / "privacy.png"),
                    "--fig-lambda", str(out / "lambda.pdf"), "--csv", str(out / "claims.csv"),
                    "--md", str(out / "claims.md")], check=True, env=env, timeout=600)  # a hang guard, not a speed test
    table = pd.read_csv(out / "claims.csv")
    assert list(table.columns) == CLAIM_COLUMNS and set(table.dataset) == {"utkface"} and len(table) == 9
    assert sorted(table.verdict) == sorted([REPRODUCED] * 6 + [CONTRADICTED] * 3)
    assert (out / "claims.md").read_text().count("| utkface |") == 9
    assert (out / "privacy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "lambda.pdf").read_bytes()[:5] == b"%PDF-" and (out / "lambda.pdf").stat().st_size > 10_000
    assert sorted(p.name for p in out.iterdir()) == ["claims.csv", "claims.md", "lambda.pdf", "privacy.png"]


def test_bad_input_is_refused_by_name(metrics, thesis, tmp_path):
    with pytest.raises(ValueError, match="baseline_decisions"):
        claims_table(metrics.drop(columns="baseline_decisions"), thesis)
    with pytest.raises(ValueError, match="no rows"):
        claims_table(metrics.iloc[:0], thesis)
    with pytest.raises(ValueError, match="talos"):
        claims_table(metrics, thesis[thesis.claim != "talos"])
    with pytest.raises(ValueError, match="lambda"):
        claims_table(metrics.assign(**{"lambda": metrics["lambda"].fillna(0.0)}), thesis)
    with pytest.raises(ValueError, match="differs between the rows of one model"):
        bad = metrics.copy()
        first = bad.index[0]
        bad.loc[first, "task_decisions"] = pack_decisions(~MODELS["cifar10", "contrastive", 0.0][0].task)
        pool(bad)
    with pytest.raises(ValueError, match="different numbers of records"):
        bad = metrics.copy()
        bad.loc[bad.index[0], "n"] = N_MIA - 8  # one repeat's cell of another size cannot be paired
        pool(bad)
    with pytest.raises(ValueError, match="the claims table has no rows"):
        markdown(pd.DataFrame(columns=CLAIM_COLUMNS))
    path = tmp_path / "metrics.csv"
    metrics.drop(columns="n_test").to_csv(path, index=False)
    with pytest.raises(ValueError, match="n_test"):
        load_csv_files([path], CONTRASTIVE)


def test_the_membership_task_rows_decisions_are_read_from_their_scores_too(metrics, tmp_path):
    """load_contrastive reads every membership row's decisions from its scores: the membership
    task's rows (written here with calls, their cells left empty) get theirs back, the attribute
    rows theirs from their guesses."""
    utkface = metrics[metrics.dataset == "utkface"]
    task = utkface[utkface.inference == "membership"].assign(inference="membership_task")
    frame = pd.concat([utkface, task], ignore_index=True)
    loaded = load_written([write_contrastive(frame, tmp_path, "utkface")])
    assert (loaded.decisions == frame.decisions).all()
    assert (loaded.baseline_decisions.fillna("") == frame.baseline_decisions.fillna("")).all()
    assert (loaded.inference == "membership_task").sum() == len(task)


def test_the_membership_claim_reads_the_membership_task_rows_and_talos_the_task_rows(metrics, thesis):
    """Rows of the membership task's models (inference `membership_task`) in which the supervised
    and the contrastive model trade places: the contrastive-vs-supervised claim turns, the Talos
    rows, which compare the released (task) models, do not move."""
    utkface = metrics[metrics.dataset == "utkface"]
    own = utkface[utkface.inference == "membership"].copy()
    own["inference"] = "membership_task"
    swapped = own.copy()
    for a, b in (("supervised", "contrastive"), ("contrastive", "supervised")):
        source = own[own.target == b].set_index(["attack", "repeat"])
        into = own.target == a
        keys = list(zip(own[into].attack, own[into].repeat))
        for column in ("decisions", "accuracy", "accuracy_lo", "accuracy_hi"):
            swapped.loc[into, column] = source.loc[keys, column].to_numpy()
    before = claims_table(utkface, thesis)
    after = claims_table(pd.concat([utkface, swapped]), thesis)
    membership_before, membership_after = before[before.claim == "membership"], after[after.claim == "membership"]
    assert list(membership_before.verdict) == ["reproduced", "reproduced"]
    assert list(membership_after.verdict) == ["contradicted", "contradicted"]
    assert membership_after.quantity.iloc[0] == "membership inference accuracy, NN attack (nn) (membership task)"
    nn = own[own.attack == "nn"]
    assert membership_after.value_a.iloc[0] == pytest.approx(nn[nn.target == "contrastive"].accuracy.mean())
    talos_before, talos_after = before[before.claim == "talos"], after[after.claim == "talos"]
    assert talos_after.reset_index(drop=True).equals(talos_before.reset_index(drop=True))


def test_the_expected_grid_has_membership_task_rows_only_where_the_dataset_has_a_membership_task():
    from privssl.artefacts.contrastive import contrastive_rows as contrastive

    config = {"contrastive": {"datasets": {"digits": {"task": "parity", "part": 40, "aux": 40}}, "repeats": 1,
                              "talos": {"lambdas": [0, 2]}}}
    inferences = lambda: {i for block in contrastive(config, "digits") for i in block["inference"]}  # noqa: E731
    assert inferences() == {"membership", "attribute"}
    config["contrastive"]["datasets"]["digits"]["membership_task"] = "parity"  # the task itself
    assert inferences() == {"membership", "attribute"}
    config["contrastive"]["datasets"]["digits"]["membership_task"] = "class"
    assert inferences() == {"membership", "membership_task", "attribute"}


def test_repeats_that_copy_one_training_count_as_one_training(thesis):
    """Three repeats per model kind: distinct trainings are 3 trainings per arm in the claims, the
    same three as copies of one training (one seed every repeat) are 1, whatever their count."""
    def kinds(copies: bool) -> dict:
        def model(nn: float, task: float, attribute: float) -> Model:
            return fresh(membership_accuracies(nn), task, attribute, baseline)
        baseline = bits(0.4, N_ATTRIBUTE, 7)
        supervised, contrastive = model(0.62, 0.8, 0.45), model(0.55, 0.85, 0.56)
        return {("utkface", "supervised", np.nan): [supervised] * 3 if copies else
                [model(0.62, 0.8, 0.45) for _ in range(3)],
                ("utkface", "contrastive", 0.0): [contrastive] * 3 if copies else
                [model(0.55, 0.85, 0.56) for _ in range(3)]}
    for copies, trainings in ((False, 3), (True, 1)):
        metrics = frame_of(kinds(copies))
        assert set(pool(metrics).trainings) == {trainings} and set(pool(metrics).repeats) == {3}
        claims = claims_table(metrics, thesis)
        assert set(claims.draws_a) == set(claims.draws_b) == {trainings}, copies
    # the copies attacked again with each repeat's own attack seed: the NN, boundary and attribute
    # attacks decide otherwise in every repeat, the metric attacks and the task alike: one training
    reattacked = frame_of(kinds(True))
    seeded = reattacked.attack.isin(["nn", "label_only_boundary", "attribute_mlp"])
    reattacked.loc[seeded, "decisions"] = [pack_decisions(bits(0.5, int(n), 100 + i))
                                           for i, n in enumerate(reattacked.loc[seeded, "n"])]
    assert set(pool(reattacked).trainings) == {1}
