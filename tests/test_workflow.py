"""The Snakemake workflow end to end, on the tiny config of tests/data/tiny_config.yaml.

Snakemake runs as a subprocess with the test interpreter's bin directory first on PATH (the
rules' shell commands call `python`). Every run works in a temporary directory, so the
repository's own results/ and .snakemake/ are never touched. One session-scoped fixture runs
the full tiny workflow once, in a temporary copy of the workflow (so a test can edit a script
of the copy), and the tests that inspect its outputs share it.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from privssl.config import ConfigError, validate_config
from privssl.release_methods import DPCL_METHOD_OF_VARIANT, PROTECT_METHODS

pytestmark = pytest.mark.workflow

REPO = Path(__file__).resolve().parents[1]
TINY_CONFIG = Path(__file__).resolve().parent / "data" / "tiny_config.yaml"
SCHEMA = REPO / "schemas" / "config.schema.yaml"
SHARED_DATA = REPO.parent / "shared" / "data"
WORKFLOW_FILES = ["Snakefile", "config.yaml", "rules", "scripts", "schemas", "src", "report", "envs", "benchmarks",
                  "resources"]
RESULTS = "results"
FIGURES = ["fig1_utility_loss", "fig2_mia", "fig3_frontier", "fig4_roc", "fig5_audit", "link_stealing",
           "graph_protection", "fig_contrastive_privacy", "fig_talos_lambda", "fig_training_time_dp"]
TINY_GRAPHS = ["sbm", "sbm_shadow"]
FINAL_OUTPUTS = (
    [f"{RESULTS}/{dataset}/{name}" for dataset in ["digits", *TINY_GRAPHS]
     for name in ("splits.json", "sensitivity.json", "utility.csv", "mia.csv")]
    + [f"{RESULTS}/{graph}/link_protection.csv" for graph in TINY_GRAPHS]
    + [f"{RESULTS}/digits/{name}" for name in ("lira.csv", "roc.csv.gz", "audit.csv")]
    + [f"{RESULTS}/digits/contrastive/{name}" for name in ("splits.json", "target_history.csv", "shadow_history.csv",
                                                           "metrics.csv")]
    + [f"{RESULTS}/figures/{fig}.{ext}" for fig in FIGURES for ext in ("png", "pdf")]
    + [f"{RESULTS}/digits/{name}" for name in ("dpcl/history.csv", "dpcl/accounting.csv", "dpadapter/results.csv")]
    + [f"{RESULTS}/tables/{table}.{ext}" for table in ("table1", "table2", "link_stealing", "contrastive", "dpadapter",
                                                       "dpcl_accounting")
       for ext in ("csv", "md")]
)
RUN_TIMEOUT_S = 600


# --------------------------------------------------------------------------------- helpers

def tiny_config() -> dict:
    return yaml.safe_load(TINY_CONFIG.read_text())


def write_config(config: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def snakemake_env() -> dict:
    """The environment of a snakemake subprocess: this interpreter's bin directory first on PATH,
    so the rules' `python` is the one with the project's packages; no profile from outside."""
    env = os.environ.copy()
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env.pop("SNAKEMAKE_PROFILE", None)
    return env


def snakemake_command(workdir: Path, configfile: Path | None = None, *args: str,
                      snakefile: Path = REPO / "Snakefile") -> list[str]:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--directory", str(workdir),
           "--cores", "2", *args]
    # --configfile takes several paths: it goes last, so that no target is read as a config file
    return cmd + (["--configfile", str(configfile)] if configfile is not None else [])


def run_snakemake(workdir: Path, configfile: Path | None = None, *args: str, snakefile: Path = REPO / "Snakefile",
                  check: bool = True, timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run snakemake to completion; with `check`, fail the test with its output if it fails."""
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(snakemake_command(workdir, configfile, *args, snakefile=snakefile), env=snakemake_env(),
                          cwd=workdir, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        pytest.fail(f"snakemake {' '.join(args)} failed (exit {proc.returncode}):\n"
                    f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}")
    return proc


def output_of(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


def planned_jobs(proc: subprocess.CompletedProcess) -> dict[str, int]:
    """The 'Job stats' table of a dry run as {rule: count}; empty when there is nothing to do."""
    lines = output_of(proc).splitlines()
    try:
        start = lines.index("Job stats:")
    except ValueError:
        return {}
    jobs = {}
    for line in lines[start + 1:]:
        fields = line.split()
        if not fields or fields == ["job", "count"] or set(line.strip()) <= {"-", " "}:
            continue
        if fields[0] == "total":
            break
        assert len(fields) == 2 and fields[1].isdigit(), f"unexpected line in the job stats table: {line!r}"
        jobs[fields[0]] = int(fields[1])
    return jobs


def assert_nothing_to_do(workdir: Path, configfile: Path, snakefile: Path) -> None:
    proc = run_snakemake(workdir, configfile, "-n", snakefile=snakefile)
    assert "Nothing to be done" in output_of(proc), output_of(proc)[-3000:]
    assert planned_jobs(proc) == {}


def copy_workflow(dest: Path) -> Path:
    """A copy of the workflow's files (no results, no .snakemake) to run and edit freely."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    for name in WORKFLOW_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


def assert_png(path: Path) -> None:
    import matplotlib.image

    assert path.stat().st_size > 0, f"{path} is empty"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 0 and image.shape[1] > 0, f"{path}: shape {image.shape}"
    pixels = image.reshape(-1, image.shape[-1])
    assert len(np.unique(pixels, axis=0)) > 1, f"{path} is a blank image"


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

    def snakemake(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run_snakemake(self.workdir, self.config, *args, snakefile=self.snakefile, check=check)

    def path(self, relative: str) -> Path:
        return self.workdir / relative


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> WorkflowRun:
    run = WorkflowRun(tmp_path_factory.mktemp("tiny_workflow"))
    run.snakemake()
    return run


# --------------------------------------------------------------------------------- tests

def test_tiny_config_is_valid():
    validate_config(tiny_config(), SCHEMA)


def test_dry_run_of_default_config_lists_every_stage(tmp_path):
    # The Snakefile's `configfile: "config.yaml"` is looked up in the working directory, so a run
    # in another --directory names the repository's config.yaml explicitly.
    proc = run_snakemake(tmp_path / "run", REPO / "config.yaml", "-n")
    jobs = planned_jobs(proc)
    expected = {"data", "pretrain", "encode", "finetune", "certified_head", "sensitivity", "protect", "protect_dpsgd",
                "attack", "shadow", "figures", "table1", "table2", "graph_data", "graph_pretrain", "graph_encode", "link_target", "link_steal",
                "link_transfer", "link_table", "link_protect", "graph_figures", "lira_heads", "lira", "audit_one_run",
                "membership_tables", "audit_figures", "contrastive_data", "contrastive_train", "contrastive_attack",
                "contrastive_report", "dpcl_train", "dpadapter_train", "attack_training_time", "training_time_report"}
    assert expected <= set(jobs), f"dry run lacks rules {sorted(expected - set(jobs))}: {jobs}"
    default = yaml.safe_load((REPO / "config.yaml").read_text())
    n_mechanisms, n_images, n_graphs = (len(default["protect"]["mechanisms"]), len(default["datasets"]),
                                        len(default["graphs"]))
    assert n_graphs >= 2, "the default config should exercise the transfer attacks"
    assert (jobs["data"], jobs["graph_data"], jobs["graph_pretrain"]) == (n_images, n_graphs, n_graphs)
    # the shared rules serve images and graphs alike; every method of the registry runs by default
    assert set(default["protect"]["mechanisms"]) == set(PROTECT_METHODS)
    # every output-perturbation method in one protect job, every target in one attack job
    assert jobs["protect"] == jobs["protect_dpsgd"] == jobs["certified_head"] == n_images + n_graphs
    assert jobs["attack"] == n_images + n_graphs
    assert jobs["link_protect"] == n_graphs
    # LiRA and the audits run on the image datasets: every method and the clean heads (`none`)
    assert jobs["lira"] == (n_mechanisms + 1) * n_images
    assert jobs["audit_one_run"] == n_images  # every method in one job
    assert jobs["lira_heads"] == 2 * n_images  # A_S's heads and the certified learner's
    assert jobs["link_transfer"] == n_graphs * (n_graphs - 1)
    # the contrastive branch: one job for the targets and one for the shadows, every λ and repeat in each
    n_contrastive = len(default["contrastive"]["datasets"])
    assert jobs["contrastive_train"] == 2 * n_contrastive and jobs["contrastive_attack"] == n_contrastive
    assert not (tmp_path / "run" / RESULTS).exists(), "a dry run wrote results"


@pytest.mark.parametrize("preset", ["paper-cifar10", "paper-cifar100", "paper-stl10", "digits-large-d"])
def test_image_presets_dry_run_without_a_graph_track(tmp_path, preset):
    proc = run_snakemake(tmp_path / "run", REPO / "configs" / f"{preset}.yaml", "-n", "--replace-workflow-config")
    jobs = planned_jobs(proc)
    assert jobs["pretrain"] == jobs["sensitivity"] == jobs["protect_dpsgd"] == 1
    assert jobs["protect"] == jobs["attack"] == 1
    assert not any(rule.startswith(("graph_", "link_")) for rule in jobs), jobs


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"offline graph copies not found at {SHARED_DATA}")
def test_shared_graphs_preset_dry_runs(tmp_path):
    proc = run_snakemake(tmp_path / "run", REPO / "configs" / "graphs-shared.yaml", "-n", "--replace-workflow-config",
                         "--config", f"graph_data_root={SHARED_DATA}")
    jobs = planned_jobs(proc)
    assert jobs["graph_data"] == jobs["link_target"] == 2  # Cora, CiteSeer
    assert jobs["link_transfer"] == 2 and jobs["protect"] == jobs["link_protect"] == 2
    assert not {"data", "pretrain", "figures", "table1"} & set(jobs), "a graph-only config ran the image track"


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
    assert rows["auc"].between(0, 1).all()
    summary = pd.read_csv(tiny_run.path(f"{RESULTS}/tables/link_stealing.csv"))
    assert_columns(summary, ["dataset", "attack", "auc_mean", "auc_std", "thesis_auc"], "link_stealing.csv")
    assert set(summary["dataset"]) == set(TINY_GRAPHS)


def test_link_protection_table(tiny_run):
    protect = tiny_run.expected["protect"]
    for graph in TINY_GRAPHS:
        table = pd.read_csv(tiny_run.path(f"{RESULTS}/{graph}/link_protection.csv"))
        assert_columns(table, ["dataset", "mechanism", "eps", "repeat", "attack", "distance", "auc"],
                       "link_protection.csv")
        assert set(table["mechanism"]) == {"none", *protect["mechanisms"]}
        assert set(table["attack"]) == {"attack-0", "attack-3"}
        noisy = table[(table.mechanism != "none") & (table.attack == "attack-0") & (table.distance == "correlation")]
        assert set(zip(noisy.mechanism, noisy.eps.astype(float), noisy.repeat)) == {
            (m, float(e), r) for m in protect["mechanisms"] for e in protect["eps"] for r in range(protect["repeats"])}
        assert table["auc"].between(0, 1).all()


def test_splits_follow_the_tiny_config(tiny_run):
    # --configfile is merged into config.yaml's defaults: the tiny sizes must win.
    splits = json.loads(tiny_run.path(f"{RESULTS}/digits/splits.json").read_text())
    sizes = {name: len(index) for name, index in splits["splits"].items()}
    assert sizes == tiny_run.expected["datasets"]["digits"]["splits"]
    drawn = [i for index in splits["splits"].values() for i in index]
    assert len(drawn) == len(set(drawn)), "splits overlap"


def training_time_releases(config: dict) -> set[tuple[str, float, int]]:
    """(method, ε, training) of every training-time release (DPCL variants, DPAdapter)."""
    dpcl, dpadapter = config["dpcl"], config["dpadapter"]
    return ({(DPCL_METHOD_OF_VARIANT[v], float(e), r) for v in dpcl["variants"] for e in dpcl["eps"]
             for r in range(dpcl["repeats"])}
            | {("dpadapter", float(e), r) for e in dpadapter["eps"] for r in range(dpadapter["repeats"])})


def expected_releases(config: dict) -> set[tuple[str, float, int]]:
    """(method, ε, draw) of every release the config asks for (DP-SGD: its own draws per ε)."""
    protect = config["protect"]
    return {(m, float(e), r) for m in protect["mechanisms"] for e in protect["eps"]
            for r in range(config["dpsgd"]["repeats"] if m == "dpsgd" else protect["repeats"])} \
        | training_time_releases(config)


def test_utility_table(tiny_run):
    table = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/utility.csv"))
    assert_columns(table, ["dataset", "mechanism", "eps", "delta", "repeat", "noise_scale", "guarantee_kind",
                           "guarantee", "clean_accuracy", "accuracy", "utility_loss"], "utility.csv")
    rows = list(zip(table["mechanism"], table["eps"].astype(float), table["repeat"]))
    assert len(rows) == len(set(rows))
    assert set(rows) == expected_releases(tiny_run.expected)
    assert (table["dataset"] == "digits").all()
    assert table["accuracy"].between(0, 1).all()
    assert (table["noise_scale"] > 0).all()
    # more privacy, more noise: the noise scale falls with eps for every post-hoc method
    posthoc = table[table.mechanism.isin(tiny_run.expected["protect"]["mechanisms"])]
    scale = posthoc.groupby(["mechanism", "eps"])["noise_scale"].first().unstack()
    assert (scale[1.0] > scale[1000.0]).all(), scale
    # every row is compared with the same non-private head
    assert table["clean_accuracy"].nunique() == 1


def test_guarantee_kinds_follow_the_sensitivity_source(tiny_run):
    table = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/utility.csv"))
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
    table = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/mia.csv"))
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
    for column in ("accuracy", "auc", "tpr_at_1pct_fpr"):
        assert table[column].between(0, 1).all(), f"mia.csv {column} outside [0, 1]"
        assert (table[f"{column}_lo"] <= table[column]).all() and (table[column] <= table[f"{column}_hi"]).all()
    # every release is attacked adaptively and not; the clean head once (its attack is adaptive)
    noisy = shadow[shadow.mechanism != "none"]
    assert noisy.groupby(["mechanism", "eps", "repeat"]).adaptive.agg(set).map(frozenset).eq(
        frozenset({True, False})).all()
    assert set(shadow[shadow.mechanism == "none"].adaptive) == {True}


def test_lira_roc_and_audit_tables(tiny_run):
    lira_cfg, methods = tiny_run.expected["attack"]["lira"], {"none", *tiny_run.expected["protect"]["mechanisms"]}
    lira = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/lira.csv"))
    assert set(lira.method) == methods and set(lira.attack) == set(lira_cfg["attacks"])
    pool = sum(tiny_run.expected["datasets"]["digits"]["splits"][s] for s in lira_cfg["pool"])
    assert ((lira.n_members + lira.n_nonmembers) == lira_cfg["targets"] * pool).all()
    for metric in ("auc", "accuracy", "tpr_at_0.1pct_fpr", "tpr_at_1pct_fpr"):
        assert ((lira[f"{metric}_lo"] <= lira[metric]) & (lira[metric] <= lira[f"{metric}_hi"])).all(), metric
    roc = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/roc.csv.gz"))
    assert_columns(roc, ["method", "eps", "attack", "fpr", "tpr"], "roc.csv.gz")
    assert set(roc.method) == methods and roc.fpr.between(0, 1).all() and roc.tpr.between(0, 1).all()
    audit = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/audit.csv"))
    assert_columns(audit, ["dataset", "method", "eps", "delta", "guarantee_kind", "attack", "audit",
                           "eps_lower_bound", "n"], "audit.csv")
    assert set(audit.audit) == {"hypothesis_test"} | {f"one_run_{k}" for k in tiny_run.expected["audit"]["one_run"]["kinds"]}
    assert set(audit.method) == methods and (audit.eps_lower_bound >= 0).all() and (audit.n > 0).all()


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
    membership = metrics[metrics.inference == "membership"]
    assert (membership.n == 2 * part).all() and (metrics.loc[metrics.inference == "attribute", "n"] == part).all()
    for metric in ("accuracy", "task_accuracy"):
        assert ((metrics[f"{metric}_lo"] <= metrics[metric]) & (metrics[metric] <= metrics[f"{metric}_hi"])).all()
    history = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/contrastive/target_history.csv"))
    assert {"adversary_accuracy", "loss", "contrastive_accuracy"} <= set(history.columns)
    assert len(history) == cfg["repeats"] * len(lambdas) * cfg["fine_tune"]["epochs"]
    table = tiny_run.path(f"{RESULTS}/tables/contrastive.md").read_text()
    for claim in ("membership", "attribute", "talos"):
        assert f"| digits | {claim} |" in table


def test_training_time_branches(tiny_run):
    """Both branches end to end: DPCL's per-epoch history and accounting, DPAdapter's three
    pre-trainings, and each release's claim within its budget, of the kind its sensitivity allows."""
    dpcl, dpadapter = tiny_run.expected["dpcl"], tiny_run.expected["dpadapter"]
    methods = [DPCL_METHOD_OF_VARIANT[v] for v in dpcl["variants"]]
    history = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/dpcl/history.csv"))
    assert len(history) == len(methods) * len(dpcl["eps"]) * dpcl["repeats"] * dpcl["encoder"]["epochs"]
    assert set(history.method) == set(methods) and (history.objective == dpcl["objective"]).all()
    assert history.knn_accuracy.between(0, 1).all() and history.clipped_fraction.between(0, 1).all()
    assert (history.eps_spent <= history.eps).all()  # the encoder's share of the release's budget
    accounting = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/dpcl/accounting.csv"))
    assert (accounting.eps_accountant <= accounting.eps_target * (1 + 1e-9)).all()
    assert (accounting.eps_accountant >= accounting.eps_target * (1 - 2e-3)).all()
    assert set(accounting.role) == {"target", "shadow"}
    utility = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/utility.csv"))
    kinds = utility.groupby("mechanism").guarantee_kind.unique().map(tuple).to_dict()
    assert kinds["dpcl_naive"] == kinds["dpadapter"] == ("approx_dp",) and kinds["dpcl"] == ("heuristic_dp",)
    trained = utility[utility.mechanism.isin([*methods, "dpadapter"])]
    assert (trained.eps_spent <= trained.eps * (1 + 1e-9)).all()
    assert trained.guarantee.str.contains("substitution of one record").all()
    results = pd.read_csv(tiny_run.path(f"{RESULTS}/digits/dpadapter/results.csv"))
    assert set(zip(results.pretraining, results.rho)) == {("standard", 0.0)} | {
        (kind, float(rho)) for kind in ("sam", "dpadapter") for rho in dpadapter["radii"]}
    assert len(results) == (1 + 2 * len(dpadapter["radii"])) * len(dpadapter["eps"]) * dpadapter["repeats"]
    table = tiny_run.path(f"{RESULTS}/tables/dpadapter.md").read_text()
    assert "DPAdapter ≥ vanilla SAM ≥ standard" in table and "| digits |" in table
    assert "paper settings" in set(pd.read_csv(tiny_run.path(f"{RESULTS}/tables/dpcl_accounting.csv")).source)


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
    assert planned_jobs(proc) == {"contrastive_attack": 1, "contrastive_report": 1, "all": 1}


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


RESUME_EPOCHS = 40


def test_killed_pretraining_resumes(tmp_path):
    """SIGKILL the whole snakemake process group during pre-training, then resume."""
    config = tiny_config()
    # ~0.2 s an epoch on 2 CPU cores: the kill lands long before the 40th epoch.
    config["datasets"]["digits"]["splits"]["pretrain"] = 897
    config["simclr"].update(width=128, batch_size=128, epochs=RESUME_EPOCHS)
    validate_config(config, SCHEMA)
    configfile = write_config(config, tmp_path / "resume_config.yaml")
    workdir = tmp_path / "run"
    workdir.mkdir()
    target = f"{RESULTS}/digits/pretrain/encoder.pt"
    checkpoint = workdir / RESULTS / "digits" / "pretrain" / "checkpoint" / "simclr.pt"
    history = workdir / RESULTS / "digits" / "pretrain" / "history.csv"
    log = workdir / RESULTS / "digits" / "logs" / "pretrain.log"

    with open(tmp_path / "killed.out", "w") as out:
        proc = subprocess.Popen(snakemake_command(workdir, configfile, target), env=snakemake_env(), cwd=workdir,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 240
            while not checkpoint.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if checkpoint.exists():
                os.killpg(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    killed_output = (tmp_path / "killed.out").read_text()
    assert checkpoint.exists(), f"no checkpoint appeared (exit {proc.returncode}):\n{killed_output[-4000:]}"
    if (workdir / target).exists():
        pytest.fail(f"pre-training finished before the kill landed; raise simclr.epochs (now {RESUME_EPOCHS})")
    assert proc.returncode == -signal.SIGKILL

    # Snakemake leaves its lock behind when killed; --unlock is the documented way out.
    run_snakemake(workdir, configfile, "--unlock")
    run_snakemake(workdir, configfile, target, "--rerun-incomplete")
    text = log.read_text()
    match = re.search(r"resumed from \S+ after epoch (\d+)", text)
    assert match, f"the restarted job did not resume:\n{text[-3000:]}"
    assert 1 <= int(match.group(1)) < RESUME_EPOCHS
    assert (workdir / target).is_file()
    epochs = pd.read_csv(history)["epoch"].tolist()
    assert epochs == list(range(1, RESUME_EPOCHS + 1))


def drop(key):
    return lambda config: config.pop(key)


BAD_CONFIGS = {
    "negative_eps": (lambda c: c["protect"].update(eps=[-1]), ["protect.eps[0]"]),
    "delta_above_one": (lambda c: c["protect"].update(delta=1.5), ["protect.delta"]),
    "zero_pairs": (lambda c: c["sensitivity"].update(m=0), ["sensitivity.m"]),
    "unknown_dataset": (lambda c: c.update(datasets={"mnist": c["datasets"]["digits"]}),
                        ["'datasets'", "mnist", "allowed: digits, cifar10, cifar100, stl10"]),
    "unknown_mechanism": (lambda c: c["protect"].update(mechanisms=["alm", "foo"]),
                          ["protect.mechanisms[1]", "foo", "allowed: alm, laplace, gaussian, gaussian_analytic, "
                           "certified_gaussian, certified_pure, dpsgd"]),
    "oversized_split": (lambda c: c["datasets"]["digits"]["splits"].update(finetune=5000),
                        ["datasets.digits.splits", "finetune=5000", "pretrain=200", "1797"]),
    "missing_head": (drop("head"), ["'head' is a required property"]),
    "l2_not_positive": (lambda c: c["certified"].update(l2=0), ["certified.l2"]),
    "clip_norm_not_positive": (lambda c: c["certified"].update(clip_norm=-1.0), ["certified.clip_norm"]),
    "tolerance_not_positive": (lambda c: c["certified"].update(tolerance=0), ["certified.tolerance"]),
    "dpsgd_clip_not_positive": (lambda c: c["dpsgd"].update(clip_norm=0), ["dpsgd.clip_norm"]),
    "gamma_outside_unit": (lambda c: c["sensitivity"].update(gamma=1.5), ["sensitivity.gamma"]),
    "rho_outside_unit": (lambda c: c["sensitivity"].update(rho=0), ["sensitivity.rho"]),
    "gamma_not_above_rho": (lambda c: c["sensitivity"].update(rho=0.5, gamma=0.4),
                            ["sensitivity", "gamma = 0.4 must exceed sensitivity.rho = 0.5"]),
    "too_few_pairs": (lambda c: c["sensitivity"].update(m=5), ["sensitivity", "m = 5", "allowed: m >= 9"]),
    "reference_too_small": (lambda c: c["datasets"]["digits"]["splits"].update(reference=10),
                            ["datasets.digits.splits.reference", "allowed: reference >= 60"]),
    "unknown_accountant": (lambda c: c["dpsgd"].update(accountant="gdp"), ["dpsgd.accountant", "allowed: rdp, prv"]),
    "unknown_sampling": (lambda c: c["sensitivity"].update(sampling="private"),
                         ["sensitivity.sampling", "allowed: population, paper"]),
    "no_dataset_at_all": (lambda c: c.update(datasets={}, graphs={}), ["'datasets' and 'graphs': both are empty"]),
    "one_shadow": (lambda c: c["attack"]["lira"].update(shadows=1), ["attack.lira.shadows"]),
    "no_target": (lambda c: c["attack"]["lira"].update(targets=0), ["attack.lira.targets"]),
    "pool_below_2d": (lambda c: c["attack"]["lira"].update(pool=["finetune"]),
                      ["attack.lira.pool", "allowed: at least 2|d| = 120"]),
    "fpr_outside_unit": (lambda c: c["attack"]["lira"].update(fpr=[0.01, 1.0]), ["attack.lira.fpr[1]"]),
    "unknown_attack": (lambda c: c["attack"]["lira"].update(attacks=["lira_online", "lira_bayes"]),
                       ["attack.lira.attacks[1]", "lira_bayes", "allowed: lira_online"]),
    "too_many_canaries": (lambda c: c["audit"]["one_run"].update(canaries=61),
                          ["audit.one_run.canaries", "allowed: <= |d| = 60"]),
    "unknown_label_map": (lambda c: c["contrastive"]["datasets"]["digits"].update(task="colour"),
                          ["config key 'contrastive.datasets.digits.task'", "allowed: parity, low_high"]),
    "negative_talos_lambda": (lambda c: c["contrastive"]["talos"].update(lambdas=[0, -1]),
                              ["config key 'contrastive.talos.lambdas[1]'", "minimum of 0"]),
    "empty_talos_grid": (lambda c: c["contrastive"]["talos"].update(lambdas=[]),
                         ["config key 'contrastive.talos.lambdas'"]),
    "contrastive_parts_too_large": (lambda c: c["contrastive"]["datasets"]["digits"].update(part=400),
                                    ["config key 'contrastive.datasets.digits'", "allowed: 4 * part + aux <= 1597"]),
    "contrastive_dataset_not_an_image_dataset": (
        lambda c: c["contrastive"]["datasets"].update(cifar10={"task": "animal_vehicle", "part": 10, "aux": 10}),
        ["config key 'contrastive.datasets.cifar10': cifar10 is not among the image datasets (allowed: digits"]),
    "contrastive_batch_above_part": (lambda c: c["contrastive"]["fine_tune"].update(batch_size=41),
                                     ["config key 'contrastive.fine_tune.batch_size'", "allowed: 2..40"]),
    "dpcl_negative_noise_multiplier": (lambda c: c["dpcl"].update(eps=None, noise_multiplier=-1.0),
                                       ["config key 'dpcl.noise_multiplier'", "-1.0"]),
    "dpcl_clip_not_positive": (lambda c: c["dpcl"]["encoder"].update(clip_norm=0),
                               ["config key 'dpcl.encoder.clip_norm'", "0"]),
    "dpcl_unknown_objective": (lambda c: c["dpcl"].update(objective="byol"),
                               ["config key 'dpcl.objective'", "'byol'", "simclr", "barlow_twins"]),
    "dpcl_eps_and_noise_multiplier": (lambda c: c["dpcl"].update(noise_multiplier=1.0),
                                      ["config keys 'dpcl.eps' and 'dpcl.noise_multiplier'", "exactly one"]),
    "dpcl_batch_above_d": (lambda c: c["dpcl"]["encoder"].update(batch_size=61),
                           ["config key 'dpcl.encoder.batch_size'", "allowed: at most 60"]),
    "dpadapter_negative_radius": (lambda c: c["dpadapter"].update(radii=[0.05, -0.1]),
                                  ["config key 'dpadapter.radii[1]'", "minimum of 0"]),
    "dpadapter_perturb_batch_above_public": (lambda c: c["dpadapter"]["pretrain"].update(perturb_batch=201),
                                             ["config key 'dpadapter.pretrain.perturb_batch'", "allowed: 1..200"]),
    # Accepted before, or refused only inside a job minutes into the run:
    "nan_eps": (lambda c: c["protect"].update(eps=[1, float("nan")]),
                ["config key 'protect.eps[1]': nan is not a finite number"]),
    "float_pairs": (lambda c: c["sensitivity"].update(m=16.0),
                    ["config key 'sensitivity.m': 16.0 is not an integer (write 16)"]),
    "simclr_batch_above_pretrain": (lambda c: c["simclr"].update(batch_size=201),
                                    ["config key 'simclr.batch_size': 201 is larger than |D| = "
                                     "datasets.digits.splits.pretrain = 200 (allowed: 2..200)"]),
    "head_batch_above_finetune": (lambda c: c["head"].update(batch_size=61),
                                  ["config key 'head.batch_size': 61 is larger than |d|", "or null: full batch"]),
    "dpsgd_batch_above_finetune": (lambda c: c["dpsgd"].update(batch_size=61),
                                   ["config key 'dpsgd.batch_size': 61 is larger than |d|"]),
    "cifar_without_data": (lambda c: c.update(datasets={"cifar10": c["datasets"]["digits"]},
                                              data_root="no-such-data-root",
                                              contrastive={**c["contrastive"], "datasets": {}}),
                           ["config key 'data_root': cifar10 is not under data_root = no-such-data-root",
                            "cifar-10-batches-py", "download is false", "download: true"]),
    "cora_without_data": (lambda c: c.update(graphs={**c["graphs"], "cora": {"splits": c["graphs"]["sbm"]["splits"]}},
                                             graph_data_root="no-such-data-root"),
                          ["config key 'graph_data_root': cora is not under graph_data_root = no-such-data-root",
                           "planetoid/Cora/raw", "graph_download is false"]),
    # Messages that say what is allowed, at the right key:
    "head_batch_zero": (lambda c: c["head"].update(batch_size=0),
                        ["config key 'head.batch_size': 0 is less than the minimum of 1 (or null)"]),
    "sbm_without_generator": (lambda c: c["graphs"]["sbm"].pop("generator"),
                              ["config key 'graphs.sbm.generator': missing"]),
    "unknown_graph": (lambda c: c["graphs"].update(reddit=c["graphs"].pop("sbm_shadow")),
                      ["config key 'graphs': 'reddit' is not allowed (allowed: cora, citeseer, pubmed, cox2, or sbm"]),
    "delta_read_as_text": (lambda c: c["protect"].update(delta="1e-5"),
                           ["config key 'protect.delta': '1e-5' is a string, not a number (write 1.0e-5: YAML 1.1 "
                            "reads 1e-5 as a string)"]),
}


def bad_config(name: str) -> dict:
    config = copy.deepcopy(tiny_config())
    BAD_CONFIGS[name][0](config)
    return config


# Snakemake itself on one bad config per check of validate_config (schema, required keys, YAML
# typing, split sizes, cross-field checks, batches, data presence, the contrastive and
# training-time branches): what this test adds to the in-process test below is that the Snakefile
# validates before building the DAG and writes nothing, the same for every bad key of one check.
FAIL_FAST = ["negative_eps", "missing_head", "delta_read_as_text", "oversized_split", "gamma_not_above_rho",
             "pool_below_2d", "head_batch_above_finetune", "no_dataset_at_all", "unknown_graph", "cifar_without_data",
             "cora_without_data", "contrastive_parts_too_large", "dpcl_eps_and_noise_multiplier", "dpcl_batch_above_d",
             "dpadapter_perturb_batch_above_public"]


@pytest.mark.parametrize("name", FAIL_FAST)
def test_bad_config_fails_fast_and_writes_nothing(tmp_path, name):
    configfile = write_config(bad_config(name), tmp_path / f"{name}.yaml")
    workdir = tmp_path / "run"
    # --replace-workflow-config: the bad config as written, not merged into config.yaml's values
    # (else a missing key would be filled in from config.yaml)
    proc = run_snakemake(workdir, configfile, "--replace-workflow-config", check=False, timeout=120)
    output = output_of(proc)
    assert proc.returncode != 0, f"snakemake accepted the bad config {name}:\n{output[-3000:]}"
    assert "invalid config" in output or "config key" in output, output[-3000:]
    for text in BAD_CONFIGS[name][1]:
        assert text in output, f"the error of {name} does not mention {text!r}:\n{output[-3000:]}"
    assert not (workdir / RESULTS).exists(), f"{name}: results written despite the bad config"
    assert "Building DAG of jobs" not in output, f"{name}: snakemake got past config validation"


@pytest.mark.parametrize("name", list(BAD_CONFIGS))
def test_validate_config_names_the_bad_key(name):
    validate_config(tiny_config(), SCHEMA)  # the bad config differs from a valid one in one change
    with pytest.raises(ConfigError) as error:
        validate_config(bad_config(name), SCHEMA)
    for text in BAD_CONFIGS[name][1]:
        assert text in str(error.value)


def test_missing_key_is_named():
    # Plain --configfile merges into config.yaml's values, so a missing key is tested directly too.
    config = tiny_config()
    del config["head"]
    with pytest.raises(ConfigError, match=r"config key '<top level>': 'head' is a required property"):
        validate_config(config, SCHEMA)


def test_a_nested_config_override_keeps_its_numbers(tmp_path):
    # Snakemake reads every scalar of a nested --config value as a string ('1' for 1); the
    # Snakefile hands the overrides to validate_config, which reads them as a config file would.
    configfile = write_config(tiny_config(), tmp_path / "tiny.yaml")
    proc = run_snakemake(tmp_path / "run", configfile, "-n", "-p", "--config", "protect={eps: [2, 20], delta: 1.0e-5}",
                         timeout=300)
    assert "--eps 2 20 " in output_of(proc) and "--delta 1e-05" in output_of(proc), output_of(proc)[-3000:]
    assert not (tmp_path / "run" / RESULTS).exists(), "a dry run wrote results"


def test_a_nested_config_override_that_is_no_number_is_refused(tmp_path):
    configfile = write_config(tiny_config(), tmp_path / "tiny.yaml")
    proc = run_snakemake(tmp_path / "run", configfile, "--config", "protect={delta: 1e-5}", check=False, timeout=120)
    assert proc.returncode != 0
    assert "config key 'protect.delta': '1e-5' is a string, not a number (write 1.0e-5" in output_of(proc)
    assert not (tmp_path / "run" / RESULTS).exists()
