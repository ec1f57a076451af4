"""The contrastive branch's claims table and figures (thesis Ch. 4) from small synthetic
metrics.csv frames: pooling over repeats matches a hand computation, each verdict follows from
intervals built by hand, the Markdown has every row, both figures render, the script runs end to
end, and bad input is refused by name."""

import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from privssl.artefacts import CONTRASTIVE, THESIS_CLAIMS, load_csv_file, load_csv_files  # noqa: E402
from privssl.attacks.contrastive_spec import ATTRIBUTE_ATTACK, MEMBERSHIP_ATTACKS  # noqa: E402
from privssl.attacks.statistics import clopper_pearson  # noqa: E402
from privssl.reports.contrastive_plots import privacy_figure, talos_lambda_figure  # noqa: E402
from privssl.reports.contrastive_report import (  # noqa: E402
    CLAIM_COLUMNS,
    CONTRADICTED,
    NO_DIFFERENCE,
    OVERLAP,
    REPRODUCED,
    claims_table,
    directional_verdict,
    markdown,
    no_cost_verdict,
    pool,
)

ROOT = Path(__file__).resolve().parents[1]
THESIS_CSV = ROOT / "resources" / "thesis_contrastive.csv"
REPEATS = 2
N_TEST, N_MEMBERS, N_ATTRIBUTE = 1000, 200, 300  # membership decisions: 2 * N_MEMBERS per repeat
MODELS = [("supervised", np.nan), ("contrastive", 0.0), ("talos", 1.0), ("talos", 3.0)]
# Per dataset and model kind: task accuracy, NN MIA accuracy, attribute accuracy (None: no attribute).
# Repeat r adds 0.01 r to each, so the pooled value is the mean over repeats (equal n).
VALUES = {
    "utkface": {"supervised": (0.75, 0.80, 0.42), "contrastive": (0.85, 0.55, 0.70),
                ("talos", 1.0): (0.84, 0.56, 0.68), ("talos", 3.0): (0.70, 0.45, 0.45)},
    "cifar10": {"supervised": (0.60, 0.52, None), "contrastive": (0.80, 0.70, None),
                ("talos", 1.0): (0.80, 0.70, None), ("talos", 3.0): (0.80, 0.70, None)},
}
BASELINE = 0.40
STRONG = {"supervised": "confidence"}  # this attack beats NN by 0.05 on the supervised model


def _interval(accuracy: float, n: int) -> tuple[float, float]:
    lo, hi = clopper_pearson(round(accuracy * n), n)
    return float(lo), float(hi)


def metric_rows() -> list[dict]:
    rows = []
    for dataset, values in VALUES.items():
        for target, lam in MODELS:
            task, nn, attribute = values[target if target != "talos" else (target, lam)]
            for repeat in range(REPEATS):
                shift = 0.01 * repeat
                model = {"dataset": dataset, "target": target, "lambda": lam, "repeat": repeat,
                         "task_accuracy": task + shift, "n_test": N_TEST}
                model["task_accuracy_lo"], model["task_accuracy_hi"] = _interval(task + shift, N_TEST)
                for i, attack in enumerate(MEMBERSHIP_ATTACKS):
                    acc = nn + shift + (0.05 if STRONG.get(target) == attack else -0.01 * i)
                    n = 2 * N_MEMBERS
                    lo, hi = _interval(acc, n)
                    rows.append({**model, "inference": "membership", "attack": attack, "accuracy": acc,
                                 "accuracy_lo": lo, "accuracy_hi": hi, "n": n, "auc": acc + 0.02,
                                 "auc_lo": acc, "auc_hi": acc + 0.04, "n_members": N_MEMBERS,
                                 "n_nonmembers": N_MEMBERS, "tpr_at_1pct_fpr": 0.05, "tpr_at_1pct_fpr_lo": 0.02,
                                 "tpr_at_1pct_fpr_hi": 0.09, "fp_at_1pct_fpr": 2, "baseline": np.nan,
                                 "baseline_lo": np.nan, "baseline_hi": np.nan})
                if attribute is not None:
                    acc, base = attribute + shift, BASELINE + shift
                    lo, hi = _interval(acc, N_ATTRIBUTE)
                    base_lo, base_hi = _interval(base, N_ATTRIBUTE)
                    rows.append({**model, "inference": "attribute", "attack": ATTRIBUTE_ATTACK, "accuracy": acc,
                                 "accuracy_lo": lo, "accuracy_hi": hi, "n": N_ATTRIBUTE, "auc": np.nan,
                                 "auc_lo": np.nan, "auc_hi": np.nan, "n_members": np.nan, "n_nonmembers": np.nan,
                                 "tpr_at_1pct_fpr": np.nan, "tpr_at_1pct_fpr_lo": np.nan,
                                 "tpr_at_1pct_fpr_hi": np.nan, "fp_at_1pct_fpr": np.nan, "baseline": base,
                                 "baseline_lo": base_lo, "baseline_hi": base_hi})
    return rows


@pytest.fixture(scope="module")
def csv_paths(tmp_path_factory) -> list[Path]:
    """One metrics.csv per dataset, as the attack rule writes them."""
    folder = tmp_path_factory.mktemp("results")
    frame = pd.DataFrame(metric_rows())
    paths = []
    for dataset in VALUES:
        path = folder / f"{dataset}_metrics.csv"
        frame[frame.dataset == dataset].to_csv(path, index=False)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def metrics(csv_paths) -> pd.DataFrame:
    return load_csv_files(csv_paths, CONTRASTIVE)  # the synthetic frames pass the schema


@pytest.fixture(scope="module")
def thesis() -> pd.DataFrame:
    return load_csv_file(THESIS_CSV, THESIS_CLAIMS)


@pytest.fixture(scope="module")
def table(metrics, thesis) -> pd.DataFrame:
    return claims_table(metrics, thesis)


def _cp(correct: int, n: int) -> tuple[float, float]:
    """Clopper–Pearson 95 % by the beta quantiles, independently of mia_stats."""
    lo = 0.0 if correct == 0 else stats.beta.ppf(0.025, correct, n - correct + 1)
    hi = 1.0 if correct == n else stats.beta.ppf(0.975, correct + 1, n - correct)
    return lo, hi


def test_thesis_reference_quotes_the_numbers_of_the_text(thesis):
    assert list(thesis.claim) == ["membership", "attribute", "talos"]
    values = dict(zip(thesis.claim, thesis.quoted_values))
    assert "0.931" in values["membership"] and "0.625" in values["membership"]
    assert "0.701" in values["attribute"] and "0.422" in values["attribute"] and "0.421" in values["attribute"]
    assert all(v in values["talos"] for v in ("0.701", "0.602", "0.513", "0.132"))
    assert all("Sec. 4." in s for s in thesis.source)


def test_pooling_matches_a_hand_computation(metrics):
    pooled = pool(metrics).set_index(["dataset", "target", "lambda", "attack"])
    nn = pooled.loc[("utkface", "supervised", np.nan, "nn")]
    correct = round(0.80 * 400) + round(0.81 * 400)  # 320 + 324 decisions right of 800
    assert (nn.n, nn.accuracy, nn.repeats) == (800, pytest.approx(correct / 800), 2)
    assert (nn.accuracy_lo, nn.accuracy_hi) == pytest.approx(_cp(correct, 800))
    assert nn.accuracy_std == pytest.approx(np.std([0.80, 0.81], ddof=1))
    assert nn.auc_mean == pytest.approx(0.825)
    assert np.isnan(nn.baseline)
    # task accuracy: one model per repeat, counted once however many attack rows it has
    assert nn.n_test == 2 * N_TEST and nn.task_accuracy == pytest.approx((750 + 760) / 2000)
    assert (nn.task_accuracy_lo, nn.task_accuracy_hi) == pytest.approx(_cp(1510, 2000))
    attribute = pooled.loc[("utkface", "talos", 3.0, ATTRIBUTE_ATTACK)]
    assert attribute.n == 600 and attribute.accuracy == pytest.approx((135 + 138) / 600)
    assert attribute.baseline == pytest.approx((120 + 123) / 600)
    assert (attribute.baseline_lo, attribute.baseline_hi) == pytest.approx(_cp(243, 600))
    assert np.isnan(attribute.auc_mean)


@pytest.mark.parametrize("a, b, verdict", [
    ((0.70, 0.80), (0.50, 0.60), REPRODUCED),
    ((0.50, 0.60), (0.70, 0.80), CONTRADICTED),
    ((0.55, 0.70), (0.60, 0.75), OVERLAP),
    ((0.60, 0.70), (0.50, 0.60), OVERLAP),  # touching intervals overlap
])
def test_directional_verdict(a, b, verdict):
    assert directional_verdict(*a, *b) == verdict


@pytest.mark.parametrize("reference, talos, higher_is_worse, start", [
    ((0.80, 0.85), (0.82, 0.86), False, NO_DIFFERENCE),
    ((0.80, 0.85), (0.70, 0.75), False, "contradicted: Talos has lower task accuracy"),
    ((0.80, 0.85), (0.90, 0.95), False, "consistent: Talos better beyond the intervals (higher"),
    ((0.50, 0.55), (0.60, 0.65), True, "contradicted: Talos has higher"),
    ((0.50, 0.55), (0.40, 0.45), True, "consistent: Talos better beyond the intervals (lower"),
])
def test_no_cost_verdict(reference, talos, higher_is_worse, start):
    quantity = "membership inference accuracy" if higher_is_worse else "task accuracy"
    assert no_cost_verdict(*reference, *talos, higher_is_worse=higher_is_worse, quantity=quantity).startswith(start)


def _row(table, dataset, quantity_start, lam=None):
    rows = table[(table.dataset == dataset) & table.quantity.str.startswith(quantity_start)]
    rows = rows[rows["lambda"].isna()] if lam is None else rows[rows["lambda"] == lam]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_claims_table_verdicts(table):
    assert list(table.columns) == CLAIM_COLUMNS
    # 2 membership rows per dataset, 1 attribute row (utkface only), 3 (utkface) or 2 (cifar10) per λ
    assert len(table) == (2 + 1 + 3 * 2) + (2 + 0 + 2 * 2)
    assert _row(table, "utkface", "membership inference accuracy, NN").verdict == REPRODUCED
    assert _row(table, "cifar10", "membership inference accuracy, NN").verdict == CONTRADICTED
    strongest = _row(table, "utkface", "membership inference accuracy, strongest")
    assert (strongest.attack_a, strongest.attack_b) == ("confidence", "nn")
    assert "supervised: confidence" in strongest.quantity and strongest.value_a == pytest.approx(0.855)
    attribute = _row(table, "utkface", "attribute")
    assert attribute.verdict == REPRODUCED and attribute.compared == "supervised vs contrastive"
    assert attribute.baseline_a == pytest.approx(0.405) and "supervised" in attribute.note
    assert _row(table, "utkface", "attribute", 1.0).verdict == OVERLAP
    assert _row(table, "utkface", "attribute", 3.0).verdict == REPRODUCED
    assert _row(table, "utkface", "task accuracy", 1.0).verdict == NO_DIFFERENCE
    assert _row(table, "utkface", "task accuracy", 3.0).verdict.startswith("contradicted: Talos has lower")
    assert _row(table, "utkface", "membership inference accuracy, NN", 1.0).verdict == NO_DIFFERENCE
    assert _row(table, "utkface", "membership inference accuracy, NN", 3.0).verdict.startswith(
        "consistent: Talos better")
    talos = table[table.claim == "talos"]
    assert (talos.thesis_values.str.contains("0.602")).all()


def test_markdown_has_every_row(table):
    text = markdown(table)
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(lines) == len(table) + 1  # the header, then one line per row
    for r, line in zip(table.itertuples(index=False), lines[1:]):
        assert f"| {r.dataset} | {r.claim} | {r.quantity} |" in line
        assert f"{r.value_a:.3f} [{r.value_a_lo:.3f}, {r.value_a_hi:.3f}] ({r.n_a})" in line
        assert r.verdict in line
    assert "0.931" in text and "Clopper–Pearson" in text


@pytest.mark.parametrize("make", [privacy_figure, talos_lambda_figure])
def test_figures_show_every_dataset_with_n_and_chance(metrics, make):
    """Built, not drawn (the script test below writes them as PNG and PDF: drawing is the slow part)."""
    fig = make(metrics)
    titles = [ax.get_title() for ax in fig.axes]
    assert len(fig.axes) == 3 * len(VALUES) and all(any(t.startswith(d) for t in titles) for d in VALUES)
    assert any("n = 800 decisions" in t for t in titles) and any("n = 2000 test images" in t for t in titles)
    assert "cifar10: attribute inference\n(not measured)" in titles  # no attribute on that dataset
    assert sum(line.get_gid() == "chance" for ax in fig.axes for line in ax.get_lines()) == len(VALUES)
    plt.close(fig)


def test_script_end_to_end(csv_paths, tmp_path):
    """One metrics.csv (utkface: every claim) through the CLI: the claims as CSV and Markdown, one
    figure as PNG and the other as PDF (each save draws the figure again: the slow part of this
    file), no temporary file left."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, str(ROOT / "scripts" / "contrastive_report.py"), "--metrics", str(csv_paths[0]),
                    "--thesis", str(THESIS_CSV), "--fig-privacy", str(out / "privacy.png"),
                    "--fig-lambda", str(out / "lambda.pdf"), "--csv", str(out / "claims.csv"),
                    "--md", str(out / "claims.md")], check=True, env=env, timeout=120)
    table = pd.read_csv(out / "claims.csv")
    assert list(table.columns) == CLAIM_COLUMNS and set(table.dataset) == {"utkface"} and len(table) == 9
    assert (out / "claims.md").read_text().count("| utkface |") == 9
    assert (out / "privacy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "lambda.pdf").read_bytes()[:5] == b"%PDF-" and (out / "lambda.pdf").stat().st_size > 10_000
    assert sorted(p.name for p in out.iterdir()) == ["claims.csv", "claims.md", "lambda.pdf", "privacy.png"]


def test_bad_input_is_refused_by_name(metrics, thesis, tmp_path):
    with pytest.raises(ValueError, match="baseline"):
        claims_table(metrics.drop(columns="baseline"), thesis)
    with pytest.raises(ValueError, match="no rows"):
        claims_table(metrics.iloc[:0], thesis)
    with pytest.raises(ValueError, match="talos"):
        claims_table(metrics, thesis[thesis.claim != "talos"])
    with pytest.raises(ValueError, match="lambda"):
        claims_table(metrics.assign(**{"lambda": metrics["lambda"].fillna(0.0)}), thesis)
    with pytest.raises(ValueError, match="differs between the rows of one model"):
        bad = metrics.copy()
        bad.loc[bad.index[0], "task_accuracy"] += 0.1
        pool(bad)
    with pytest.raises(ValueError, match="the claims table has no rows"):
        markdown(pd.DataFrame(columns=CLAIM_COLUMNS))
    path = tmp_path / "metrics.csv"
    metrics.drop(columns="n_test").to_csv(path, index=False)
    with pytest.raises(ValueError, match="n_test"):
        load_csv_files([path], CONTRASTIVE)
