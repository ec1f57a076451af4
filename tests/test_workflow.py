"""The Snakemake workflow as a user drives it: dry runs of the default config and the presets, a
killed pre-training that resumes, bad configs refused before any job, and the helpers that
test_tiny_run.py (the whole DAG on the tiny config of tests/data/tiny_config.yaml) shares.

Snakemake runs as a subprocess with the test interpreter's bin directory first on PATH (the
rules' shell commands call `python`). Every run works in a temporary directory, so the
repository's own results/ and .snakemake/ are never touched.
"""

from __future__ import annotations

import atexit
import copy
import fcntl
import functools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from privssl.config import ConfigError, validate_config
from privssl.data.splits import DEBIAN_FASHION_MNIST
from privssl.release.methods import PROTECT_METHODS

pytestmark = pytest.mark.workflow

REPO = Path(__file__).resolve().parents[1]
TINY_CONFIG = Path(__file__).resolve().parent / "data" / "tiny_config.yaml"
SCHEMA = REPO / "schemas" / "config.schema.yaml"
SHARED_DATA = REPO.parent / "shared" / "data"
# configs/fashion.yaml reads Debian's dataset-fashion-mnist (installed by .ci/run as root)
FASHION_FILES = all((DEBIAN_FASHION_MNIST / f"{part}-{kind}-ubyte.gz").is_file() for part in ("train", "t10k")
                    for kind in ("images-idx3", "labels-idx1"))
WORKFLOW_FILES = ["Snakefile", "config.yaml", "rules", "scripts", "schemas", "src", "report", "envs", "benchmarks",
                  "resources"]
RESULTS = "results"
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
    # greedy: Snakemake's default ILP scheduler starts a CBC solver process at its scheduling rounds, CPU
    # that the tiny DAG's ~100 short jobs pay for many times over; the outputs do not depend on it
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--directory", str(workdir),
           "--cores", "2", "--scheduler", "greedy", *args]
    # --configfile takes several paths: it goes last, so that no target is read as a config file
    return cmd + (["--configfile", str(configfile)] if configfile is not None else [])


def run_snakemake(workdir: Path, configfile: Path | None = None, *args: str, snakefile: Path = REPO / "Snakefile",
                  check: bool = True, timeout: float = RUN_TIMEOUT_S, warm: bool = False) -> subprocess.CompletedProcess:
    """Run snakemake to completion; with `check`, fail the test with its output if it fails; with
    `warm`, its jobs fork from one interpreter that imported torch once (PRIVSSL_WARM_START)."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = snakemake_env() | {"PRIVSSL_WARM_START": "1" if warm else "0"}
    proc = subprocess.run(snakemake_command(workdir, configfile, *args, snakefile=snakefile), env=env,
                          cwd=workdir, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        pytest.fail(f"snakemake {' '.join(args)} failed (exit {proc.returncode}):\n"
                    f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}")
    return proc


def output_of(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


@functools.lru_cache(maxsize=None)
def shipped_dry_run(config: str, shared: Path | None = None) -> subprocess.CompletedProcess:
    """`snakemake -n --forceall` of a shipped config (config.yaml or configs/*.yaml) as written, in
    a fresh folder: once per test session for every test that reads its plan (a Snakemake start
    costs ~2.5 s of CPU, and this suite's budget is CPU). `shared`: a folder every xdist worker of
    the session sees (fixture `session_folder`), where the first worker to plan a config leaves its
    output for the other (test_workflow.py and test_resources.py run on different workers)."""
    if shared is None:
        return _dry_run(config)
    stored = shared / f"dry-run-{config.replace('/', '--')}.json"
    with open(stored.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits for this plan rather than repeat it
        if stored.exists():
            return subprocess.CompletedProcess(**json.loads(stored.read_text()))
        proc = _dry_run(config)
        fields = {"args": proc.args, "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
        stored.write_text(json.dumps(fields))
        return proc


def _dry_run(config: str) -> subprocess.CompletedProcess:
    extra = ["--replace-workflow-config"] if config != "config.yaml" else []
    if config == "configs/graphs-shared.yaml":
        extra += ["--config", f"graph_data_root={SHARED_DATA}"]
    workdir = Path(tempfile.mkdtemp(prefix="privssl-dry-run-"))
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    return run_snakemake(workdir, REPO / config, "-n", "--forceall", *extra)


# A job of a `-n -p` dry run: its rule, its indented fields, its command; a job of a group (a
# cluster run's, also shown by dry runs) is indented four spaces more.
DRY_RUN_JOB = r"^ *(?:local)?rule (\w+):\n((?: {4,}.*\n)+)Shell command: (.*)$"


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


# --------------------------------------------------------------------------------- tests

def test_tiny_config_is_valid():
    validate_config(tiny_config(), SCHEMA)


def test_dry_run_of_default_config_lists_every_stage(session_folder):
    # The Snakefile's `configfile: "config.yaml"` is looked up in the working directory, so a run
    # in another --directory names the repository's config.yaml explicitly (as shipped_dry_run does).
    proc = shipped_dry_run("config.yaml", session_folder)
    jobs = planned_jobs(proc)
    expected = {"data", "pretrain", "encode", "finetune", "certified_head", "sensitivity", "protect", "protect_dpsgd",
                "attack", "shadow", "figures", "table1", "table2", "graph_data", "graph_pretrain", "graph_encode", "link_target", "link_steal",
                "link_transfer", "link_table", "link_protect", "graph_figures", "lira_heads", "lira", "audit_one_run",
                "membership_tables", "audit_figures", "contrastive_data", "contrastive_train", "contrastive_attack",
                "contrastive_report", "dpcl_train", "dpadapter_train", "attack_training_time", "training_time_report",
                "semileak_data", "semileak_train", "semileak_attack", "semileak_report"}
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
    # the semi-supervised branch: a job per (target kind, role, repeat); the kinds are the
    # algorithms, the supervised reference and FixMatch by DP-SGD; an attack job per repeat
    semileak = default["semileak"]
    n_semileak, n_kinds, repeats = len(semileak["datasets"]), len(semileak["algorithms"]) + 2, semileak["repeats"]
    assert repeats >= 3, "a verdict about a training procedure needs 3 trainings per arm (the ledger's rule)"
    assert jobs["semileak_train"] == 2 * n_kinds * n_semileak * repeats
    assert jobs["semileak_attack"] == n_semileak * repeats
    workdir = Path(proc.args[proc.args.index("--directory") + 1])
    assert not (workdir / RESULTS).exists(), "a dry run wrote results"


# inputs a reader must be told what to expect of: every table of results/, every release file and
# LiRA's heads and sensitivity records (their recorded method, ε grid, counts, seed and settings)
EXPECTED_INPUT = re.compile(r"^results/.*(\.csv|\.csv\.gz|/protect/\w+\.pt|/dpcl/\w+\.pt|/dpadapter/dpadapter\.pt"
                            r"|/lira/heads_\w+\.pt|/sensitivity\.json)$")


def test_every_reader_is_given_the_configs_grid_of_its_tables(tmp_path):
    # a rule that forgot its --expect would accept a table cut at a line end: the tiny run still passes
    proc = run_snakemake(tmp_path / "run", TINY_CONFIG, "-n", "-p", "--forceall")
    jobs = re.findall(DRY_RUN_JOB, output_of(proc), re.M)
    assert len(jobs) > 40, output_of(proc)[-3000:]
    checked = set()
    for rule, header, command in jobs:
        inputs = re.search(r"^\s+input: (.*)$", header, re.M)
        wanted = [p for p in (inputs.group(1).split(", ") if inputs else []) if EXPECTED_INPUT.match(p)]
        if not wanted or rule == "all":  # the target rule runs nothing
            continue
        words = shlex.split(command)
        assert "--expect" in words, f"rule {rule} reads {wanted} without --expect:\n{command}"
        given = {}  # a rule of several commands (membership_tables) gives each its own
        for i in (i for i, word in enumerate(words) if word == "--expect"):
            given |= json.JSONDecoder().raw_decode(words[i + 1])[0]  # the last may end in ")"
        assert not [p for p in wanted if p not in given], f"rule {rule}: no expectation for {set(wanted) - set(given)}"
        checked.add(rule)
    assert {"utility_table", "mia_table", "membership_tables", "figures", "table2", "audit_figures", "attack", "lira",
            "audit_one_run", "contrastive_report", "training_time_report", "link_table", "link_protect",
            "link_protection_table", "graph_figures", "attack_training_time", "digest", "protect",
            "table1", "semileak_attack", "semileak_report"} <= checked, checked


def job_seeds(proc: subprocess.CompletedProcess) -> dict[tuple[str, str], dict[str, str]]:
    """Per job of a `-n -p --forceall` dry run, keyed by (rule, wildcards), the seeds its command
    is given: {"": seed} for one `--seed`, {method: seed} for the protect rule's one per method."""
    jobs = re.findall(DRY_RUN_JOB, output_of(proc), re.M)
    seeds = {}
    for rule, header, command in jobs:
        words = shlex.split(command)
        if "--seed" not in words:
            continue
        wildcards = re.search(r"^\s+wildcards: (.*)$", header, re.M)
        given = words[words.index("--seed") + 1:]
        given = given[:next((i for i, w in enumerate(given) if w.startswith("--")), len(given))]
        names = [""]
        if "--mechanism" in words:
            names = words[words.index("--mechanism") + 1:][:len(given)]
        assert len(names) == len(given), command
        seeds[rule, wildcards.group(1) if wildcards else ""] = dict(zip(names, given))
    return seeds


def test_a_new_release_method_changes_no_other_stages_seed(tmp_path):
    # Registering and enabling a method gives it a seed of its own and moves no other stage's: each
    # stage's seed is a hash of its name (privssl.stage_seeds). With seeds by position in a list of
    # the registry's methods, every stage listed after them (LiRA's heads, the audits, the
    # contrastive, DPCL, DPAdapter, tuning and Semi-Leak branches) drew other randomness.
    workflow = copy_workflow(tmp_path / "workflow")
    before = job_seeds(run_snakemake(tmp_path / "run", TINY_CONFIG, "-n", "-p", "--forceall",
                                     snakefile=workflow / "Snakefile"))
    methods = workflow / "src" / "privssl" / "release" / "methods.py"
    entry = ('    ReleaseMethod("laplace_twin", "Laplace (twin)", "tab:grey", "d", "output_perturbation", "finetune",'
             ' "l1", "pure_dp",\n                  SUBSTITUTION, noise=Laplace(calibration.l1_scale)),\n')
    text = methods.read_text()
    anchor = '    ReleaseMethod("gaussian", '
    assert text.count(anchor) == 1
    methods.write_text(text.replace(anchor, entry + anchor))
    schema = workflow / "schemas" / "config.schema.yaml"
    schema.write_text(schema.read_text().replace("enum: [alm, laplace, gaussian,",
                                                 "enum: [alm, laplace, laplace_twin, gaussian,"))
    # the new method enabled first, and one method no longer enabled: no position of another moves
    config = tiny_config()
    config["protect"]["mechanisms"] = ["laplace_twin",
                                       *(m for m in config["protect"]["mechanisms"] if m != "gaussian")]
    after = job_seeds(run_snakemake(tmp_path / "run", write_config(config, tmp_path / "twin.yaml"), "-n", "-p",
                                    "--forceall", snakefile=workflow / "Snakefile"))
    assert len(before) > 30 and {"pretrain", "semileak_train", "lira_heads", "audit_canary"} <= {r for r, _ in before}
    assert all("laplace_twin" in w for _, w in after.keys() - before.keys())
    assert all("target=gaussian" in w for _, w in before.keys() - after.keys())
    kept = {job: ({m: s for m, s in seeds.items() if m in after[job]},
                  {m: s for m, s in after[job].items() if m in seeds}) for job, seeds in before.items() if job in after}
    moved = {job: pair for job, pair in kept.items() if pair[0] != pair[1]}
    assert not moved, moved
    protect = [job for job in after if job[0] == "protect"]
    assert protect and all(set(after[job]) ^ set(before[job]) == {"laplace_twin", "gaussian"} for job in protect)
    new_seed = after[protect[0]]["laplace_twin"]
    assert all(new_seed not in seeds.values() for seeds in before.values())  # its own randomness


@pytest.mark.parametrize("preset", ["paper-cifar10", "paper-cifar100", "paper-stl10", "digits-large-d", "fashion"])
def test_image_presets_dry_run_without_a_graph_track(session_folder, preset):
    if preset == "fashion" and not FASHION_FILES:
        pytest.skip(f"Fashion-MNIST not in {DEBIAN_FASHION_MNIST}: apt-get install dataset-fashion-mnist (as root)")
    jobs = planned_jobs(shipped_dry_run(f"configs/{preset}.yaml", session_folder))
    assert jobs["pretrain"] == jobs["sensitivity"] == jobs["protect_dpsgd"] == 1
    assert jobs["protect"] == jobs["attack"] == 1
    assert not any(rule.startswith(("graph_", "link_")) for rule in jobs), jobs


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"offline graph copies not found at {SHARED_DATA}")
def test_shared_graphs_preset_dry_runs(session_folder):
    jobs = planned_jobs(shipped_dry_run("configs/graphs-shared.yaml", session_folder))
    assert jobs["graph_data"] == jobs["link_target"] == 2  # Cora, CiteSeer
    assert jobs["link_transfer"] == 2 and jobs["protect"] == jobs["link_protect"] == 2
    assert not {"data", "pretrain", "figures", "table1"} & set(jobs), "a graph-only config ran the image track"


RESUME_EPOCHS = 10


def test_killed_pretraining_resumes(tmp_path):
    """SIGKILL the whole snakemake process group during pre-training, then resume."""
    config = tiny_config()
    # the kill lands right after the first epoch's checkpoint, nine epochs (~0.2 s each) before the end
    config["datasets"]["digits"]["splits"]["pretrain"] = 897
    config["simclr"].update(width=32, batch_size=128, epochs=RESUME_EPOCHS)
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
    # the finished job deletes its checkpoint: a later --forcerun trains from scratch
    assert not checkpoint.exists()


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
    "unknown_accountant": (lambda c: c["dpsgd"].update(accountant="gdp"),
                           ["dpsgd.accountant", "allowed: rdp, pld, prv"]),
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
    "contrastive_task_is_the_attribute": (lambda c: c["contrastive"]["datasets"]["digits"].update(task="class"),
                                          ["config key 'contrastive.datasets.digits.task'", "parity, low_high",
                                           "membership_task: class"]),
    "contrastive_unknown_membership_task": (
        lambda c: c["contrastive"]["datasets"]["digits"].update(membership_task="classes"),
        ["config key 'contrastive.datasets.digits.membership_task'", "'classes'", "class"]),
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
                                              contrastive={**c["contrastive"], "datasets": {}},
                                              semileak={**c["semileak"], "datasets": {}}),
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
    # RDP to (ε, δ) alone costs ≈ 0.0035 at δ = 1e-5 and α ≤ 1024, whatever σ: 1e-4 is out of reach
    "semileak_dp_eps_unreachable": (lambda c: c["semileak"]["defences"]["dpsgd"].update(eps=[100, 0.0001]),
                                    ["config key 'semileak.defences.dpsgd.eps': ε = 0.0001 cannot be reached on "
                                     "digits: 5 steps at sampling rate q = 0.5"]),
    "hidden_grid_of_a_linear_head": (lambda c: c["head"].update(architecture="linear") or c["tuning"]["head"][0].update(
        hidden=[8, 16]), ["config key 'tuning.head.hidden': [8, 16] are widths of an MLP's hidden layer, but that "
                          "grid's heads are linear and have none"]),
    # the head as configured is an MLP, but the second grid's heads are all linear
    "hidden_grid_of_linear_grid": (lambda c: c["tuning"]["head"][1].update(hidden=[8]),
                                   ["config key 'tuning.head.hidden': [8] are widths", "that grid's heads are linear"]),
    "delta_read_as_text": (lambda c: c["protect"].update(delta="1e-5"),
                           ["config key 'protect.delta': '1e-5' is a string, not a number (write 1.0e-5: YAML 1.1 "
                            "reads 1e-5 as a string)"]),
}


def bad_config(name: str) -> dict:
    config = copy.deepcopy(tiny_config())
    BAD_CONFIGS[name][0](config)
    return config


# Snakemake itself on a bad config: what this adds to the in-process test below (which gives
# validate_config every bad config) is that the Snakefile validates the config as Snakemake loaded
# it, before it builds the DAG, and writes nothing. That is one call for every check, so one bad
# config of the schema, plus those where Snakemake's loading matters: a key missing under
# --replace-workflow-config, YAML typing (1e-5 read as a string), and data files looked up from the
# run's working directory. (Each costs a Snakemake start, ~1.3 s of this suite's CPU budget.)
FAIL_FAST = ["negative_eps", "missing_head", "delta_read_as_text", "cifar_without_data"]


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
    # the canary audit's ε must be among the releases' (a config check), so it moves with them
    proc = run_snakemake(tmp_path / "run", configfile, "-n", "-p", "--config", "protect={eps: [2, 20], delta: 1.0e-5}",
                         "audit={canary: {eps: [20]}}", timeout=300)
    assert "--eps 2 20 " in output_of(proc) and "--delta 1e-05" in output_of(proc), output_of(proc)[-3000:]
    workdir = Path(proc.args[proc.args.index("--directory") + 1])
    assert not (workdir / RESULTS).exists(), "a dry run wrote results"


def test_a_nested_config_override_that_is_no_number_is_refused(tmp_path):
    configfile = write_config(tiny_config(), tmp_path / "tiny.yaml")
    proc = run_snakemake(tmp_path / "run", configfile, "--config", "protect={delta: 1e-5}", check=False, timeout=120)
    assert proc.returncode != 0
    assert "config key 'protect.delta': '1e-5' is a string, not a number (write 1.0e-5" in output_of(proc)
    assert not (tmp_path / "run" / RESULTS).exists()
