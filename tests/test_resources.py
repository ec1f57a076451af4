"""What the rules ask a scheduler for: every job that a cluster runs declares mem_mb and runtime;
on the default config no job asks for more memory than the default run used (the peaks in
benchmarks/measured_peaks.csv) times the stated margin, nor less than that peak; and no job of
any shipped config asks for more than a 24 GiB node offers."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_workflow import FASHION_FILES, SHARED_DATA, output_of, planned_jobs, shipped_dry_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from cluster_submissions import local_rules  # noqa: E402  (the rules marked localrule, and `all`)

pytestmark = pytest.mark.workflow

REPO = Path(__file__).resolve().parents[1]
PEAKS = pd.read_csv(REPO / "benchmarks" / "measured_peaks.csv").set_index("rule")
MEMORY_MARGIN = 2.0  # stated in the README and rules/resources.smk
NODE_MB = 24 * 1024
# graphs-shared reads the offline graph copies, fashion Debian's Fashion-MNIST, when they are here
CONFIGS = ["config.yaml", *(f"configs/{p.name}" for p in sorted((REPO / "configs").glob("*.yaml"))
                            if (p.name != "graphs-shared.yaml" or SHARED_DATA.is_dir())
                            and (p.name != "fashion.yaml" or FASHION_FILES))]


def planned_resources(proc: subprocess.CompletedProcess) -> list[tuple[str, dict[str, str]]]:
    """(rule, {resource: value}) of every job of a dry run."""
    jobs, rule = [], None
    for line in output_of(proc).splitlines():
        if match := re.match(r"\s*(?:local)?rule (\w+):$", line):  # indented in a group
            rule = match.group(1)
        elif rule and (match := re.match(r"\s+resources: (.*)$", line)):
            jobs.append((rule, dict(item.split("=", 1) for item in match.group(1).split(", "))))
            rule = None
    return jobs


@pytest.fixture(scope="module")
def dry_runs(session_folder) -> dict[str, list[tuple[str, dict[str, str]]]]:
    runs = {config: planned_resources(shipped_dry_run(config, session_folder)) for config in CONFIGS}
    for config, jobs in runs.items():
        planned = sum(planned_jobs(shipped_dry_run(config, session_folder)).values())
        assert len(jobs) == planned, f"{config}: resources of {len(jobs)} of its {planned} jobs read"
    return runs


def test_every_cluster_job_declares_memory_and_runtime(dry_runs):
    local = local_rules(REPO)
    for config, jobs in dry_runs.items():
        bare = sorted({rule for rule, res in jobs if rule not in local and not {"mem_mb", "runtime"} <= set(res)})
        assert not bare, f"{config}: jobs of {bare} run on a node without mem_mb and runtime"


def test_default_memory_is_the_measured_peak_times_the_margin(dry_runs):
    local = local_rules(REPO)
    for rule, res in dry_runs["config.yaml"]:
        if rule in local:
            continue
        assert rule in PEAKS.index, f"rule {rule} has no measured peak in benchmarks/measured_peaks.csv"
        peak, asked = PEAKS.loc[rule, "max_rss_mb"], int(res["mem_mb"])
        assert peak <= asked <= 100 * math.ceil(peak * MEMORY_MARGIN / 100), \
            f"rule {rule} asks for {asked} MB; measured peak {peak} MB, margin {MEMORY_MARGIN}"
        assert int(res["runtime"]) * 60 >= PEAKS.loc[rule, "s"], f"rule {rule}: runtime {res['runtime']} min"


@pytest.mark.skipif(not FASHION_FILES, reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
def test_fashion_requests_cover_the_presets_measured_peaks(dry_runs):
    # benchmarks/fashion_peaks.csv: the peaks of a whole configs/fashion.yaml run (docs/presets.md);
    # its `resources` scales (mem_scale, runtime_scale) must lift every rule's request above them
    fashion = pd.read_csv(REPO / "benchmarks" / "fashion_peaks.csv").set_index("rule")
    short = []
    for rule, res in dry_runs["configs/fashion.yaml"]:
        if rule in local_rules(REPO) or rule not in fashion.index:
            continue
        if int(res["mem_mb"]) < fashion.loc[rule, "max_rss_mb"] or int(res["runtime"]) * 60 < fashion.loc[rule, "s"]:
            short.append((rule, res["mem_mb"], res["runtime"], fashion.loc[rule, "max_rss_mb"], fashion.loc[rule, "s"]))
    assert not short, f"(rule, mem_mb, runtime min, measured MB, measured s) below the preset's peak: {short}"
    assert len({rule for rule, _ in dry_runs["configs/fashion.yaml"]} & set(fashion.index)) >= 20


@pytest.mark.parametrize("config", CONFIGS)
def test_no_job_asks_for_more_than_a_node(dry_runs, config):
    too_big = sorted({(rule, int(res["mem_mb"])) for rule, res in dry_runs[config]
                      if int(res.get("mem_mb", 0)) > NODE_MB})
    assert not too_big, f"{config}: (rule, mem_mb) above a {NODE_MB} MB node: {too_big}"


def test_a_paper_preset_asks_for_more_than_the_default(dry_runs):
    default = {rule: int(res["mem_mb"]) for rule, res in dry_runs["config.yaml"] if "mem_mb" in res}
    paper = {rule: int(res["mem_mb"]) for rule, res in dry_runs["configs/paper-cifar10.yaml"] if "mem_mb" in res}
    assert paper["pretrain"] > default["pretrain"] and paper["sensitivity"] > default["sensitivity"]


def test_peaks_file_names_only_rules_of_the_workflow():
    listed = subprocess.run([sys.executable, "-m", "snakemake", "--list-rules"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout
    rules = {line.split()[0] for line in listed.splitlines() if line and not line[0].isspace()}
    assert set(PEAKS.index) <= rules, f"peaks of unknown rules: {sorted(set(PEAKS.index) - rules)}"


def group_jobs(proc: subprocess.CompletedProcess) -> list[tuple[str, list[str]]]:
    """(group id, its jobs' rules in the order the dry run lists them) of every group job of a
    dry run (a dry run shows the groups a cluster run submits; a local run ignores them)."""
    groups, current = [], None
    for line in output_of(proc).splitlines():
        if match := re.search(r"Group job (\S+) \(jobs in lexicogr\. order\):$", line):
            current = (match.group(1), [])
            groups.append(current)
        elif match := re.match(r"(\s*)(?:local)?rule (\w+):$", line):
            if current and match.group(1):
                current[1].append(match.group(2))
            else:  # an ungrouped job ends the group's listing
                current = None
    return groups


def test_a_cluster_run_submits_each_datasets_short_chains_as_one_job(session_folder):
    # rules/common.smk's groups: per dataset, a tuned section's choice and the training that reads
    # it, the sensitivity and the releases that need it, pre-training and the features, the splits
    grouped = group_jobs(shipped_dry_run("config.yaml", session_folder))
    members = {}
    for group, rules in grouped:
        members.setdefault(group, []).append(sorted(rules))
    members = {group: sorted(parts) for group, parts in members.items()}  # the plan's order varies
    expected = {"digits_splits": [["contrastive_data", "data"]], "digits_encoder": [["encode", "pretrain"]]}
    for dataset in ("digits", "sbm", "sbm_shadow"):
        expected |= {f"{dataset}_tuned_head": [["finetune", "tune"]],
                     f"{dataset}_tuned_certified": [["certified_head", "tune"]],
                     f"{dataset}_tuned_dpsgd": [["protect_dpsgd", "tune"]],
                     f"{dataset}_noise": [["protect", "sensitivity"]]}
    expected |= {f"{graph}_encoder": [["graph_encode", "graph_pretrain"]] for graph in ("sbm", "sbm_shadow")}
    assert members == expected


def test_a_group_adds_seconds_to_what_waits_for_it(session_folder):
    # a job outside a group that needs one member waits for the whole group job: all members but
    # the group's longest take seconds on the default run (benchmarks/measured_peaks.csv)
    for group, rules in group_jobs(shipped_dry_run("config.yaml", session_folder)):
        walls = sorted(PEAKS.loc[rule, "s"] for rule in rules)
        assert sum(walls[:-1]) <= 15, f"group {group}: {rules} take {walls} s"


def grouped_requests(proc: subprocess.CompletedProcess) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """Per group job of a dry run (by its listing's order), its members' (rule, resources)."""
    groups, current, rule = {}, None, None
    for line in output_of(proc).splitlines():
        if match := re.search(r"Group job (\S+) \(jobs in lexicogr\. order\):$", line):
            current = f"{match.group(1)}#{len(groups)}"
            groups[current] = []
        elif match := re.match(r"(\s*)(?:local)?rule (\w+):$", line):
            rule = match.group(2)
            current = current if match.group(1) else None
        elif current and rule and (match := re.match(r"\s+resources: (.*)$", line)):
            groups[current].append((rule, dict(item.split("=", 1) for item in match.group(1).split(", "))))
            rule = None
    return groups


@pytest.mark.parametrize("config", CONFIGS)
def test_a_groups_members_scale_together(session_folder, config):
    # a group job asks for its members' summed runtime: a member whose request scales with another
    # scale (Semi-Leak's runtime_scale of 1500 on the paper presets) would hold the group's first
    # jobs, on which the rest of the DAG waits, in the queue as a 15,000-minute job
    for group, members in grouped_requests(shipped_dry_run(config, session_folder)).items():
        scales = {rule: round(int(res["runtime"]) / max(10, PEAKS.loc[rule, "s"] * 3 / 60), 1)  # resources.smk
                  for rule, res in members}
        assert len(set(scales.values())) == 1, f"{config}: group {group}'s runtime scales {scales}"


def planned_priorities(proc: subprocess.CompletedProcess) -> dict[str, set[int]]:
    """{rule: the priorities of its jobs} of a dry run (a job without one has priority 0)."""
    priorities, rule = {}, None
    for line in output_of(proc).splitlines():
        if match := re.match(r"\s*(?:local)?rule (\w+):$", line):
            rule = match.group(1)
            priorities.setdefault(rule, set())
        elif rule and (match := re.match(r"\s+priority: (\d+)$", line)):
            priorities[rule].add(int(match.group(1)))
        elif rule and re.match(r"\s+resources: ", line):  # the job's listing ends with its resources
            priorities[rule] = priorities[rule] or {0}
            rule = None
    return priorities


LONGEST_CHAIN = ("contrastive_data", "contrastive_train", "contrastive_attack")  # thesis Ch. 4's, rules/common.smk


@pytest.mark.parametrize("config", ["config.yaml", "configs/paper-cifar10.yaml"])
def test_every_job_of_the_longest_chain_goes_before_every_other_ready_job(config, session_folder):
    """Snakemake starts the ready job of the highest priority first: each job of the chain, its
    first one too, must outrank every job outside it, or the chain waits behind ties."""
    priorities = planned_priorities(shipped_dry_run(config, session_folder))
    chain = min(min(priorities[rule]) for rule in LONGEST_CHAIN)
    others = max(max(p) for rule, p in priorities.items() if rule not in LONGEST_CHAIN)
    assert chain > others, {rule: priorities[rule] for rule in LONGEST_CHAIN}
