#!/usr/bin/env python
"""How many `sbatch` jobs a cluster run of a config submits: from a dry run (`-n --forceall`,
which lists the job groups a cluster run forms; a local run ignores them), every job that is not
of a local rule is one submission, except that the jobs of one group job are one together.

    python benchmarks/cluster_submissions.py [CONFIG ...] [--repo PATH]

Prints one line per config: the submissions (single jobs + group jobs) and the local jobs.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

GROUP = re.compile(r"Group job \S+ \(jobs in lexicogr\. order\):$")
JOB = re.compile(r"(\s*)(?:local)?rule (\w+):$")  # a group's jobs are indented


def local_rules(repo: Path) -> set[str]:
    """The rules marked `localrule: True` in the rule files, and the target rule `all`."""
    local = {"all"}
    for smk in (repo / "rules").glob("*.smk"):
        for block in re.split(r"\n(?=\s*rule \w+:)", smk.read_text()):
            if re.search(r"localrule:\s*True", block):
                local.add(re.search(r"rule (\w+):", block).group(1))
    return local


def submissions(repo: Path, config: str) -> tuple[int, int, int]:
    """(single jobs, group jobs, local jobs) of a dry run of `config` in a fresh folder."""
    extra = ["--replace-workflow-config"] if config != "config.yaml" else []
    with tempfile.TemporaryDirectory() as workdir:
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores", "2",
                               "--snakefile", str(repo / "Snakefile"), "--directory", workdir,
                               "--configfile", str(repo / config), *extra], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"dry run of {config} failed:\n{proc.stderr[-3000:]}")
    local, counts = local_rules(repo), {"single": 0, "group": 0, "local": 0}
    for line in proc.stdout.splitlines():
        if GROUP.search(line):
            counts["group"] += 1
        elif match := JOB.match(line):
            indent, rule = match.groups()
            if rule in local:
                counts["local"] += 1
            elif not indent:
                counts["single"] += 1
    return counts["single"], counts["group"], counts["local"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="*", default=["config.yaml"], help="configs, relative to the repository")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    for config in args.configs:
        single, group, local = submissions(args.repo, config)
        print(f"{config}: {single + group} sbatch submissions ({single} single jobs + {group} group jobs), "
              f"{local} local jobs")


if __name__ == "__main__":
    main()
