"""The tiny workflow through a real SLURM cluster: the checks of `make test-cluster`.

Needs the cluster of tests/cluster/start.sh (run.sh starts and stops it around this script) and
the project's virtualenv. Not a pytest module: `make test` never runs it.

What it checks, with nothing about the workflow hard-coded (rules, job counts and resources are
read from Snakemake's own dry run and run logs, so they may change):

1. the tiny config (tests/data/tiny_config.yaml; by default its image track alone, the whole of it
   with CLUSTER_TEST_FULL=1) runs locally on one core (`--cores 1`, fewer than some rules ask for),
   for comparison;
2. through `--profile profiles/slurm --profile profiles/slurm-venv` (no conda here) it is
   interrupted three times, each once a job has finished and others are queued, and resumed with
   the same command: SIGTERM (Snakemake submits nothing more, waits for its SLURM jobs, exits and
   unlocks), SIGINT (it cancels its SLURM jobs, exits and unlocks), SIGKILL of its session (its
   SLURM jobs go on and its lock stays: `scancel --name <SLURM run ID>`, then `--unlock`); no
   job that a run had seen finish runs again, and the fourth run completes;
3. every job of the DAG ran through SLURM except the workflow's local rules, and `sacct` lists
   each with the rule and wildcards in its comment, the CPUs (threads), memory (mem_mb), time
   limit (runtime), partition and account (the environment's SBATCH_PARTITION/SBATCH_ACCOUNT,
   read by the profile) that the job declared;
4. the results equal the local run's byte for byte, file for file, although the SLURM jobs get
   other CPU counts (the profile's set-threads) than the local run's one core: each script runs at
   the intra-op thread count of the config's `torch_threads`, whatever Snakemake grants;
5. `--config gpus_per_job=1` submits the quickest GPU-capable job again with --gpus=1 (and with
   `--set-resources RULE:gpu_model=fake`, --gpus=fake:1), and SLURM grants it the fake GPU of the
   node (scontrol's TresPerJob, gres/gpu=1 in sacct's ReqTRES and AllocTRES); asking for one GPU
   more than the node has fails at submission (EnforcePartLimits=ALL) instead of pending.

It ends with one line, `cluster: N passed, M failed`, and exits 1 when a check failed.
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
TINY_CONFIG = REPO / "tests" / "data" / "tiny_config.yaml"
PROFILES = ["profiles/slurm", "profiles/slurm-venv"]  # of the workflow's copy
FIXTURE_DIR = Path(os.environ.get("SLURM_FIXTURE_DIR", "/tmp/privssl-slurm"))
# The tiny config's image track alone (about half its jobs, a few minutes through SLURM), or with
# CLUSTER_TEST_FULL=1 the whole tiny config (about twice as long).
FULL = os.environ.get("CLUSTER_TEST_FULL", "") not in ("", "0")
RUN_TIMEOUT_S = 1500
# Status checks 2 s after a submission instead of 40 (each idle check still adds 10 s).
STATUS_ARGS = ["--slurm-init-seconds-before-status-checks", "2"]
# Output files that record the run rather than the results.
NOT_COMPARED = {"logs", "benchmarks"}

# ----------------------------------------------------------------------------- reporting

RESULTS: list[tuple[str, bool, str]] = []
FIGURES: dict[str, object] = {}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def check(name: str, ok: bool, detail: str = "") -> bool:
    RESULTS.append((name, bool(ok), detail))
    log(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"\n{detail}" if detail and not ok else ""))
    return bool(ok)


# ----------------------------------------------------------------------------- cluster

def cluster_env() -> dict[str, str]:
    path = FIXTURE_DIR / "cluster.env"
    if not path.is_file():
        sys.exit(f"cluster: no cluster at {FIXTURE_DIR} (run tests/cluster/start.sh first)")
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def slurm(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout


SACCT_FIELDS = ["JobIDRaw", "JobName", "Comment", "State", "AllocCPUS", "ReqMem", "Timelimit", "ReqTRES",
                "AllocTRES", "Account", "Partition", "NodeList", "ElapsedRaw"]


def sacct(names: list[str]) -> list[dict[str, str]]:
    """sacct's records (allocations only) of the jobs named after the given SLURM run IDs."""
    if not names:
        return []
    out = slurm("sacct", "-X", "-P", "--noheader", "--starttime", "now-1days", "--name", ",".join(names),
                "--format", ",".join(SACCT_FIELDS))
    return [dict(zip(SACCT_FIELDS, line.split("|"))) for line in out.splitlines() if line]


def finished_work(names: list[str]) -> set[str]:
    """The SLURM job ids, among the given runs', whose job step (the rule's own Snakemake, `<id>.0`)
    completed with exit 0, whatever the allocation's state: a SIGINT can land between the step's
    end and the allocation's, and scancel then marks the job CANCELLED with its work done (outputs
    and Snakemake's metadata written, so no later run redoes it)."""
    if not names:
        return set()
    out = slurm("sacct", "-P", "--noheader", "--starttime", "now-1days", "--name", ",".join(names),
                "--format", "JobIDRaw,State,ExitCode")
    steps = [line.split("|") for line in out.splitlines() if line]
    return {raw.split(".")[0] for raw, state, code in steps if raw.endswith(".0") and state == "COMPLETED"
            and code == "0:0"}


def queued(name: str) -> set[str]:
    """The SLURM job ids of a run still pending or running."""
    return set(slurm("squeue", "-h", "--name", name, "-o", "%i").split())


def mem_mb(reqmem: str) -> float:
    """sacct's ReqMem ('1300M', '8G', '1300Mn' before 21.08) in MB (slurm's MB are MiB)."""
    m = re.fullmatch(r"([\d.]+)([KMGT])[nc]?", reqmem)
    assert m, f"unexpected ReqMem {reqmem!r}"
    return float(m.group(1)) * {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 ** 2}[m.group(2)]


def minutes(timelimit: str) -> float:
    """sacct's Timelimit ('00:10:00', '1-00:00:00') in minutes."""
    days, _, hms = timelimit.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return (int(days or 0) * 24 + h) * 60 + m + s / 60


def tres(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


# ----------------------------------------------------------------------------- snakemake logs

@dataclass
class Job:
    """One job as Snakemake's log describes it before running it."""
    rule: str
    local: bool
    fields: dict[str, str]
    group: str | None = None
    line: int = 0  # where the log describes it

    @property
    def jobid(self) -> str:
        return self.fields.get("jobid", "")

    @property
    def wildcards(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in split_list(self.fields.get("wildcards", "")))

    @property
    def key(self) -> tuple[str, str]:
        return self.rule, json.dumps(self.wildcards)

    @property
    def threads(self) -> int:
        return int(self.fields.get("threads", 1))

    @property
    def resources(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in split_list(self.fields.get("resources", "")))

    @property
    def outputs(self) -> list[str]:
        return split_list(self.fields.get("output", ""))

    def comment(self) -> str:
        """The plugin's --comment: rule_<rule>[_wildcards_<values joined by _>]."""
        values = "_".join(self.wildcards.values()).replace("/", "_")
        return f"rule_{self.rule}" + (f"_wildcards_{values}" if values else "")


def split_list(text: str) -> list[str]:
    return [item for item in text.split(", ") if item]


HEADER = re.compile(r"^(\s*)(local)?(rule|checkpoint) (\w+):$")
FIELD = re.compile(r"^\s+(\w+): (.*)$")
# Snakemake 9 puts the time in front of a group's listing; a group job is submitted under a UUID,
# and the plugin's log folder names it group_<group id>_<its rules, sorted, joined by _>
GROUP = re.compile(r"^(?:\[[^]]*\] )?Group job (\S+) \(jobs in lexicogr\. order\):$")
SUBMITTED = re.compile(r"^Job (\S+) has been submitted with SLURM jobid (\d+) (?:\(log: .*/group_([^/]+)/)?")
FINISHED = re.compile(r"^Finished jobid: (\S+) \(Rule: (\w+)\)")
RUN_ID = re.compile(r"^SLURM run ID: (\S+)$")
# What Snakemake says on SIGINT (then it cancels its jobs) and on SIGTERM (then it waits for them)
SIGNALLED = re.compile(r"^(Terminating processes on user request|Will exit after finishing currently running jobs)")


def group_job_name(group: str, jobs: list[Job]) -> str:
    """Snakemake's name of a group job (GroupJob.name): the group id, then at most five of its
    rules, sorted, joined by _."""
    rules = sorted({job.rule for job in jobs})
    return "_".join([group, *rules[:5], *(["..."] if len(rules) > 5 else [])])


@dataclass
class RunLog:
    """What one Snakemake run said: the jobs it described, submitted and saw finish."""
    text: str
    jobs: list[Job] = field(default_factory=list)
    submitted: dict[str, list[Job]] = field(default_factory=dict)  # SLURM job id -> job(s) of the sbatch job
    submitted_line: dict[str, int] = field(default_factory=dict)  # SLURM job id -> where the log says so
    finished: list[Job] = field(default_factory=list)
    run_id: str | None = None
    signal_line: int | None = None  # where it says it got SIGINT or SIGTERM

    @classmethod
    def parse(cls, text: str) -> "RunLog":
        run = cls(text)
        latest: dict[str, Job] = {}  # snakemake jobid -> its latest description
        listed: list[tuple[str, list[Job]]] = []  # group jobs described and not yet submitted
        group = None
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if m := RUN_ID.match(line):
                run.run_id = m.group(1)
            if run.signal_line is None and SIGNALLED.match(line):
                run.signal_line = i
            if line and not line[0].isspace():
                group = None
            if m := GROUP.match(line):
                group = m.group(1)
                listed.append((group, []))
            elif m := HEADER.match(line):
                indent, local, _, rule = m.groups()
                fields = {}
                while i + 1 < len(lines) and (f := FIELD.match(lines[i + 1])) \
                        and len(lines[i + 1]) - len(lines[i + 1].lstrip()) > len(indent):
                    fields[f.group(1)] = f.group(2)
                    i += 1
                job = Job(rule, bool(local), fields, group if indent else None, i)
                run.jobs.append(job)
                latest[job.jobid] = job
                if job.group:
                    listed[-1][1].append(job)
            elif m := SUBMITTED.match(line):
                jobid, slurm_id, folder = m.groups()
                if folder is None:
                    run.submitted[slurm_id] = [latest[jobid]]
                else:  # the first group job listed under that name whose rules the folder names
                    k = next(k for k, (name, jobs) in enumerate(listed) if folder == group_job_name(name, jobs))
                    run.submitted[slurm_id] = listed.pop(k)[1]
                run.submitted_line[slurm_id] = i
            elif m := FINISHED.match(line):
                jobid, rule = m.groups()
                if jobid in latest and latest[jobid].rule == rule:
                    run.finished.append(latest[jobid])
            i += 1
        return run

    def submitted_keys(self) -> set[tuple[str, str]]:
        return {job.key for jobs in self.submitted.values() for job in jobs}


# ----------------------------------------------------------------------------- snakemake runs

def copy_workflow(dest: Path) -> Path:
    """The repository as it is now, without its results, tests and caches: the runs (and every
    SLURM job, which reads the Snakefile again) see neither edits made meanwhile nor old results."""
    shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".snakemake", "results", "tests", "__pycache__", "*.egg-info", "*.pyc", ".*_cache"))
    return dest


class Workflow:
    def __init__(self, root: Path, env: dict[str, str], cpus: str):
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        self.root = root
        self.dir = copy_workflow(root / "workflow")
        self.snakefile = self.dir / "Snakefile"
        config = {**yaml.safe_load(TINY_CONFIG.read_text()), "data_root": str(root / "data")}
        if not FULL and config.get("graphs") and config.get("datasets"):
            config["graphs"] = {}  # the image track alone: about half the jobs, every kind of job
        self.config = root / "tiny_config.yaml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False))
        self.env = env
        self.cpus = cpus

    def command(self, workdir: Path, *args: str, profile: bool = True) -> list[str]:
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(self.snakefile), "--directory", str(workdir)]
        if profile:
            # --max-threads: the profile's set-threads ask for more CPUs than the fixture's node has
            cmd += [arg for p in PROFILES for arg in ("--profile", str(self.dir / p))]
            cmd += ["--max-threads", self.cpus, *STATUS_ARGS]
        # --configfile takes several paths: it goes last, after any target
        return cmd + list(args) + ["--configfile", str(self.config)]

    def run(self, workdir: Path, *args: str, profile: bool = True, name: str, timeout: float = RUN_TIMEOUT_S):
        """Run snakemake to its end; its output goes to <root>/<name>.log."""
        workdir.mkdir(parents=True, exist_ok=True)
        logfile = self.root / f"{name}.log"
        start = time.monotonic()
        with open(logfile, "w") as out:
            proc = subprocess.run(self.command(workdir, *args, profile=profile), env=self.env, cwd=workdir,
                                  stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
        return proc.returncode, logfile.read_text(), time.monotonic() - start

    def start(self, workdir: Path, *args: str, name: str) -> tuple[subprocess.Popen, Path]:
        workdir.mkdir(parents=True, exist_ok=True)
        logfile = self.root / f"{name}.log"
        out = open(logfile, "w")
        proc = subprocess.Popen(self.command(workdir, *args), env=self.env, cwd=workdir, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        STARTED.append(proc)
        return proc, logfile


STARTED: list[subprocess.Popen] = []  # background snakemake runs, ended (with their sessions) on exit


def end_started() -> None:
    for proc in STARTED:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_for_interruption_point(proc: subprocess.Popen, logfile: Path, deadline_s: float = 600) -> RunLog | None:
    """Wait until this run has seen a job finish and still has SLURM jobs queued or running."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and proc.poll() is None:
        run = RunLog.parse(logfile.read_text())
        # a job that the log says was submitted still queued (not only ones being submitted now)
        if run.run_id and run.finished and queued(run.run_id) & set(run.submitted):
            return run
        time.sleep(1)
    return None


def locked(workdir: Path) -> bool:
    return any((workdir / ".snakemake" / "locks").glob("*"))


def result_files(workdir: Path, hidden: bool = False) -> dict[str, Path]:
    """The files under results/ but the logs and benchmarks; hidden ones (the temporary files of
    privssl.io's atomic writes: a job killed while writing, as scancel does, leaves its own) apart."""
    base = workdir / "results"
    return {str(p.relative_to(base)): p for p in sorted(base.rglob("*"))
            if p.is_file() and not NOT_COMPARED & set(p.relative_to(base).parts)
            and p.name.startswith(".") == hidden}


# ----------------------------------------------------------------------------- the test

def main() -> int:
    t_start = time.monotonic()
    cluster = cluster_env()
    env = os.environ.copy()
    env.pop("SNAKEMAKE_PROFILE", None)
    env.pop("SLURM_CONF", None)  # as on a cluster: the clients and the jobs read /etc/slurm/slurm.conf
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["SBATCH_PARTITION"] = cluster["SLURM_FIXTURE_PARTITION"]  # read by profiles/slurm
    env["SBATCH_ACCOUNT"] = cluster["SLURM_FIXTURE_ACCOUNT"]
    wf = Workflow(FIXTURE_DIR / "test", env, cluster["SLURM_FIXTURE_CPUS"])
    local_dir, slurm_dir = wf.root / "local", wf.root / "slurm"

    # 1. local run on one core: Snakemake grants every job one thread, whatever the rule asks for
    log("local run of the tiny config (--cores 1)")
    rc, text, seconds = wf.run(local_dir, "--cores", "1", profile=False, name="local")
    FIGURES["local_run_s"] = round(seconds, 1)
    if not check("the tiny config runs locally", rc == 0, text[-4000:]):
        return finish(t_start)

    # the DAG, as the same command through the profile would run it
    rc, text, _ = wf.run(slurm_dir, "-n", name="dry-run")
    dag = {job.key: job for job in RunLog.parse(text).jobs}
    if not check("dry run through the profile", rc == 0 and dag, text[-4000:]):
        return finish(t_start)
    FIGURES["dag_jobs"] = len(dag)

    # 2. through SLURM, interrupted three times, each time once a job has finished
    runs: list[RunLog] = []
    slurm_start = time.monotonic()

    def interrupted_run(n: int, how: signal.Signals) -> tuple[int, RunLog, set[str]] | None:
        """Run n, sent `how` (to its whole session) once a job has finished and others are queued;
        its exit status, its log, and its SLURM jobs queued at the signal."""
        log(f"SLURM run {n}: {how.name} once a job has finished")
        proc, logfile = wf.start(slurm_dir, name=f"slurm-{n}")
        point = wait_for_interruption_point(proc, logfile)
        if not check(f"run {n} reached a finished job with others queued", point is not None,
                     logfile.read_text()[-4000:]):
            return None
        active = queued(point.run_id)
        os.killpg(proc.pid, how)
        # A Ctrl-C that lands while Snakemake submits a job (sbatch, in the same process group, gets
        # it too) can be lost in the submission: Snakemake then runs on as if nothing happened.
        # Like a user, press it again when Snakemake has not said within 3 s that it got it (up to 5
        # times: 3 presses were all lost once, on 2026-12-02, and the run went on to its end).
        presses = 1
        while how == signal.SIGINT and presses < 5 and proc.poll() is None:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and RunLog.parse(logfile.read_text()).signal_line is None:
                time.sleep(0.1)
            if RunLog.parse(logfile.read_text()).signal_line is not None:
                break
            os.killpg(proc.pid, how)
            presses += 1
        FIGURES[f"run_{n}_{how.name}_presses"] = presses
        rc = proc.wait(timeout=300)
        run = RunLog.parse(logfile.read_text())
        runs.append(run)
        return rc, run, active

    def after_signal(run: RunLog) -> set[str]:
        """Its SLURM jobs that the log says were submitted after it said it got the signal."""
        return {sid for sid, line in run.submitted_line.items()
                if run.signal_line is not None and line > run.signal_line}

    # SIGTERM (`kill`): Snakemake starts no more jobs, waits for its SLURM jobs, exits, unlocks
    if not (result := interrupted_run(1, signal.SIGTERM)):
        return finish(t_start)
    rc, run, active = result
    states = [r["State"] for r in sacct([run.run_id])]
    started_after = [job.rule for job in run.jobs if run.signal_line is not None and job.line > run.signal_line]
    check("after SIGTERM Snakemake started no more jobs, waited for its SLURM jobs to complete and exited",
          rc != 0 and run.signal_line is not None and not started_after and not queued(run.run_id)
          and states and all(state == "COMPLETED" for state in states),
          f"exit {rc}, jobs started after the signal {started_after}, states {states}")
    check("after SIGTERM no lock is left", not locked(slurm_dir))

    # SIGINT (Ctrl-C): Snakemake cancels its SLURM jobs (scancel), exits, unlocks; but a job whose
    # sbatch was under way (the plugin submits from a thread pool) is submitted after the cancel
    if not (result := interrupted_run(2, signal.SIGINT)):
        return finish(t_start)
    rc, run, active = result
    late = after_signal(run)
    known = active - late
    left, states = set(), {}
    for _ in range(30):  # the accounting of the cancellations reaches slurmdbd a moment later
        left = queued(run.run_id)
        states = {r["JobIDRaw"]: r["State"].split()[0] for r in sacct([run.run_id])}
        if not left & known and "CANCELLED" in {states.get(sid) for sid in known}:
            break
        time.sleep(1)
    check("after SIGINT Snakemake cancelled its SLURM jobs and exited",
          rc != 0 and run.signal_line is not None and known and not left & known
          and "CANCELLED" in {states.get(sid) for sid in known},
          f"exit {rc}, queued at the signal {sorted(active)}, submitted after it {sorted(late)}, "
          f"still queued {sorted(left)}, states {states}")
    check("jobs left queued after SIGINT are only ones submitted after the signal", left <= late,
          f"left {sorted(left)}, submitted after the signal {sorted(late)}")
    FIGURES["sigint_jobs_submitted_after_the_cancel"] = len(late)
    if left:
        slurm("scancel", "--name", run.run_id)  # the README's advice after an interruption
        for _ in range(60):
            if not queued(run.run_id):
                break
            time.sleep(1)
    check("after SIGINT no lock is left", not locked(slurm_dir))

    # SIGKILL (or a lost login session): its SLURM jobs go on and its lock stays; the way out is
    # `scancel --name <SLURM run ID>` and `snakemake --unlock`
    if not (result := interrupted_run(3, signal.SIGKILL)):
        return finish(t_start)
    _, run, _ = result
    orphans = queued(run.run_id)
    check("after SIGKILL its SLURM jobs are still there", bool(orphans), "no job of the killed run in the queue")
    slurm("scancel", "--name", run.run_id)
    for _ in range(60):
        if not queued(run.run_id):
            break
        time.sleep(1)
    check("and its lock stays", locked(slurm_dir))
    rc, text, _ = wf.run(slurm_dir, "--unlock", name="unlock")
    check("which --unlock removes", rc == 0 and not locked(slurm_dir), text[-3000:])

    log("SLURM run 4: the same command, to the end")
    rc, text, _ = wf.run(slurm_dir, name="slurm-4")
    runs.append(RunLog.parse(text))
    FIGURES["slurm_run_s"] = round(time.monotonic() - slurm_start, 1)
    if not check("run 4 completes the workflow", rc == 0, text[-4000:]):
        return finish(t_start)
    rc, text, _ = wf.run(slurm_dir, "-n", name="dry-run-after")
    check("then a dry run has nothing to do", rc == 0 and "Nothing to be done" in text, text[-3000:])

    # no job that a run saw finish ran again (through SLURM or locally)
    seen_finished: set = set()
    for i, run in enumerate(runs):
        redone = {job.key for job in run.jobs} & seen_finished
        check(f"run {i + 1} ran no job again that had finished before", not redone, f"redone: {sorted(redone)}")
        seen_finished |= {job.key for job in run.finished}
    FIGURES["finished_per_run"] = [len(run.finished) for run in runs]

    # 3. every job went through SLURM, but the local rules; sacct has each with its resources
    records = {r["JobIDRaw"]: r for r in sacct([run.run_id for run in runs])}
    submitted = {slurm_id: (i, jobs) for i, run in enumerate(runs) for slurm_id, jobs in run.submitted.items()}
    # An sbatch under way at a Ctrl-C can submit a job that no log line names (the plugin submits
    # from a thread pool): its sacct comment (rule and wildcards) names its job of the DAG
    by_comment = {job.comment(): job for job in dag.values()}
    unlogged = [sid for sid, record in records.items() if sid not in submitted and record["Comment"] in by_comment]
    submitted |= {sid: (None, [by_comment[records[sid]["Comment"]]]) for sid in unlogged}
    FIGURES["submissions_no_log_names"] = len(unlogged)
    local_jobs = {job.key for run in runs for job in run.jobs if job.local}
    local_rules = {key[0] for key in local_jobs}
    remote = {key for key in dag if key[0] not in local_rules}
    work_done = finished_work([run.run_id for run in runs])
    completed = {job.key for slurm_id, (_, jobs) in submitted.items()
                 if records.get(slurm_id, {}).get("State") == "COMPLETED" or slurm_id in work_done for job in jobs}
    FIGURES["slurm_jobs"] = len(records)
    FIGURES["slurm_jobs_by_state"] = dict(Counter(r["State"].split()[0] for r in records.values()))
    FIGURES["local_jobs"] = len([k for k in dag if k[0] in local_rules])
    check("sacct lists every job that Snakemake submitted", set(submitted) == set(records),
          f"submitted, not in sacct: {sorted(set(submitted) - set(records))}; "
          f"in sacct, not submitted: {sorted(set(records) - set(submitted))}")
    check("every non-local job of the DAG completed as a SLURM job (its job step, at least)", remote <= completed,
          f"missing: {sorted(remote - completed)}")
    through_slurm = {job.key for _, jobs in submitted.values() for job in jobs}
    check("no local rule's job went through SLURM", not local_jobs & through_slurm,
          f"{sorted(local_jobs & through_slurm)}")
    check("SLURM ran no job outside the DAG", completed <= set(dag), f"extra: {sorted(completed - set(dag))}")

    problems = []
    for slurm_id, (_, jobs) in sorted(submitted.items(), key=lambda kv: int(kv[0])):
        record = records.get(slurm_id)
        if record is None:
            continue
        expect = {"Account": env["SBATCH_ACCOUNT"], "Partition": env["SBATCH_PARTITION"]}
        if jobs[0].group is None:  # a single job; a group job's resources are its members' combined
            job = jobs[0]
            res = job.resources
            expect["Comment"] = job.comment()
            expect["AllocCPUS"] = str(job.threads)
            got_mem = mem_mb(record["ReqMem"])
            if "mem_mb" in res and got_mem != float(res["mem_mb"]):
                problems.append(f"{slurm_id} {job.comment()}: ReqMem {record['ReqMem']} != mem_mb {res['mem_mb']}")
            if "runtime" in res and minutes(record["Timelimit"]) != float(res["runtime"]):
                problems.append(f"{slurm_id} {job.comment()}: Timelimit {record['Timelimit']} != runtime "
                                f"{res['runtime']} min")
            gpus = int(res.get("gpu", 0) or 0)
            if tres(record["ReqTRES"]).get("gres/gpu", "0") != str(gpus):
                problems.append(f"{slurm_id} {job.comment()}: ReqTRES {record['ReqTRES']} for gpu={gpus}")
        else:  # a group job: its members one after another (rules/common.smk's groups are chains)
            expect["Comment"] = f"rule_{group_job_name(jobs[0].group, jobs)}"  # the plugin's: no wildcards
            threads = max(job.threads for job in jobs)
            mem = max(float(job.resources.get("mem_mb", 0)) for job in jobs)
            runtime = sum(float(job.resources.get("runtime", 0)) for job in jobs)
            names = "+".join(job.comment() for job in jobs)
            if record["AllocCPUS"] != str(threads):
                problems.append(f"{slurm_id} group {names}: AllocCPUS {record['AllocCPUS']} != largest threads {threads}")
            if mem_mb(record["ReqMem"]) != mem:
                problems.append(f"{slurm_id} group {names}: ReqMem {record['ReqMem']} != largest mem_mb {mem}")
            if minutes(record["Timelimit"]) != runtime:
                problems.append(f"{slurm_id} group {names}: Timelimit {record['Timelimit']} != summed runtime "
                                f"{runtime} min")
        for key, value in expect.items():
            if record[key] != value:
                problems.append(f"{slurm_id}: {key} {record[key]!r} != {value!r}")
    check("sacct has each job's rule, wildcards, CPUs, memory, time limit, partition and account (a group "
          "job's: its members' largest CPUs and memory, their summed time limit)",
          not problems, "\n".join(problems[:30]))

    # 4. the same results as the local run
    local_files, slurm_files = result_files(local_dir), result_files(slurm_dir)
    differ = [name for name in sorted(set(local_files) & set(slurm_files))
              if not filecmp.cmp(local_files[name], slurm_files[name], shallow=False)]
    FIGURES["compared_files"] = len(local_files)
    FIGURES["temporary_files_left_by_killed_jobs"] = sorted(result_files(slurm_dir, hidden=True))
    check("the SLURM run wrote the same result files as the local run", set(local_files) == set(slurm_files),
          f"only local: {sorted(set(local_files) - set(slurm_files))}\n"
          f"only SLURM: {sorted(set(slurm_files) - set(local_files))}")
    check("with the same bytes (outputs are byte-reproducible)", not differ, f"{len(differ)} differ: {differ[:20]}")

    # 5. a GPU request: the quickest GPU-capable job again with gpus_per_job=1
    gpu_jobs = [(int(records[sid]["ElapsedRaw"]), jobs[0]) for sid, (_, jobs) in submitted.items()
                if sid in records and records[sid]["State"] == "COMPLETED" and jobs[0].group is None
                and "gpu" in jobs[0].resources]
    if not check("the DAG has GPU-capable jobs (resources: gpu)", gpu_jobs):
        return finish(t_start)
    _, gpu_job = min(gpu_jobs, key=lambda pair: pair[0])
    target = gpu_job.outputs[0]
    model = cluster["SLURM_FIXTURE_GPU_TYPE"]
    for n, extra in enumerate([[], ["--set-resources", f"{gpu_job.rule}:gpu_model={model}"]]):
        log(f"GPU: {gpu_job.comment()} again with gpus_per_job=1 {' '.join(extra)} (target {target})")
        rc, text, seconds = wf.run(slurm_dir, target, f"--forcerun={target}", *extra, "--config", "gpus_per_job=1",
                                   name=f"gpu-{n + 1}")
        gpu_run = RunLog.parse(text)
        FIGURES[f"gpu_run_{n + 1}_s"] = round(seconds, 1)
        if not check("the GPU run completes", rc == 0, text[-4000:]):
            continue
        jobs = list(gpu_run.submitted.values())
        record = sacct([gpu_run.run_id])
        asked = f"gres:gpu:{model}:1" if extra else "gres:gpu:1"
        job_info = slurm("scontrol", "show", "job", record[0]["JobIDRaw"]) if record else ""
        ok = (len(jobs) == 1 and jobs[0][0].key == gpu_job.key and jobs[0][0].resources.get("gpu") == "1"
              and len(record) == 1 and record[0]["State"] == "COMPLETED"
              and f"TresPerJob={asked}" in job_info
              and tres(record[0]["ReqTRES"]).get("gres/gpu") == "1"
              and tres(record[0]["AllocTRES"]).get("gres/gpu") == "1"
              and tres(record[0]["AllocTRES"]).get(f"gres/gpu:{model}") == "1"
              and record[0]["NodeList"] == cluster["SLURM_FIXTURE_NODE"])
        check(f"it asked for {asked} (gpu=1{', gpu_model=' + model if extra else ''}) and was granted the node's "
              "fake GPU", ok, f"submitted: {[[j.comment() for j in js] for js in jobs]}, sacct: {record}\n{job_info}")
    node = slurm("scontrol", "show", "node", cluster["SLURM_FIXTURE_NODE"])
    node_gpus = sum(int(n) for n in re.findall(r"gpu:(?:[\w.]+:)?(\d+)", node.split("Gres=", 1)[1].split()[0]))
    start = time.monotonic()
    rc, text, seconds = wf.run(slurm_dir, target, f"--forcerun={target}", "--config",
                               f"gpus_per_job={node_gpus + 1}", name="gpu-impossible", timeout=300)
    impossible = RunLog.parse(text)
    check(f"asking for {node_gpus + 1} GPUs fails at submission, not pending",
          rc != 0 and "sbatch failed" in text and not (impossible.run_id and queued(impossible.run_id)),
          f"exit {rc} after {seconds:.0f} s:\n{text[-3000:]}")
    FIGURES["impossible_request_s"] = round(time.monotonic() - start, 1)
    return finish(t_start)


def finish(t_start: float) -> int:
    FIGURES["check_s"] = round(time.monotonic() - t_start, 1)
    (FIXTURE_DIR / "test").mkdir(parents=True, exist_ok=True)
    (FIXTURE_DIR / "test" / "figures.json").write_text(json.dumps(FIGURES, indent=1))
    log("figures: " + json.dumps(FIGURES))
    passed = sum(ok for _, ok, _ in RESULTS)
    failed = len(RESULTS) - passed
    print(f"cluster: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    status = 1
    try:
        status = main()
    except Exception:
        traceback.print_exc()
        check("the checks ran to their end", False)
        status = finish(t0)
    finally:
        end_started()
    sys.exit(status)
