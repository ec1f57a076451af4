"""The whole DAG on the tiny config (tests/data/tiny_config.yaml), run once per test session by
the `tiny_run` fixture in a temporary copy of the workflow (so a test can edit a script of the
copy), and the tests that inspect its outputs. The other workflow tests (dry runs, bad configs,
resuming) and the helpers shared with them are in test_workflow.py. `make test` keeps this module
on one xdist worker and starts it first (tests/conftest.py): it is the longest unit of the suite.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from scipy import stats
from test_workflow import (
    REPO,
    RESULTS,
    assert_nothing_to_do,
    copy_workflow,
    planned_jobs,
    run_snakemake,
    snakemake_env,
    tiny_config,
    write_config,
)

# read_table: a per-record cell (hex decisions) that happens to hold only digits stays text
from privssl.artefacts.tables import read_table
from privssl.audit.audit_names import CANARY_AUDITS, CRAFTED_AUDITS
from privssl.audit.bounds import one_run_ceiling
from privssl.io import pack_decisions
from privssl.release.methods import DPCL_METHOD_OF_VARIANT, release_method
from privssl.release.tuning_spec import grid_points
from privssl.training.heads import HeadSpec, correct, train_head

pytestmark = pytest.mark.workflow

FIGURES = ["fig1_utility_loss", "fig2_mia", "fig3_frontier", "fig4_roc", "fig5_audit", "link_stealing",
           "graph_protection", "fig_contrastive_privacy", "fig_talos_lambda", "fig_training_time_dp",
           "fig_semileak_attacks", "fig_semileak_steps", "fig_semileak_ablations"]
SEMILEAK_TARGETS = ["fixmatch", "flexmatch", "uda", "supervised", "fixmatch_dpsgd"]
SEMILEAK_REPEATS = range(tiny_config()["semileak"]["repeats"])  # each its own targets, shadows and attack
TINY_GRAPHS = ["sbm", "sbm_shadow"]
PROTECTED_GRAPHS = ["sbm"]  # sbm_shadow: `protect: false`, link stealing's second domain only
FINAL_OUTPUTS = (
    [f"{RESULTS}/{dataset}/{name}" for dataset in ["digits", *PROTECTED_GRAPHS]
     for name in ("splits.json", "sensitivity.json", "utility.csv", "mia.csv")]
    + [f"{RESULTS}/{graph}/splits.json" for graph in TINY_GRAPHS]
    + [f"{RESULTS}/{graph}/link_protection.csv" for graph in PROTECTED_GRAPHS]
    + [f"{RESULTS}/digits/{name}" for name in ("lira.csv", "audit.csv")]
    + [f"{RESULTS}/digits/attack/lira/scores_{method}.parquet"
       for method in ("none", *tiny_config()["protect"]["mechanisms"])]
    + [f"{RESULTS}/digits/attack/scores_{target}.parquet"
       for target in ("none", *tiny_config()["protect"]["mechanisms"])]
    + [f"{RESULTS}/digits/contrastive/{name}" for name in ("splits.json", "target_history.csv", "shadow_history.csv",
                                                           "metrics.csv", "scores.parquet")]
    + [f"{RESULTS}/figures/{fig}.{ext}" for fig in FIGURES for ext in ("png", "pdf")]
    + [f"{RESULTS}/digits/semileak/splits.json"]
    + [f"{RESULTS}/digits/semileak/repeat{r}/{name}" for r in SEMILEAK_REPEATS
       for name in ("metrics.csv", "scores.parquet")]
    + [f"{RESULTS}/digits/semileak/repeat{r}/{role}/{target}.pt" for r in SEMILEAK_REPEATS
       for role in ("target", "shadow") for target in SEMILEAK_TARGETS]
    + [f"{RESULTS}/digits/diagnostics/not_private/semileak/repeat{r}/{name}" for r in SEMILEAK_REPEATS
       for name in ["history.csv", *(f"{role}/{target}_history.csv" for role in ("target", "shadow")
                                     for target in SEMILEAK_TARGETS)]]
    + [f"{RESULTS}/digits/{name}" for name in ("diagnostics/not_private/dpcl_history.csv", "dpcl/accounting.csv",
                                                "dpadapter/results.csv")]
    + [f"{RESULTS}/digits/tuning/{section}.{ext}" for section in ("head", "certified", "dpsgd")
       for ext in ("csv", "json")]
    + [f"{RESULTS}/digest.md"]
    + [f"{RESULTS}/tables/{table}.{ext}" for table in ("table1", "table2", "link_stealing", "contrastive", "semileak",
                                                       "dpadapter", "claims",
                                                       "dpcl_accounting")
       for ext in ("csv", "md")]
)

def assert_png(path: Path) -> None:
    import matplotlib.image

    assert path.stat().st_size > 0, f"{path} is empty"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 0 and image.shape[1] > 0, f"{path}: shape {image.shape}"
    pixels = image.reshape(-1, image.shape[-1])
    # one pixel unlike the first is enough (np.unique over the pixels sorts millions of rows: seconds a figure)
    assert (pixels != pixels[0]).any(), f"{path} is a blank image"


def assert_pdf(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(b"%PDF"), f"{path} is not a PDF"
    assert len(data) > 1000 and b"%%EOF" in data[-1024:], f"{path} looks truncated ({len(data)} bytes)"


def assert_columns(frame: pd.DataFrame, columns: list[str], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    assert not missing, f"{name} lacks columns {missing}; has {list(frame.columns)}"


# --------------------------------------------------------------------------------- fixture

class WorkflowRun:
    """The tiny workflow, run once in a temporary copy of the workflow."""

    def __init__(self, root: Path):
        self.workflow = copy_workflow(root / "workflow")
        self.snakefile = self.workflow / "Snakefile"
        # The working directory is not the workflow's directory, so the Snakefile's relative
        # `configfile: "config.yaml"` is not found there and the tiny config is the whole config;
        # test_splits_follow_the_tiny_config checks the sizes either way.
        self.workdir = root / "run"
        self.config = write_config({**tiny_config(), "data_root": str(root / "data")}, root / "tiny_config.yaml")
        self.expected = tiny_config()

    def snakemake(self, *args: str, check: bool = True, warm: bool = False) -> subprocess.CompletedProcess:
        return run_snakemake(self.workdir, self.config, *args, snakefile=self.snakefile, check=check, warm=warm)

    def path(self, relative: str) -> Path:
        return self.workdir / relative


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> WorkflowRun:
    run = WorkflowRun(tmp_path_factory.mktemp("tiny_workflow"))
    # the warm start (privssl.warm): ~2.5 s of CPU less for each of ~85 jobs, the suite's longest
    # unit; tests/test_warm_start.py checks that a job's outputs are those of a fresh interpreter
    run.snakemake(warm=True)
    return run



# --------------------------------------------------------------------------------- tests

def test_full_run_writes_every_output(tiny_run):
    missing = [f for f in FINAL_OUTPUTS if not tiny_run.path(f).is_file()]
    assert not missing, f"missing outputs: {missing}"
    empty = [f for f in FINAL_OUTPUTS if tiny_run.path(f).stat().st_size == 0]
    assert not empty, f"empty outputs: {empty}"


@pytest.mark.parametrize("figure", FIGURES)
def test_figures_are_images(tiny_run, figure):
    assert_png(tiny_run.path(f"{RESULTS}/figures/{figure}.png"))
    assert_pdf(tiny_run.path(f"{RESULTS}/figures/{figure}.pdf"))


def test_graph_splits_follow_the_tiny_config(tiny_run):
    for graph in TINY_GRAPHS:
        record = json.loads(tiny_run.path(f"{RESULTS}/{graph}/splits.json").read_text())
        entry = tiny_run.expected["graphs"][graph]
        assert {k: len(v) for k, v in record["splits"].items()} == entry["splits"]
        assert record["num_nodes"] == sum(entry["generator"]["block_sizes"])
        drawn = [i for index in record["splits"].values() for i in index]
        assert len(drawn) == len(set(drawn)), f"{graph}: node splits overlap"


def test_link_stealing_tables(tiny_run):
    rows = pd.read_csv(tiny_run.path(f"{RESULTS}/tables/link_stealing_rows.csv"))
    assert_columns(rows, ["dataset", "shadow", "attack", "feature_set", "run", "auc", "precision", "recall", "f1"],
                   "link_stealing_rows.csv")
    runs = tiny_run.expected["link_stealing"]["runs"]
    assert set(rows["run"]) == set(range(runs))
    assert {f"attack-{k}" for k in range(8)} == set(rows["attack"])
    transfer = rows[rows["attack"].isin(["attack-1", "attack-4", "attack-5", "attack-7"])]
    assert set(zip(transfer["dataset"], transfer["shadow"])) == {("sbm", "sbm_shadow"), ("sbm_shadow", "sbm")}
    # homophilous blocks (p_in = 8 p_out): linked nodes have correlated posteriors, so the
    # unsupervised Attack-0 ranks edges above non-edges in every run of both graphs
    attack0 = rows[(rows.attack == "attack-0") & (rows.feature_set == "posteriors") & (rows.distance == "correlation")]
    assert len(attack0) == runs * len(TINY_GRAPHS) and (attack0.auc > 0.6).all(), attack0
    summary = pd.read_csv(tiny_run.path(f"{RESULTS}/tables/link_stealing.csv"))
    assert_columns(summary, ["dataset", "attack", "auc_mean", "auc_std", "thesis_auc"], "link_stealing.csv")
    assert set(summary["dataset"]) == set(TINY_GRAPHS)
    # the summary is the mean and sample standard deviation over runs of the rows
    for graph in TINY_GRAPHS:
        aucs = rows[(rows.dataset == graph) & (rows.attack == "attack-3")].auc
        (cell,) = summary[(summary.dataset == graph) & (summary.attack == "attack-3")].itertuples()
        assert (cell.auc_mean, cell.auc_std) == pytest.approx((aucs.mean(), aucs.std(ddof=1)), rel=1e-12)


def test_a_graph_with_protect_false_serves_link_stealing_only(tiny_run):
    # sbm_shadow is attacked and lends its domain to the transfer attacks, but no encoder is
    # pre-trained and no head fine-tuned, released or attacked on it
    assert tiny_run.path(f"{RESULTS}/sbm_shadow/link/attacks.csv").is_file()
    for part_b in ("pretrain", "finetune", "protect", "sensitivity.json", "utility.csv", "mia.csv",
                   "link_protection.csv", "tuning"):
        assert not tiny_run.path(f"{RESULTS}/sbm_shadow/{part_b}").exists(), part_b
    assert tiny_run.path(f"{RESULTS}/sbm/link_protection.csv").is_file()


def test_link_protection_table(tiny_run):
    protect = tiny_run.expected["protect"]
    for graph in PROTECTED_GRAPHS:
        table = pd.read_csv(tiny_run.path(f"{RESULTS}/{graph}/link_protection.csv"))
        assert_columns(table, ["dataset", "mechanism", "eps", "repeat", "attack", "distance", "auc"],
                       "link_protection.csv")
        assert set(table["mechanism"]) == {"none", *protect["mechanisms"]}
        assert set(table["attack"]) == {"attack-0", "attack-3"}
        noisy = table[(table.mechanism != "none") & (table.attack == "attack-0") & (table.distance == "correlation")]
        assert set(zip(noisy.mechanism, noisy.eps.astype(float), noisy.repeat)) == {
            (m, float(e), r) for m in protect["mechanisms"] for e in protect["eps"] for r in range(protect["repeats"])}
        # the unprotected GNN head's posteriors leak the homophilous graph's links (nothing is claimed for links)
        clean = table[(table.mechanism == "none") & (table.attack == "attack-0") & (table.distance == "correlation")]
        assert len(clean) == 1 and clean.eps.isna().all() and (clean.auc > 0.6).all(), clean


def test_splits_follow_the_tiny_config(tiny_run):
    # --configfile is merged into config.yaml's defaults: the tiny sizes must win.
    splits = json.loads(tiny_run.path(f"{RESULTS}/digits/splits.json").read_text())
    sizes = {name: len(index) for name, index in splits["splits"].items()}
    assert sizes == tiny_run.expected["datasets"]["digits"]["splits"]
    drawn = [i for index in splits["splits"].values() for i in index]
    assert len(drawn) == len(set(drawn)), "splits overlap"


def training_time_releases(config: dict, noise_free: bool = False) -> set[tuple[str, float, int]]:
    """(method, ε, training) of every training-time release (DPCL variants, DPAdapter);
    `noise_free`: with each method's noise-free limit at ε = ∞, one σ = 0 training per repeat."""
    dpcl, dpadapter = config["dpcl"], config["dpadapter"]
    return ({(DPCL_METHOD_OF_VARIANT[v], float(e), r) for v in dpcl["variants"]
             for e in [*dpcl["eps"], *[math.inf] * noise_free] for r in range(dpcl["repeats"])}
            | {("dpadapter", float(e), r) for e in [*dpadapter["eps"], *[math.inf] * noise_free]
               for r in range(dpadapter["repeats"])})


def expected_releases(config: dict, noise_free: bool = False) -> set[tuple[str, float, int]]:
    """(method, ε, draw) of every release the config asks for (DP-SGD: its own draws per ε);
    `noise_free`: with each method's noise-free limit at ε = ∞ (its draws too), the rows
    utility.csv adds."""
    protect = config["protect"]
    return {(m, float(e), r) for m in protect["mechanisms"] for e in [*protect["eps"], *[math.inf] * noise_free]
            for r in range(config["dpsgd"]["repeats"] if m == "dpsgd" else protect["repeats"])} \
        | training_time_releases(config, noise_free)


def test_utility_table(tiny_run):
    table = read_table(tiny_run.path(f"{RESULTS}/digits/utility.csv"))
    assert_columns(table, ["dataset", "mechanism", "eps", "delta", "repeat", "noise_scale", "guarantee_kind",
                           "guarantee", "clean_accuracy", "accuracy", "utility_loss"], "utility.csv")
    rows = list(zip(table["mechanism"], table["eps"].astype(float), table["repeat"]))
    assert len(rows) == len(set(rows))
    assert set(rows) == expected_releases(tiny_run.expected, noise_free=True)
    assert (table["dataset"] == "digits").all()
    # Definition 6.1 against the non-private head of the finetune rule
    clean = json.loads(tiny_run.path(f"{RESULTS}/digits/finetune/metrics.json").read_text())["test_accuracy"]
    assert (table["clean_accuracy"] == clean).all()
    np.testing.assert_allclose(table["utility_loss"], 1 - table["accuracy"] / clean, rtol=0, atol=1e-12)
    # more privacy, more noise: the noise scale falls with eps for every post-hoc method
    posthoc = table[table.mechanism.isin(tiny_run.expected["protect"]["mechanisms"])]
    scale = posthoc.groupby(["mechanism", "eps"])["noise_scale"].first().unstack()
    assert (scale[1.0] > scale[1000.0]).all(), scale
    # every row is compared with the same non-private head
    assert table["clean_accuracy"].nunique() == 1
    # the noise-free limits: no noise, no claim; the ALM family's is the non-private head itself,
    # the certified methods' the certified head (its own metrics)
    limits = table[np.isinf(table.eps)]
    assert (limits.noise_scale == 0).all() and (limits.guarantee_kind == "none").all()
    alm_family = limits[limits.mechanism.isin(["alm", "laplace", "gaussian", "gaussian_analytic"])]
    np.testing.assert_allclose(alm_family.accuracy, clean, rtol=0, atol=1e-12)
    certified = json.loads(tiny_run.path(f"{RESULTS}/digits/certified/metrics.json").read_text())["test_accuracy"]
    np.testing.assert_allclose(limits[limits.mechanism.str.startswith("certified")].accuracy, certified, atol=1e-12)
    # each row's decisions are its accuracy record by record, on the test split; the post-hoc
    # rows carry the clean head's decisions on the same records
    n_test = tiny_run.expected["datasets"]["digits"]["splits"]["test"]
    assert (table.n_test == n_test).all()
    for _, row in table.iterrows():
        assert _decisions(pd.DataFrame([row]), n_test).mean() == pytest.approx(row.accuracy, abs=1e-12)
    post_hoc = table[table.clean_decisions.notna()]
    assert set(post_hoc.mechanism) >= set(tiny_run.expected["protect"]["mechanisms"])
    clean_right = _decisions(post_hoc.head(1).assign(decisions=post_hoc.clean_decisions.iloc[0]), n_test)
    assert post_hoc.clean_decisions.nunique() == 1 and clean_right.mean() == pytest.approx(clean, abs=1e-12)


def test_the_tuning_rules_choice_is_what_the_releases_train_with(tiny_run):
    """Each tuning table scores every grid point on public data; the head, the certified head and
    every DP-SGD ε train with the chosen point (the release files and records say so)."""
    tuning = tiny_run.path(f"{RESULTS}/digits/tuning")
    head = json.loads((tuning / "head.json").read_text())
    released = torch.load(tiny_run.path(f"{RESULTS}/digits/finetune/head.pt"), weights_only=True)
    assert released["spec"] == HeadSpec.from_config(head).__dict__  # the chosen point, its defaults filled in
    table = pd.read_csv(tuning / "head.csv")
    points = grid_points(tiny_run.expected, "head")
    family = ["alm", "laplace", "gaussian", "gaussian_analytic"]
    # every point scored noise-free and by each method of the ALM family at each ε, after its own Δ's noise
    assert sorted(zip(table.point, table.method, table.eps)) == sorted(
        [(p, "head", math.inf) for p in range(len(points))]
        + [(p, m, e) for p in range(len(points)) for m in family for e in tiny_run.expected["protect"]["eps"]])
    worst = table[np.isfinite(table.eps)].groupby("point").regret.max()  # the least worst shortfall is chosen
    assert set(table[table.chosen].point) == {worst.idxmin()} and head == points[worst.idxmin()]
    certified = json.loads((tuning / "certified.json").read_text())
    record = json.loads(tiny_run.path(f"{RESULTS}/digits/certified/sensitivity.json").read_text())
    assert (record["l2"], record["clip_norm"]) == (certified["l2"], certified["clip_norm"])
    dpsgd = json.loads((tuning / "dpsgd.json").read_text())
    release = torch.load(tiny_run.path(f"{RESULTS}/digits/protect/dpsgd.pt"), weights_only=True)
    chosen = {entry["eps"]: entry["spec"] for entry in dpsgd["per_eps"]}
    assert [chosen[e] for e in release["eps"].tolist()] == release["specs"]
    scores = pd.read_csv(tuning / "dpsgd.csv")
    for eps, spec in chosen.items():  # the chosen point is the best scored at its ε
        at = scores[scores.eps == eps]
        assert at[at.chosen].accuracy.item() == at.accuracy.max() and at[at.chosen].lr.item() == spec["lr"]


def test_the_second_baseline_is_the_grids_best_noise_free_head_trained_on_d(tiny_run):
    """finetune/best_head.pt is the point of the tuning grid with the highest noise-free accuracy
    (the first on ties, found here from head.csv's scores), trained on d as the released head is;
    every post-hoc utility row carries its test decisions."""
    table = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/tuning/head.csv"))
    noise_free = table[(table.method == "head") & np.isinf(table.eps)]
    tied = set(noise_free[noise_free.accuracy == noise_free.accuracy.max()].point)
    top = min(tied & set(table[table.chosen].point) or tied)  # on a tie, the chosen head
    spec = HeadSpec.from_config(grid_points(tiny_run.expected, "head")[top])
    best = torch.load(tiny_run.path(f"{RESULTS}/digits/finetune/best_head.pt"), weights_only=True)
    assert best["spec"] == spec.__dict__
    feats = torch.load(tiny_run.path(f"{RESULTS}/digits/finetune/features.pt"), weights_only=True)
    trained = train_head(spec, feats["finetune"], feats["finetune_labels"], feats["n_classes"])
    for name, value in trained.items():
        torch.testing.assert_close(best["params"][name], value, rtol=0, atol=1e-12)
    right = correct(trained, feats["test"], feats["test_labels"])[0].numpy()
    metrics = json.loads(tiny_run.path(f"{RESULTS}/digits/finetune/metrics.json").read_text())
    assert metrics["best_point"] == top and metrics["best_test_accuracy"] == pytest.approx(right.mean(), abs=1e-12)
    utility = read_table(tiny_run.path(f"{RESULTS}/digits/utility.csv"))
    post_hoc = utility[utility.clean_decisions.notna()]
    assert not post_hoc.empty and (post_hoc.best_clean_decisions == pack_decisions(right)).all()
    assert utility[utility.clean_decisions.isna()].best_clean_decisions.isna().all()


def test_guarantee_kinds_follow_the_sensitivity_source(tiny_run):
    table = read_table(tiny_run.path(f"{RESULTS}/digits/utility.csv"))
    kinds = table.groupby(["mechanism", "eps"])["guarantee_kind"].unique().map(lambda k: tuple(k)).to_dict()
    assert all(len(k) == 1 for k in kinds.values()), kinds
    kind = {key: k[0] for key, k in kinds.items()}
    for eps in (1.0, 1000.0):  # the tiny config samples Δ from the reference pool: random DP
        assert kind[("alm", eps)] == kind[("laplace", eps)] == kind[("gaussian_analytic", eps)] == "random_dp"
        assert kind[("gaussian", eps)] == "none"  # the classical calibration proves nothing at ε ≥ 1
        assert kind[("certified_gaussian", eps)] == kind[("dpsgd", eps)] == "approx_dp"
        assert kind[("certified_pure", eps)] == "pure_dp"
    alm = table[(table.mechanism == "alm") & (table.eps == 1.0)].guarantee.iloc[0]
    record = json.loads(tiny_run.path(f"{RESULTS}/digits/sensitivity.json").read_text())
    assert f"(1, γ={record['gamma']:g})-random DP over the reference distribution" in alm
    assert f"{record['k']}-th smallest of {record['m']} sampled pairs" in alm


def test_mia_table(tiny_run):
    table = read_table(tiny_run.path(f"{RESULTS}/digits/mia.csv"))
    assert_columns(table, ["dataset", "mechanism", "eps", "repeat", "attack", "accuracy", "auc", "tpr_at_1pct_fpr"],
                   "mia.csv")
    assert ((table["mechanism"] == "none") & (table["attack"] == "shadow_mlp")).any(), \
        "no shadow-MLP attack on the unprotected head"
    training_time = {m for m, _, _ in training_time_releases(tiny_run.expected)}
    assert set(table["mechanism"]) == {"none", *tiny_run.expected["protect"]["mechanisms"], *training_time}
    shadow = table[table["attack"] == "shadow_mlp"]
    attacked = {(m, float(e), r) for m, e, r in zip(shadow["mechanism"], shadow["eps"], shadow["repeat"])
                if m != "none"}
    assert attacked == expected_releases(tiny_run.expected)
    # balanced: |d| members against as many non-members
    members = tiny_run.expected["datasets"]["digits"]["splits"]["finetune"]
    assert (table.n_members == members).all() and (table.n_nonmembers == members).all()
    # each accuracy interval is the exact Clopper–Pearson interval of its own decision count
    n = table.n_members + table.n_nonmembers
    correct = np.rint(table.accuracy * n)
    np.testing.assert_allclose(correct, table.accuracy * n, atol=1e-6)
    lo = np.where(correct > 0, stats.beta.ppf(0.025, correct, n - correct + 1), 0.0)
    hi = np.where(correct < n, stats.beta.ppf(0.975, correct + 1, n - correct), 1.0)
    np.testing.assert_allclose(table.accuracy_lo, lo, atol=1e-9)
    np.testing.assert_allclose(table.accuracy_hi, hi, atol=1e-9)
    # a threshold at 1 % FPR admits at most 1 % of the non-members
    assert (table.fp_at_1pct_fpr <= np.floor(0.01 * table.n_nonmembers)).all()
    # every release is attacked adaptively and not; the clean head once (its attack is adaptive)
    noisy = shadow[shadow.mechanism != "none"]
    assert noisy.groupby(["mechanism", "eps", "repeat"]).adaptive.agg(set).map(frozenset).eq(
        frozenset({True, False})).all()
    assert set(shadow[shadow.mechanism == "none"].adaptive) == {True}


def assert_scores_are_each_rows(rows: pd.DataFrame, scores: pd.DataFrame, key: list[str], splits: dict,
                                member_split: str, nonmember_split: str) -> None:
    """Per-record scores as a user reads them (pandas): per summary row, its n_members lines of
    records of `member_split` (members) and n_nonmembers of `nonmember_split`, each record once and
    the same records for every row; their AUC (sklearn) the row's; and the row's calls
    (called_member) its accuracy and a threshold on these scores (every record it calls a member
    scores above every one it does not)."""
    from sklearn.metrics import roc_auc_score

    nan_free = {c: -1.0 for c in key if c in ("eps", "lambda")}  # NaN keys (the clean head, λ of supervised)
    groups = dict(list(scores.fillna(nan_free).groupby(key, observed=True)))
    assert len(groups) == len(rows)
    records = None
    for row in rows.fillna(nan_free).to_dict("records"):  # not itertuples: `lambda` is no attribute name
        own = groups[tuple(row[c] for c in key)]
        assert (own.member.sum(), (~own.member).sum()) == (row["n_members"], row["n_nonmembers"])
        assert (own.split.astype(str) == np.where(own.member, member_split, nonmember_split)).all()
        assert own.record[own.member].isin(splits[member_split]).all()
        assert own.record[~own.member].isin(splits[nonmember_split]).all()
        assert not own.record.duplicated().any()
        records = own.record.tolist() if records is None else records
        assert own.record.tolist() == records, "another row scores other records"
        assert roc_auc_score(own.member, own.score) == pytest.approx(row["auc"], abs=1e-12)
        called = own.called_member.to_numpy()
        assert (called == own.member.to_numpy()).mean() == pytest.approx(row["accuracy"], abs=1e-12)
        if called.any() and not called.all():
            assert own.score[called].min() > own.score[~called].max(), tuple(row[c] for c in key)


def test_mia_scores_recompute_every_rows_auc_and_decisions(tiny_run):
    """attack/scores_<target>.parquet of the attack and attack_training_time rules against mia.csv."""
    mia = read_table(tiny_run.path(f"{RESULTS}/digits/mia.csv"))
    splits = json.loads(tiny_run.path(f"{RESULTS}/digits/splits.json").read_text())["splits"]
    evaluated = {}
    for mechanism, rows in mia.groupby("mechanism"):
        scores = pd.read_parquet(tiny_run.path(f"{RESULTS}/digits/attack/scores_{mechanism}.parquet"))
        assert_scores_are_each_rows(rows, scores, ["mechanism", "eps", "repeat", "attack", "adaptive"], splits,
                                    "finetune", "nonmember")
        _, first = next(iter(scores.fillna({"eps": -1.0}).groupby(["eps", "repeat", "attack", "adaptive"],
                                                                    observed=True)))
        evaluated[mechanism] = first.record.tolist()  # every row of the file scores these (checked above)
    # the attack and attack_training_time rules query the same records (the reports pair them)
    assert len({tuple(records) for records in evaluated.values()}) == 1, {m: r[:4] for m, r in evaluated.items()}
    # each line's record is the image scored: the clean head's confidence on that image's features
    # (the encode rule's row i of split s is pool image splits[s][i]), recomputed here
    from privssl.release.protection import head_inputs, released_heads
    from privssl.training.heads import predict_proba, unflatten

    feats = torch.load(tiny_run.path(f"{RESULTS}/digits/finetune/features.pt"), weights_only=True)
    head = torch.load(tiny_run.path(f"{RESULTS}/digits/finetune/head.pt"), weights_only=True)
    clean = released_heads(head, None)
    none = pd.read_parquet(tiny_run.path(f"{RESULTS}/digits/attack/scores_none.parquet"))
    confidence = none[none.attack == "confidence"]
    for split, lines in confidence.groupby("split", observed=True):
        position = {record: i for i, record in enumerate(splits[split])}
        rows_of = torch.tensor([position[r] for r in lines.record])
        probs = predict_proba(unflatten(clean.flat, clean.shapes), head_inputs(feats[split][rows_of], clean.clip_norm))
        expected = probs[0].double().gather(1, feats[f"{split}_labels"][rows_of, None]).squeeze(1)
        np.testing.assert_allclose(lines.score, expected.numpy(), rtol=1e-6)


def test_contrastive_scores_recompute_every_membership_rows_auc_and_decisions(tiny_run):
    metrics = read_table(tiny_run.path(f"{RESULTS}/digits/contrastive/metrics.csv"))
    scores = pd.read_parquet(tiny_run.path(f"{RESULTS}/digits/contrastive/scores.parquet"))
    splits = json.loads(tiny_run.path(f"{RESULTS}/digits/contrastive/splits.json").read_text())["splits"]
    assert_scores_are_each_rows(metrics[metrics.inference != "attribute"], scores,
                                ["target", "lambda", "repeat", "inference", "attack"], splits,
                                "target_train", "target_test")


def test_contrastive_guesses_give_every_attribute_rows_accuracy_and_baseline(tiny_run):
    """attribute_guesses.parquet holds, per attribute row of metrics.csv, a guess per member of the
    target (splits.json's target_train, in its order, with its attribute from splits.json) whose
    agreement with the attribute is the row's accuracy, and the baseline's one guess, whose
    agreement is the row's baseline."""
    metrics = read_table(tiny_run.path(f"{RESULTS}/digits/contrastive/metrics.csv"))
    guesses = pd.read_parquet(tiny_run.path(f"{RESULTS}/digits/contrastive/attribute_guesses.parquet"))
    record = json.loads(tiny_run.path(f"{RESULTS}/digits/contrastive/splits.json").read_text())
    key = ["target", "lambda", "repeat", "inference", "attack"]
    attribute = metrics[metrics.inference == "attribute"]
    groups = dict(list(guesses.assign(**{"lambda": guesses["lambda"].fillna(-1.0)}).groupby(key, observed=True)))
    assert len(groups) == len(attribute) > 0
    for row in attribute.assign(**{"lambda": attribute["lambda"].fillna(-1.0)}).to_dict("records"):
        lines = groups[tuple(row[c] for c in key)]
        assert lines.record.tolist() == record["splits"]["target_train"] and lines.member.all()
        assert lines.attribute.tolist() == record["attribute"]["target_train"]
        assert (lines.guess == lines.attribute).mean() == pytest.approx(row["accuracy"], abs=1e-12)
        assert lines.baseline_guess.nunique() == 1
        assert (lines.baseline_guess == lines.attribute).mean() == pytest.approx(row["baseline"], abs=1e-12)


def test_link_scores_give_every_link_rows_auc_precision_and_recall(tiny_run):
    """Beside every link-stealing table (the graph's own attacks, the transfers, each protected
    target) its per-pair scores: per row, one line per attack-test pair of its run (the same pairs
    for every row of a run), whose Mann–Whitney AUC (computed here) is the row's AUC and whose
    calls give the row's precision and recall; each pair (u < v) is an edge of graph.pt iff its
    `is_edge`, and a run's pairs are the attack-test pairs target.pt draws for that run."""
    checked = 0
    for graph in TINY_GRAPHS:
        link = tiny_run.path(f"{RESULTS}/{graph}/link")
        edge_index = torch.load(tiny_run.path(f"{RESULTS}/{graph}/graph.pt"), weights_only=True)["edge_index"]
        edges = set(map(tuple, edge_index.T.tolist()))
        target = torch.load(link / "target.pt", weights_only=True)
        files = [("attacks.csv", "attack_scores.parquet", "run")]
        files += [(p.name, p.name.replace("transfer_", "transfer_scores_").replace(".csv", ".parquet"), "run")
                  for p in sorted(link.glob("transfer_*.csv"))]
        files += [(p.name, p.name.replace("protected_", "protected_scores_").replace(".csv", ".parquet"), "repeat")
                  for p in sorted(link.glob("protected_*.csv"))]
        for rows_file, scores_file, draw in files:
            rows = read_table(link / rows_file)
            lines = pd.read_parquet(link / scores_file)
            key = [c for c in ("shadow", "mechanism", "eps", "attack", "feature_set", "distance", draw) if c in rows]
            # an empty text key (the graph's own attacks' shadow, an MLP's distance) is NaN in either file
            rows = rows.assign(**{c: rows[c].astype(object).fillna("") for c in ("shadow", "distance") if c in rows})
            lines = lines.assign(**{c: lines[c].astype(object).fillna("") for c in ("shadow", "distance")
                                    if c in lines})
            rows = rows.assign(**({"eps": rows.eps.fillna(-1.0)} if "eps" in rows else {}))
            lines = lines.assign(**({"eps": lines.eps.fillna(-1.0)} if "eps" in lines else {}))
            groups = dict(list(lines.groupby(key, observed=True, sort=False)))
            assert len(groups) == len(rows) > 0, rows_file
            pairs = {}
            for row in rows.to_dict("records"):
                own = groups[tuple(row[c] for c in key)]
                edge, score, called = own.is_edge.to_numpy(), own.score.to_numpy(), own.called_edge.to_numpy()
                auc = stats.mannwhitneyu(score[edge], score[~edge]).statistic / (edge.sum() * (~edge).sum())
                assert auc == pytest.approx(row["auc"], abs=1e-9), (rows_file, row)
                assert (called & edge).sum() / edge.sum() == pytest.approx(row["recall"], abs=1e-12)
                assert (called & edge).sum() / max(called.sum(), 1) == pytest.approx(row["precision"], abs=1e-12)
                run_pairs = pairs.setdefault(row[draw] if draw == "run" else 0, (own.node_u.tolist(),
                                                                                  own.node_v.tolist()))
                assert (own.node_u.tolist(), own.node_v.tolist()) == run_pairs
                assert (own.node_u < own.node_v).all()
                assert edge.tolist() == [(u, v) in edges for u, v in zip(*run_pairs, strict=True)], (rows_file, row)
                if draw == "run":  # the graph's own target's runs (link_protect draws its pairs from its seed)
                    test = ~target["train"][row["run"]]
                    assert [list(p) for p in zip(*run_pairs, strict=True)] == target["pairs"][row["run"]][test].tolist()
                checked += 1
    assert checked > 0


def assert_lira_scores_are_the_rows_decisions(tiny_run, lira: pd.DataFrame, lira_cfg: dict, pool: int) -> None:
    """Each method's scores.parquet holds, per lira.csv row, T × pool lines: every candidate of the
    pool (by its image's index in splits.json) once per target head, the head's membership as the
    heads file records it, and scores whose AUC (Mann–Whitney, computed here) is the row's."""
    splits = json.loads(tiny_run.path(f"{RESULTS}/digits/splits.json").read_text())["splits"]
    candidates = sorted((s, r) for s in lira_cfg["pool"] for r in splits[s])
    heads = torch.load(tiny_run.path(f"{RESULTS}/digits/attack/lira/heads_finetune.pt"), weights_only=True)
    key = ["dataset", "method", "eps", "attack", "adaptive"]
    for method, rows in lira.groupby("method"):
        scores = pd.read_parquet(tiny_run.path(f"{RESULTS}/digits/attack/lira/scores_{method}.parquet"))
        # the clean heads' ε is NaN, which no dict finds: -1 stands for it on both sides
        groups = dict(list(scores.assign(eps=scores.eps.fillna(-1.0)).groupby(key, observed=True)))
        assert len(groups) == len(rows), method
        for row in rows.assign(eps=rows.eps.fillna(-1.0)).itertuples(index=False):
            lines = groups[tuple(getattr(row, c) for c in key)]
            assert len(lines) == lira_cfg["targets"] * pool == row.n_members + row.n_nonmembers
            for target, head in lines.groupby("target"):
                assert sorted(zip(head.split, head.record)) == candidates
            members, others = lines.score[lines.member].to_numpy(), lines.score[~lines.member].to_numpy()
            assert (len(members), len(others)) == (row.n_members, row.n_nonmembers)
            auc = stats.mannwhitneyu(members, others).statistic / (len(members) * len(others))
            assert auc == pytest.approx(row.auc, abs=1e-9), (method, row.attack, row.eps)
    # the clean targets' membership is the heads file's: target t trains on the pool positions of its set
    none = pd.read_parquet(tiny_run.path(f"{RESULTS}/digits/attack/lira/scores_none.parquet"))
    first = none[none.attack == none.attack.iloc[0]]
    sets = heads["sets"][heads["shadows"]:]
    for target, head in first.groupby("target"):
        assert np.flatnonzero(head.member.to_numpy()).tolist() == sets[target].tolist()


def test_lira_scores_and_audit_tables(tiny_run):
    lira_cfg, methods = tiny_run.expected["attack"]["lira"], {"none", *tiny_run.expected["protect"]["mechanisms"]}
    lira = read_table(tiny_run.path(f"{RESULTS}/digits/lira.csv"))
    assert set(lira.method) == methods and set(lira.attack) == set(lira_cfg["attacks"])
    pool = sum(tiny_run.expected["datasets"]["digits"]["splits"][s] for s in lira_cfg["pool"])
    assert ((lira.n_members + lira.n_nonmembers) == lira_cfg["targets"] * pool).all()
    for metric in ("auc", "accuracy", "tpr_at_0.1pct_fpr", "tpr_at_1pct_fpr"):
        assert ((lira[f"{metric}_lo"] <= lira[metric]) & (lira[metric] <= lira[f"{metric}_hi"])).all(), metric
    # each target trains on |d| of the 2|d| candidates: as many member as non-member decisions
    assert (lira.n_members == lira.n_nonmembers).all()
    # RMIA's a, chosen by the attacker from the grid 0, 0.1, …, 1, on its rows only
    rmia = lira.attack.str.startswith("rmia")
    assert rmia.any() and lira.rmia_a[~rmia].isna().all()
    assert np.isin(lira.rmia_a[rmia].round(6), np.round(np.linspace(0, 1, 11), 6)).all()
    # the reference-heads comparison: every reference attack (LiRA, RMIA, the calibrated loss) at 1, 2, 4, … shadows,
    # on the clean heads' decisions
    references = read_table(tiny_run.path(f"{RESULTS}/digits/attack/lira/references.csv"))
    reference_attacks = [a for a in lira_cfg["attacks"] if a.startswith(("lira", "rmia")) or a == "calibrated_loss"]
    assert "calibrated_loss" in reference_attacks
    counts = [2 ** i for i in range(lira_cfg["shadows"].bit_length()) if 2 ** i <= lira_cfg["shadows"]]
    assert sorted(zip(references.attack, references.references)) == sorted(
        (a, k) for a in reference_attacks for k in counts)
    assert (references.n_members == lira[lira.method == "none"].n_members.iloc[0]).all()
    at_all = references[references.references == lira_cfg["shadows"]].set_index("attack").auc
    clean = lira[lira.method == "none"].set_index("attack").auc
    assert np.allclose(at_all, clean[at_all.index])  # all shadows as references: the lira rule's own attack
    assert_lira_scores_are_the_rows_decisions(tiny_run, lira, lira_cfg, pool)
    audit = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/audit.csv"))
    assert_columns(audit, ["dataset", "method", "eps", "delta", "guarantee_kind", "attack", "audit",
                           "eps_lower_bound", "eps_ceiling", "n"], "audit.csv")
    one_run = {f"one_run_{k}" for k in tiny_run.expected["audit"]["one_run"]["kinds"]}
    assert set(audit.audit) == {"hypothesis_test"} | one_run | set(CANARY_AUDITS) | set(CRAFTED_AUDITS)
    # each audit's threat model: the DP-SGD head's canaries white box or final model, the certified heads'
    # crafted pair final model, the others black box
    threat_models = {"hypothesis_test": "black_box", **dict.fromkeys(one_run, "black_box"), **CANARY_AUDITS,
                     **CRAFTED_AUDITS}
    assert dict(zip(audit.audit, audit.threat_model)) == threat_models
    canary = audit[audit.attack == "gradient_canary"]
    assert set(canary.method) == {"dpsgd"} and sorted(canary.eps.unique()) == tiny_run.expected["audit"]["canary"]["eps"]
    crafted = audit[audit.attack == "crafted_pair"]
    assert set(crafted.method) == {m for m in methods if m.startswith("certified")}
    assert (crafted.runs_per_world == tiny_run.expected["audit"]["canary"]["draws"]).all()
    # the pair: one design, within the proof, and the Gaussian's GDP fit below what the pair itself allows
    assert crafted.pair_distance.nunique() == 1 and ((0 < crafted.pair_fraction) & (crafted.pair_fraction < 1)).all()
    gdp = crafted[crafted.audit == "crafted_pair_gdp"]
    assert set(gdp.method) == {"certified_gaussian"} and (gdp.eps_of_pair < gdp.claimed_eps).all()
    assert set(audit.method) == methods
    # no release whose guarantee is proven is audited above the ε it claims (for substitution)
    proven = audit[audit.guarantee_kind.isin(["pure_dp", "approx_dp"])]
    assert len(proven) and (proven.eps_lower_bound <= proven.claimed_eps).all(), proven
    # a one-run row's ceiling is its own audit with all n guesses right
    confidence = tiny_run.expected["audit"]["confidence"]
    for row in audit[audit.audit.str.startswith("one_run")].itertuples():
        assert row.eps_ceiling == pytest.approx(one_run_ceiling(int(row.n), int(row.canaries), row.delta, confidence),
                                                rel=1e-12), row


# the issue's cases: `head -N file` keeps a well-formed table of fewer rows, which the file's own
# grid cannot tell from a whole one when the rows lost are whole values of a key
# (the table's declaration as <module of privssl.artefacts>.<name>, with a part's wildcard value)
CUT_AT_A_LINE_END = [("digits", "contrastive.CONTRASTIVE_TABLE", None), ("digits", "semileak.SEMILEAK_TABLE", 0),
                     ("digits", "image.LIRA_TABLE", None), ("digits", "training_time.DPCL_ACCOUNTING_TABLE", None),
                     ("digits", "training_time.DPADAPTER_TABLE", None), ("digits", "audits.AUDIT_TABLE", None),
                     ("sbm", "graphs.LINK_PROTECTION_TABLE", None), ("sbm", "graphs.LINK_ATTACKS_TABLE", None)]


def declared(name: str):
    """A table's declaration by <module of privssl.artefacts>.<name>."""
    module, name = name.split(".")
    return getattr(importlib.import_module(f"privssl.artefacts.{module}"), name)


@pytest.mark.parametrize("dataset, table, value", CUT_AT_A_LINE_END)
def test_a_table_cut_at_a_line_end_is_refused_naming_the_first_missing_row(tiny_run, tmp_path, dataset, table, value):
    from privssl.artefacts.specs import ArtefactError
    from privssl.artefacts.tables import key_value, load_csv_file, show_key

    table = declared(table)
    schema, path = table.schema, tiny_run.path(table.path(RESULTS, dataset, value))
    expected = table.rows(tiny_run.expected, dataset, *(() if value is None else (value,)))
    whole = load_csv_file(path, schema, expected)  # the run's file is the grid
    lines = path.read_text().splitlines(keepends=True)
    kept = (len(lines) + 1) // 2  # the header and the first half of the rows, as `head -N` leaves them
    cut = tmp_path / path.name
    cut.write_text("".join(lines[:kept]))
    with pytest.raises(ArtefactError) as error:
        load_csv_file(cut, schema, expected)
    columns = list(expected[0])
    lost = {show_key(columns, tuple(map(key_value, row)))
            for row in whole[columns].iloc[kept - 1:].itertuples(index=False, name=None)}
    missing = re.search(r"the row (\{.*?\}) is missing", str(error.value))
    assert str(error.value).startswith(f"{cut}: field '") and missing, error.value
    assert missing.group(1) in lost, (missing.group(1), sorted(lost)[:5])


def declared_tables() -> dict:
    """Every table declaration of the track modules (privssl.artefacts.<track>.<NAME>: a Table)."""
    import pkgutil

    import privssl.artefacts
    from privssl.artefacts.tables import Table

    return {f"{info.name}.{name}": value for info in pkgutil.iter_modules(privssl.artefacts.__path__)
            for name, value in vars(importlib.import_module(f"privssl.artefacts.{info.name}")).items()
            if isinstance(value, Table)}


def test_every_declared_table_is_what_the_dag_writes_there_with_its_declared_rows(tiny_run):
    """Each declaration names files the tiny run wrote (its merged file, and parts matching its
    pattern), and each such file loads with the declared schema and exactly the declared rows of
    the config: a declaration whose path, columns or rows drifted from its writer fails here, as
    the rules' --expect (derived from it) would fail the run."""
    tables = declared_tables()
    assert {"image.MIA_TABLE", "audits.AUDIT_TABLE", "semileak.SEMILEAK_HISTORY_TABLE",
            "graphs.LINK_TRANSFER_TABLE"} <= set(tables), sorted(tables)  # every track's module is searched
    root = tiny_run.path(RESULTS)
    written = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    fixed = {t.file for t in tables.values() if t.file}  # a part's wildcard may match another table's file
    for name, table in tables.items():
        for pattern in filter(None, (table.file, table.part)):
            regex = re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/]+)", re.escape(pattern))
            found = [(m, path) for path in written if (m := re.fullmatch(rf"(?P<dataset>[^/]+)/{regex}", path))
                     and (pattern == table.file or path.split("/", 1)[1] not in fixed)]
            assert found, (name, pattern)
            for match, path in found:
                values = {k: int(v) if v.isdigit() else v for k, v in match.groupdict().items() if k != "dataset"}
                value = (values if len(values) > 1 else next(iter(values.values()))) if values else None
                dataset = match["dataset"]
                rows = table.rows(tiny_run.expected, dataset, *(() if value is None else (value,)))
                table.load(root / path, rows)


def test_the_issues_inconsistent_files_are_refused_by_their_first_reader(tiny_run, tmp_path):
    from privssl import grids
    from privssl.artefacts.audits import AUDIT, one_run_audit_rows
    from privssl.artefacts.contrastive import load_contrastive_models
    from privssl.artefacts.image import load_lira_heads, load_release
    from privssl.artefacts.specs import ArtefactError
    from privssl.artefacts.tables import load_csv_file
    from privssl.artefacts.training_time import DPCL_ACCOUNTING

    config = tiny_run.expected
    # an accountant ε of 55 on a row whose target is ε = 10: the accounting table reads it first
    accounting = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/dpcl/accounting.csv"))
    accounting.loc[0, "eps_rdp_without_replacement"] = 55.0
    accounting.to_csv(tmp_path / "accounting.csv", index=False)
    with pytest.raises(ArtefactError, match="field 'eps_rdp_without_replacement': 55 on line 2"):
        load_csv_file(tmp_path / "accounting.csv", DPCL_ACCOUNTING)
    # a one-run audit with more right guesses than guesses: its merge rule reads it first
    one_run = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/audit/one_run.csv"))
    one_run.loc[1, "correct"] = one_run.loc[1, "n"] + 1
    one_run.to_csv(tmp_path / "one_run.csv", index=False)
    with pytest.raises(ArtefactError, match=re.escape(f"{tmp_path / 'one_run.csv'}: field 'correct'")):
        load_csv_file(tmp_path / "one_run.csv", AUDIT, one_run_audit_rows(config, "digits"))
    # the shadow models copied over the target models: the contrastive attack reads them first
    with pytest.raises(ArtefactError, match="field 'role': 'shadow'"):
        load_contrastive_models(tiny_run.path(f"{RESULTS}/digits/contrastive/shadow_models.pt"), "target",
                                "digits")
    # LiRA heads whose membership sets are all the first head's: the lira rule reads them first
    heads_path = tiny_run.path(f"{RESULTS}/digits/attack/lira/heads_finetune.pt")
    heads = torch.load(heads_path, weights_only=True)
    set_size = config["datasets"]["digits"]["splits"]["finetune"]
    load_lira_heads(heads_path, set_size, grids.lira_heads_record(config, "finetune", heads["seed"]))
    torch.save({**heads, "sets": heads["sets"][:1].expand_as(heads["sets"]).clone()}, tmp_path / "heads.pt")
    with pytest.raises(ArtefactError, match=r"field 'sets\[1\]'"):
        load_lira_heads(tmp_path / "heads.pt", set_size)
    # a release of one method copied over another's
    with pytest.raises(ArtefactError, match="field 'method': 'alm'"):
        load_release(tiny_run.path(f"{RESULTS}/digits/protect/alm.pt"), "laplace",
                     grids.release_record(config, "laplace"))


def test_contrastive_branch_outputs(tiny_run):
    cfg = tiny_run.expected["contrastive"]
    part, aux = cfg["datasets"]["digits"]["part"], cfg["datasets"]["digits"]["aux"]
    splits = json.loads(tiny_run.path(f"{RESULTS}/digits/contrastive/splits.json").read_text())
    assert [len(splits["splits"][s]) for s in ("target_train", "target_test", "shadow_train", "shadow_test", "aux")] \
        == [part] * 4 + [aux]
    public = set(json.loads(tiny_run.path(f"{RESULTS}/digits/splits.json").read_text())["splits"]["pretrain"])
    assert not public & {i for index in splits["splits"].values() for i in index}, "a member was pre-trained on"
    # parity of the digit: the task label is the attribute mod 2 on every image
    assert all(t == a % 2 for s in splits["task"] for t, a in zip(splits["task"][s], splits["attribute"][s]))
    metrics = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/contrastive/metrics.csv"))
    lambdas = sorted({0.0, *map(float, cfg["talos"]["lambdas"])})
    models = metrics[["target", "lambda", "repeat"]].drop_duplicates()
    assert len(models) == cfg["repeats"] * (1 + len(lambdas))
    assert sorted(metrics.loc[metrics.target != "supervised", "lambda"].unique()) == lambdas
    assert set(metrics.attack) == {"nn", "correctness", "confidence", "entropy", "modified_entropy",
                                   "label_only_augmentation", "label_only_boundary", "attribute_mlp"}
    membership = metrics[metrics.inference.isin(["membership", "membership_task"])]
    assert (membership.n == 2 * part).all() and (metrics.loc[metrics.inference == "attribute", "n"] == part).all()
    # membership_task: class: the membership labels are the digits, and every model is attacked
    # twice, on the task's model and on the membership task's, with the same attacks
    assert cfg["datasets"]["digits"]["membership_task"] == "class"
    assert all(splits["membership_task"][s] == splits["attribute"][s] for s in splits["splits"])
    attacks = {inference: set(zip(rows.target, rows["lambda"].fillna(-1), rows.attack))
               for inference, rows in membership.groupby("inference")}
    assert attacks["membership"] == attacks["membership_task"]
    # the task's models fit parity, the membership task's the digits: their fits differ
    queried = membership.groupby("inference").queried_train_accuracy.mean()
    assert queried["membership"] != queried["membership_task"]
    for metric in ("accuracy", "task_accuracy"):
        assert ((metrics[f"{metric}_lo"] <= metrics[metric]) & (metrics[metric] <= metrics[f"{metric}_hi"])).all()
    history = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/contrastive/target_history.csv"))
    assert {"adversary_accuracy", "loss", "contrastive_accuracy"} <= set(history.columns)
    assert len(history) == cfg["repeats"] * len(lambdas) * cfg["fine_tune"]["epochs"]
    table = tiny_run.path(f"{RESULTS}/tables/contrastive.md").read_text()
    for claim in ("membership", "attribute", "talos"):
        assert f"| digits | {claim} |" in table
    assert "| digits | membership | membership inference accuracy, NN attack (nn) (membership task) |" in table


def test_semileak_branch_outputs(tiny_run):
    """Thesis Ch. 3 end to end: the parts and labelled sets, every target's checkpoints, the DP-SGD
    targets' spent ε within their target, the attacks' grid and the claims table."""
    from privssl.artefacts.semileak import SEMILEAK, load_semileak_models, load_semileak_splits, semileak_rows
    from privssl.artefacts.tables import load_csv_file

    cfg = tiny_run.expected["semileak"]
    part, labels = cfg["datasets"]["digits"]["part"], cfg["datasets"]["digits"]["labels"]
    splits = load_semileak_splits(tiny_run.path(f"{RESULTS}/digits/semileak/splits.json"))
    assert [len(splits["splits"][s]) for s in ("target_train", "target_test", "shadow_train", "shadow_test")] \
        == [part] * 4
    assert [len(splits["labelled"][s]) for s in ("target_train", "shadow_train")] == [labels] * 2
    train = cfg["train"]
    checkpoints = list(range(train["checkpoint_every"], train["steps"] + 1, train["checkpoint_every"]))
    for target in SEMILEAK_TARGETS:
        bundle = load_semileak_models(tiny_run.path(f"{RESULTS}/digits/semileak/repeat0/target/{target}.pt"),
                                      "target", target, "digits")
        if target == "fixmatch_dpsgd":
            assert [m["eps"] for m in bundle["models"]] == cfg["defences"]["dpsgd"]["eps"]
            assert all(0 < m["eps_spent"] <= m["eps"] for m in bundle["models"])
            assert bundle["steps"] == cfg["defences"]["dpsgd"]["steps"]
        else:
            assert sorted(bundle["models"][0]["states"]) == checkpoints
    metrics = load_csv_file(tiny_run.path(f"{RESULTS}/digits/semileak/repeat0/metrics.csv"),
                            SEMILEAK, semileak_rows(tiny_run.expected, "digits", 0))
    members = metrics[metrics.target != "supervised"]
    # the unlabelled and labelled members of the SSL targets split the part; every row scores every non-member
    assert set(members.groupby("member_kind").n_members.unique().map(tuple)) == {(part,), (labels,),
                                                                                 (part - labels,)}
    assert (metrics.n_nonmembers == part).all()
    history = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/diagnostics/not_private/semileak/repeat0/history.csv"))
    assert history.privacy.str.startswith("not private").all()
    assert len(history[(history.role == "target") & (history.target == "fixmatch")]) == len(checkpoints)
    table = tiny_run.path(f"{RESULTS}/tables/semileak.md").read_text()
    for claim in ("ada_above_baselines", "ada_unlabelled", "no_overfitting", "views", "early_stopping", "dpsgd"):
        assert f"| {claim} |" in table, claim


def test_semileak_repeats_are_independent_trainings_and_the_table_pools_them(tiny_run):
    """Every repeat trains its own models from its own seed (no two repeats' weights alike), writes
    its own metrics under its repeat, and the claims table counts them as independent trainings."""
    from privssl.artefacts.semileak import load_semileak_models

    assert len(SEMILEAK_REPEATS) >= 2, "the tiny config must exercise the pooling"
    for target in ("fixmatch", "fixmatch_dpsgd"):
        weights = []
        for r in SEMILEAK_REPEATS:
            bundle = load_semileak_models(
                tiny_run.path(f"{RESULTS}/digits/semileak/repeat{r}/target/{target}.pt"), "target", target, "digits")
            states = bundle["models"][-1]["states"]
            weights.append(torch.cat([v.flatten().double() for v in states[max(states)].values()]))
        assert all(not torch.equal(weights[0], w) for w in weights[1:]), target
    for r in SEMILEAK_REPEATS:
        metrics = read_table(tiny_run.path(f"{RESULTS}/digits/semileak/repeat{r}/metrics.csv"))
        assert set(metrics.repeat) == {r}
    table = read_table(tiny_run.path(f"{RESULTS}/tables/semileak.csv"))
    assert (table.trainings == len(SEMILEAK_REPEATS)).all(), table[["claim", "target", "trainings"]]
    assert table.note.str.startswith(f"the mean over {len(SEMILEAK_REPEATS)} trainings").all()


def test_semileak_scores_recompute_every_rows_auc_with_pandas_and_join_the_splits(tiny_run):
    """scores.parquet as a user reads it (pandas, no privssl): every metrics row's AUC again from its
    records' scores (sklearn), and each record an image of the Semi-Leak splits, members from the
    target's training part and non-members from its test part."""
    from sklearn.metrics import roc_auc_score

    metrics = read_table(tiny_run.path(f"{RESULTS}/digits/semileak/repeat0/metrics.csv"))
    scores = pd.read_parquet(tiny_run.path(f"{RESULTS}/digits/semileak/repeat0/scores.parquet"))
    splits = json.loads(tiny_run.path(f"{RESULTS}/digits/semileak/splits.json").read_text())["splits"]
    key = ["target", "eps", "step", "defence", "attack", "similarity", "views", "member_kind"]
    groups = dict(list(scores.fillna({"eps": -1.0, "views": -1.0}).groupby(key)))
    assert len(groups) == len(metrics)
    for row in metrics.fillna({"eps": -1.0, "views": -1.0, "similarity": ""}).itertuples():
        own = groups[tuple(getattr(row, k) for k in key)]
        assert (own.member.sum(), (~own.member).sum()) == (row.n_members, row.n_nonmembers)
        assert roc_auc_score(own.member, own.score) == pytest.approx(row.auc, abs=1e-12)
        assert set(own.record[own.member]) <= set(splits["target_train"])
        assert set(own.record[~own.member]) == set(splits["target_test"])


def test_editing_the_semileak_attack_settings_does_not_retrain_the_targets(tiny_run, tmp_path):
    config = yaml.safe_load(tiny_run.config.read_text())
    config["semileak"]["attack"]["epochs"] += 1
    edited = write_config(config, tmp_path / "edited.yaml")
    proc = run_snakemake(tiny_run.workdir, edited, "-n", snakefile=tiny_run.snakefile)
    assert planned_jobs(proc) == {"semileak_attack": len(SEMILEAK_REPEATS), "semileak_report": 1, "claims": 1,
                                  "digest": 1, "all": 1}


def test_editing_the_certified_grid_retunes_only_the_certified_head(tiny_run, tmp_path):
    # each tuned section's job and each reader of a choice read only their own section's grid
    config = yaml.safe_load(tiny_run.config.read_text())
    config["tuning"]["certified"]["l2"] = [0.01, 0.2]
    edited = write_config(config, tmp_path / "edited.yaml")
    planned = planned_jobs(run_snakemake(tiny_run.workdir, edited, "-n", snakefile=tiny_run.snakefile))
    assert planned["tune"] == len(PROTECTED_GRAPHS) + 1 and planned["certified_head"] == len(PROTECTED_GRAPHS) + 1
    untouched = {"finetune", "shadow", "sensitivity", "protect_dpsgd", "dpcl_train", "dpadapter_train"}
    assert not untouched & set(planned), planned
    assert {"protect", "attack", "lira_heads"} <= set(planned), planned


def test_training_time_branches(tiny_run):
    """Both branches end to end: DPCL's per-epoch history and accounting, DPAdapter's three
    pre-trainings, and each release's claim within its budget, of the kind its sensitivity allows."""
    dpcl, dpadapter = tiny_run.expected["dpcl"], tiny_run.expected["dpadapter"]
    methods = [DPCL_METHOD_OF_VARIANT[v] for v in dpcl["variants"]]
    history = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/diagnostics/not_private/dpcl_history.csv"))
    assert len(history) == len(methods) * len(dpcl["eps"]) * dpcl["repeats"] * dpcl["encoder"]["epochs"]
    assert set(history.method) == set(methods) and (history.objective == dpcl["objective"]).all()
    # privacy spent only grows with the steps, and stays within the release's budget
    for run, epochs in history.groupby(["method", "eps", "repeat"]):
        spent = epochs.sort_values("epoch").eps_spent.to_numpy()
        assert (np.diff(spent) > 0).all() and spent[-1] <= run[1], (run, spent)
    accounting = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/dpcl/accounting.csv"))
    assert (accounting.eps_rdp_without_replacement <= accounting.eps_target * (1 + 1e-9)).all()
    assert (accounting.eps_rdp_without_replacement >= accounting.eps_target * (1 - 2e-3)).all()
    assert (accounting.eps_pld_poisson < accounting.eps_rdp_without_replacement).all()  # tighter, Poisson
    assert set(accounting.role) == {"target", "shadow"}
    utility = read_table(tiny_run.path(f"{RESULTS}/digits/utility.csv"))
    released = utility[np.isfinite(utility.eps)]
    kinds = released.groupby("mechanism").guarantee_kind.unique().map(tuple).to_dict()
    assert kinds["dpcl_naive"] == kinds["dpadapter"] == ("approx_dp",) and kinds["dpcl"] == ("heuristic_dp",)
    trained = released[released.mechanism.isin([*methods, "dpadapter"])]
    assert (trained.eps_spent <= trained.eps * (1 + 1e-9)).all()
    assert trained.guarantee.str.contains("substitution of one record").all()
    # each method's noise-free limit: one σ = 0 training per repeat, claiming nothing, never released
    limits = utility[np.isinf(utility.eps) & utility.mechanism.isin([*methods, "dpadapter"])]
    repeats = {**{m: dpcl["repeats"] for m in methods}, "dpadapter": dpadapter["repeats"]}
    assert limits.groupby("mechanism").repeat.apply(sorted).to_dict() == {m: list(range(r)) for m, r in repeats.items()}
    assert (limits.noise_multiplier == 0).all() and (limits.guarantee_kind == "none").all()
    for method in repeats:
        release = torch.load(tiny_run.path(f"{RESULTS}/digits/{'dpadapter' if method == 'dpadapter' else 'dpcl'}/"
                                           f"{method}.pt"), weights_only=True)
        assert np.isfinite(release["eps"].numpy()).all()  # the limit is not a release the attacks see
    results = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/dpadapter/results.csv"))
    assert set(zip(results.pretraining, results.rho)) == {("standard", 0.0)} | {
        (kind, float(rho)) for kind in ("sam", "dpadapter") for rho in dpadapter["radii"]}
    assert len(results) == (1 + 2 * len(dpadapter["radii"])) * len(dpadapter["eps"]) * dpadapter["repeats"]
    # each repeat is its own pre-training, seeded alike for every kind (paired), apart between repeats
    seeds = results.groupby("repeat").pretraining_seed.unique()
    assert dpadapter["repeats"] > 1 and (seeds.map(len) == 1).all() and seeds.map(tuple).nunique() == len(seeds)
    pretrained = results.groupby(["pretraining", "rho"]).pretrain_accuracy.nunique()
    assert (pretrained > 1).any(), "every repeat fine-tuned the same pre-trained network"
    table = tiny_run.path(f"{RESULTS}/tables/dpadapter.md").read_text()
    assert "DPAdapter ≥ vanilla SAM ≥ standard" in table and "| digits |" in table
    assert "paper settings" in set(pd.read_csv(tiny_run.path(f"{RESULTS}/tables/dpcl_accounting.csv")).source)


def _decisions(rows: pd.DataFrame, records: int) -> np.ndarray:
    """The rows' packed decisions as a (draws, records) 0/1 array, decoded here with numpy alone."""
    return np.stack([np.unpackbits(np.frombuffer(bytes.fromhex(cell), np.uint8))[:records]
                     for cell in rows.sort_values("repeat").decisions])


def test_claims_ledger_carries_every_branch_table_row(tiny_run):
    """The ledger holds the contrastive and semi-supervised tables' rows with their numbers and one
    DPAdapter pair per ε; its ALM rows are recomputed here from utility.csv's and mia.csv's
    per-record decisions: the values are means over records and draws, n counts the test records
    (not records × draws), and the difference is ALM's utility loss minus the other method's:
    (accuracy_other − accuracy_ALM) / the clean head's accuracy on the same records."""
    ledger = pd.read_csv(tiny_run.path(f"{RESULTS}/tables/claims.csv"), keep_default_na=False, na_values=[""])
    # no claim of the catalogue vanishes: one the tiny config does not measure is "not tested"
    assert set(ledger.claim) == set(pd.read_csv(REPO / "resources" / "claims.csv").claim)
    measured = ledger[ledger.verdict != "not tested"]
    for table, prefix in (("contrastive", ("contrastive_", "talos_")), ("semileak", ("semileak_",))):
        branch = pd.read_csv(tiny_run.path(f"{RESULTS}/tables/{table}.csv"))
        rows = measured[measured.claim.str.startswith(prefix)]
        assert len(rows) == len(branch), table
        assert np.allclose(rows.value.to_numpy(), branch.value_a.to_numpy()), table
        assert np.allclose(rows.difference.to_numpy(), branch.difference.to_numpy()), table
        # the branch's verdict, but a reproduction on a model that does not leak is not one, and none of
        # these claims about a training procedure gets a verdict on the tiny config's one training per arm
        assert (rows.verdict == "unresolved").all(), table
        not_reached = rows.regime.to_numpy() == "not reached"
        assert (rows.unresolved_because.to_numpy()[not_reached] == "regime not reached").all(), table
        assert (rows.unresolved_because.to_numpy()[~not_reached] == "fewer than 3 trainings per arm").all(), table
        decided = branch.verdict.to_numpy() != "unresolved"
        assert all(f"(the records alone read {v})" in note for v, note in zip(branch.verdict[decided],
                                                                              rows.note[decided])), table
    dpadapter = pd.read_csv(tiny_run.path(f"{RESULTS}/tables/dpadapter.csv"))
    assert len(ledger[ledger.claim == "dpadapter_above_sam"]) == dpadapter.eps.nunique()
    assert {"alm_unprotected_vulnerable", "alm_protects_to_chance", "alm_loss_below_laplace",
            "dpcl_paper_sigmas_eps_1000"} <= set(ledger.claim)
    utility = read_table(tiny_run.path(f"{RESULTS}/digits/utility.csv"))
    repeats, n_test = tiny_run.expected["protect"]["repeats"], tiny_run.expected["datasets"]["digits"]["splits"]["test"]
    below = ledger[ledger.claim == "alm_loss_below_laplace"]
    assert len(below) == len(tiny_run.expected["protect"]["eps"])
    for row in below.itertuples():
        eps = float(row.setting.split("= ")[1])
        alm, laplace = (_decisions(utility[(utility.mechanism == m) & (utility.eps == eps)], n_test)
                        for m in ("alm", "laplace"))
        assert alm.shape == laplace.shape == (repeats, n_test)
        (clean,) = {cell for cell in utility[utility.mechanism == "alm"].clean_decisions}
        clean_accuracy = np.unpackbits(np.frombuffer(bytes.fromhex(clean), np.uint8))[:n_test].mean()
        assert row.difference == pytest.approx((laplace.mean() - alm.mean()) / clean_accuracy, abs=1e-12)
        assert (row.n, row.draws) == (n_test, repeats)
        assert row.difference_lo <= row.difference <= row.difference_hi
    mia = read_table(tiny_run.path(f"{RESULTS}/digits/mia.csv"))
    unprotected = mia[(mia.mechanism == "none") & (mia.attack == "shadow_mlp") & mia.adaptive]
    vulnerable = ledger[ledger.claim == "alm_unprotected_vulnerable"].iloc[0]
    queried = int(unprotected.n_members.iloc[0] + unprotected.n_nonmembers.iloc[0])
    calls = pd.read_parquet(tiny_run.path(f"{RESULTS}/digits/attack/scores_none.parquet"))
    calls = calls[(calls.attack == "shadow_mlp") & calls.adaptive]  # its per-record calls, read with pandas
    assert len(calls) == queried
    assert vulnerable.value == pytest.approx((calls.called_member == calls.member).mean(), abs=1e-12)
    assert vulnerable.value == pytest.approx(unprotected.accuracy.iloc[0], abs=1e-12)
    assert (vulnerable.n, vulnerable.draws) == (queried, 1)


def test_sensitivity_and_table1(tiny_run):
    record = json.loads(tiny_run.path(f"{RESULTS}/digits/sensitivity.json").read_text())
    sens = tiny_run.expected["sensitivity"]
    assert record["sampling"] == "population" and record["m"] == sens["m"]
    assert len(record["distances_l1"]) == sens["m"]
    assert record["delta1"] == sorted(record["distances_l1"])[record["k"] - 1] > 0
    splits = tiny_run.expected["datasets"]["digits"]["splits"]
    assert record["pool"]["size"] == splits["reference"] and record["finetune_size"] == splits["finetune"]
    table = pd.read_csv(tiny_run.path(f"{RESULTS}/tables/table1.csv"))
    assert list(table["dataset"]) == ["digits"]
    row = table.iloc[0]
    assert row["delta1"] == pytest.approx(record["delta1"], rel=1e-12)
    assert row["delta2"] == pytest.approx(record["delta2"], rel=1e-12)
    assert (row["m"], row["k"], row["sampling"]) == (sens["m"], record["k"], "population")
    assert (row["|D|"], row["|d|"]) == (splits["pretrain"], splits["finetune"])
    assert "digits" in tiny_run.path(f"{RESULTS}/tables/table1.md").read_text()


def test_certified_head_and_its_proven_bound(tiny_run):
    record = json.loads(tiny_run.path(f"{RESULTS}/digits/certified/sensitivity.json").read_text())
    cfg, n = tiny_run.expected["certified"], tiny_run.expected["datasets"]["digits"]["splits"]["finetune"]
    lipschitz = np.sqrt(2) * np.sqrt(cfg["clip_norm"] ** 2 + 1)
    assert record["delta2"] == pytest.approx(2 * lipschitz / (n * cfg["l2"]) + 2 * cfg["tolerance"] / cfg["l2"])
    metrics = json.loads(tiny_run.path(f"{RESULTS}/digits/certified/metrics.json").read_text())
    assert metrics["gradient_norm"] <= cfg["tolerance"]


def test_table2_has_every_method(tiny_run):
    table = pd.read_csv(tiny_run.path(f"{RESULTS}/tables/table2.csv"))
    assert set(tiny_run.expected["protect"]["mechanisms"]) <= set(table["method"])
    assert "guarantee_kind" in table.columns


def test_second_run_has_nothing_to_do(tiny_run):
    assert_nothing_to_do(tiny_run.workdir, tiny_run.config, tiny_run.snakefile)


def test_moved_project_has_nothing_to_do(tiny_run, tmp_path):
    """A finished project copied elsewhere (another mount point, a colleague's checkout): the
    workflow and its results move together, and nothing is re-run."""
    moved = tmp_path / "elsewhere"
    for part in ("workflow", "run"):
        shutil.copytree(tiny_run.workflow.parent / part, moved / part, symlinks=True)  # copy2 keeps mtimes
    assert_nothing_to_do(moved / "run", tiny_run.config, moved / "workflow" / "Snakefile")


def test_editing_the_contrastive_attack_settings_does_not_retrain_the_models(tiny_run, tmp_path):
    # the training rule's params hold only the training keys: new attack settings re-attack the
    # trained targets and shadows and redraw the report, nothing else (a dry run: nothing is written)
    config = yaml.safe_load(tiny_run.config.read_text())
    config["contrastive"]["attacks"]["label_only"]["steps"] += 1
    edited = write_config(config, tmp_path / "edited.yaml")
    proc = run_snakemake(tiny_run.workdir, edited, "-n", snakefile=tiny_run.snakefile)
    assert planned_jobs(proc) == {"contrastive_attack": 1, "contrastive_report": 1, "claims": 1, "digest": 1,
                                  "all": 1}


def dry_run_after_editing(tiny_run, relative: str, old: str, new: str) -> dict[str, int]:
    """The jobs a dry run plans after one edit of the copy's file `relative`; the file is restored."""
    path = tiny_run.workflow / relative
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {relative}"
    path.write_text(text.replace(old, new))
    try:
        return planned_jobs(tiny_run.snakemake("-n"))
    finally:
        path.write_text(text)


# the rules that train before any release: pre-training, features, the released head and its
# sensitivity, the attacks' shadow heads, the other branches' targets, the graph track's encoders
TRAINING_RULES = {"data", "pretrain", "encode", "finetune", "sensitivity", "shadow", "contrastive_train",
                  "semileak_train", "dpcl_train", "dpadapter_train", "graph_data", "graph_pretrain", "graph_encode",
                  "link_target"}
# the rules that train with the head's tuned settings (rule `tune`, section head)
HEAD_RULES = {"finetune", "sensitivity", "shadow", "dpcl_train", "dpadapter_train"}
REPORT_RULES = {"figures", "table1", "table2", "graph_figures", "audit_figures", "contrastive_report",
                "semileak_report", "training_time_report", "link_table", "claims", "digest", "all"}


def test_halving_the_alm_noise_reruns_the_heads_chosen_for_it_and_not_the_encoders(tiny_run):
    # the noise of every output-perturbation release is one function (privssl.release.mechanisms)
    planned = dry_run_after_editing(tiny_run, "src/privssl/release/mechanisms.py",
                                    "return torch.log(u) - torch.log1p(-u)",
                                    "return 0.5 * (torch.log(u) - torch.log1p(-u))")
    assert {"protect", "attack", "lira", "audit_one_run", "figures", "claims"} <= set(planned), planned
    # The head's and the certified head's settings are both chosen by their accuracy after noise:
    # both choices are redone on every dataset, and what trains with them retrains (the released
    # heads, the sampler, the shadows, LiRA's heads); the encoders and the other branches do not.
    # DPCL and DPAdapter retrain too: they read the shadow rule's file (their adaptive attacker's
    # records) and the clean head's accuracy (their utility loss), both rewritten.
    assert not (TRAINING_RULES - HEAD_RULES) & set(planned), planned
    datasets = len(PROTECTED_GRAPHS) + 1
    assert planned["tune"] >= 2 * datasets and planned["lira_heads"] == 2, planned
    assert planned["certified_head"] == planned["finetune"] == planned["sensitivity"] == datasets, planned


def test_a_docstring_or_comment_edit_of_the_library_reruns_nothing(tiny_run):
    assert dry_run_after_editing(tiny_run, "src/privssl/release/mechanisms.py",
                                 "u = u.clamp(min=torch.finfo(dtype).tiny)  # rand is in [0, 1): only 0 must go",
                                 "u = u.clamp(min=torch.finfo(dtype).tiny)  # edited: torch.rand is in [0, 1)") == {}
    assert dry_run_after_editing(tiny_run, "src/privssl/release/mechanisms.py", '"""Unit-scale noise of `shape`',
                                 '"""Unit-scale noise (edited docstring) of `shape`') == {}


def test_editing_the_image_splits_reruns_everything_downstream_of_them(tiny_run):
    planned = dry_run_after_editing(tiny_run, "src/privssl/data/splits.py",
                                    "def make_splits(dataset: str, labels, sizes: dict[str, int], seed: int) -> "
                                    "dict[str, list[int]]:\n",
                                    "def make_splits(dataset: str, labels, sizes: dict[str, int], seed: int) -> "
                                    "dict[str, list[int]]:\n    seed = int(seed)\n")
    # what Snakemake itself schedules downstream of the splits job (the graphs and the Semi-Leak
    # branch draw their own splits)
    assert planned == planned_jobs(tiny_run.snakemake("-n", "--forcerun", "data"))
    assert planned["data"] == 1 and {"pretrain", "contrastive_train", "figures"} <= set(planned), planned


def test_editing_a_report_module_reruns_only_figures_and_tables(tiny_run):
    planned = dry_run_after_editing(tiny_run, "src/privssl/reports/plotting.py", "SAVE_DPI = 150", "SAVE_DPI = 120")
    assert "figures" in planned and set(planned) <= REPORT_RULES, sorted(set(planned) - REPORT_RULES)


def test_editing_the_plot_script_reruns_only_the_figures(tiny_run):
    # Kept last of the tests on `tiny_run`; it ends with the workflow complete again anyway.
    # Snakemake 9 re-runs a job only when an input's content changed (a bare `touch` keeps its
    # checksum), so the copy's script gets a harmless extra line.
    plot_script = tiny_run.workflow / "scripts" / "plot_figures.py"
    plot_script.write_text(plot_script.read_text() + "\n# edited by tests/test_workflow.py\n")
    assert planned_jobs(tiny_run.snakemake("-n")) == {"figures": 1, "all": 1}

    figures = [f for f in FINAL_OUTPUTS if re.search(r"/figures/fig[123]_", f)]  # the `figures` rule's
    others = [f for f in FINAL_OUTPUTS if f not in figures]
    before = {f: tiny_run.path(f).stat().st_mtime_ns for f in FINAL_OUTPUTS}
    tiny_run.snakemake()
    after = {f: tiny_run.path(f).stat().st_mtime_ns for f in FINAL_OUTPUTS}
    assert all(after[f] > before[f] for f in figures), "figures not rewritten"
    assert all(after[f] == before[f] for f in others), "outputs other than the figures were rewritten"
    assert_nothing_to_do(tiny_run.workdir, tiny_run.config, tiny_run.snakefile)


DIGEST_TABLES = ("claims", "table1", "table2", "semileak", "contrastive", "dpcl_accounting", "dpadapter",
                 "link_stealing")


def test_digest_shows_every_table_as_its_report_wrote_it_and_quotes_the_files_of_the_run(tiny_run):
    """The digest builds every report table again from that table's sources, and each comes out as
    its own report rule wrote it (another script, the same sources: a source or an argument the
    digest got wrong would differ); it copies its figures from the files it names: the head's
    accuracy from metrics.json, each method's mean accuracy over draws."""
    text = tiny_run.path(f"{RESULTS}/digest.md").read_text()
    for table in DIGEST_TABLES:
        written = tiny_run.path(f"{RESULTS}/tables/{table}.md").read_text().strip()
        caption = f"*Built from this run's checked inputs, as `{RESULTS}/tables/{table}.md` is.*"
        assert f"{caption}\n\n{written}" in text, table
    metrics = json.loads(tiny_run.path(f"{RESULTS}/digits/finetune/metrics.json").read_text())
    assert f"test accuracy {metrics['test_accuracy']:.3f}" in text
    utility = read_table(tiny_run.path(f"{RESULTS}/digits/utility.csv"))
    n_test = tiny_run.expected["datasets"]["digits"]["splits"]["test"]
    releases = text.split("## Release methods")[1].split("\n## ")[0]
    for method, rows in utility.groupby("mechanism"):
        (line,) = [line for line in releases.splitlines() if line.startswith(f"| `{method}` | ")]
        for eps, draws in rows.groupby("eps"):  # the mean over draws of the same test records, (draws)
            if release_method(method).release == "output_perturbation" and np.isinf(eps):
                draws = draws.head(1)  # a post-hoc release's noise-free head is one head
            assert f"| {_decisions(draws, n_test).mean():.3f} [" in line, (method, eps, line)
            assert f"] ({len(draws)}) |" in line, (method, eps, line)


def rule_command(tiny_run, rule: str, target: str) -> list[str]:
    """The words of `rule`'s command for `target`, as the dry run of a forced rerun prints it."""
    proc = tiny_run.snakemake("-n", "-p", "--forcerun", rule, "--until", rule, target)
    (command,) = [line.removeprefix("Shell command: ") for line in proc.stdout.splitlines()
                  if line.startswith("Shell command: ") and re.search(rf"/logs/{rule}(_repeat\d+)?\.log", line)
                  and target in line]
    return shlex.split(command.rsplit(" 2> ", 1)[0])  # without the log redirection


def run_words(tiny_run, words: list[str]) -> subprocess.CompletedProcess:
    env = {**snakemake_env(), "PYTHONPATH": str(tiny_run.workflow / "src")}
    return subprocess.run(words, cwd=tiny_run.workdir, env=env, capture_output=True, text=True, timeout=300)


def replaced(words: list[str], old: str, new: Path) -> list[str]:
    assert words.count(old) == 1, old
    return [str(new) if w == old else w for w in words]


def test_the_digest_reads_no_table_of_another_rule_and_refuses_a_cut_source(tiny_run, tmp_path):
    """A row cut from tables/semileak.md used to reach the digest. The digest's command names no
    report table at all, and a row cut from one of the sources it builds them from (the Semi-Leak
    metrics) is refused, naming the file, before anything is written."""
    digest = f"{RESULTS}/digest.md"
    words = rule_command(tiny_run, "digest", digest)
    assert not [w for w in words if "/tables/" in w], words
    metrics = tiny_run.path(f"{RESULTS}/digits/semileak/repeat0/metrics.csv").read_text().splitlines(keepends=True)
    (tmp_path / "metrics.csv").write_text("".join(metrics[:-1]))
    words = replaced(replaced(words, f"{RESULTS}/digits/semileak/repeat0/metrics.csv", tmp_path / "metrics.csv"),
                     digest, tmp_path / "digest.md")
    words = [w.replace(f'"{RESULTS}/digits/semileak/repeat0/metrics.csv"', json.dumps(str(tmp_path / "metrics.csv")))
             for w in words]  # its grid in --expect, under the new path
    proc = run_words(tiny_run, words)
    assert proc.returncode != 0 and not (tmp_path / "digest.md").exists()
    (last,) = [line for line in proc.stderr.splitlines() if line.strip()][-1:]
    assert str(tmp_path / "metrics.csv") in last and "is missing" in last, proc.stderr[-2000:]


def test_semileak_attack_checks_every_input_before_it_attacks(tiny_run, tmp_path):
    words = rule_command(tiny_run, "semileak_attack", f"{RESULTS}/digits/semileak/repeat0/metrics.csv")
    words = replaced(replaced(words, f"{RESULTS}/digits/semileak/repeat0/metrics.csv", tmp_path / "metrics.csv"),
                     f"{RESULTS}/digits/diagnostics/not_private/semileak/repeat0/history.csv", tmp_path / "history.csv")
    # FlexMatch's files copied over FixMatch's, both roles: each records the kind its path does not name
    copied = words
    for role in ("target", "shadow"):
        (tmp_path / role).mkdir()
        shutil.copy(tiny_run.path(f"{RESULTS}/digits/semileak/repeat0/{role}/flexmatch.pt"),
                    tmp_path / role / "fixmatch.pt")
        copied = replaced(copied, f"{RESULTS}/digits/semileak/repeat0/{role}/fixmatch.pt",
                          tmp_path / role / "fixmatch.pt")
    proc = run_words(tiny_run, copied)
    assert proc.returncode != 0
    assert f"{tmp_path / 'target' / 'fixmatch.pt'}: field 'target': 'flexmatch'" in proc.stderr, proc.stderr[-2000:]
    # a history cut at a line end, in place (the rule's grid names its path): refused before any
    # model is queried; the run's file is put back as it was, times included
    history = tiny_run.path(f"{RESULTS}/digits/diagnostics/not_private/semileak/repeat0/target/uda_history.csv")
    text, stat = history.read_text(), history.stat()
    history.write_text("".join(text.splitlines(keepends=True)[:-1]))
    try:
        proc = run_words(tiny_run, words)
    finally:
        history.write_text(text)
        os.utime(history, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert proc.returncode != 0 and "uda_history.csv: field" in proc.stderr, proc.stderr[-2000:]
    assert "queried" not in proc.stderr and not (tmp_path / "metrics.csv").exists(), proc.stderr[-2000:]
