#!/usr/bin/env python
"""Whether two checkouts plan the same jobs: a refactor of the rules (or of what they compute
their params from) that should change nothing is checked here before any job runs.

For each config, each checkout's dry run (`snakemake -n -p`, in an empty directory, so every job
is planned) is read job by job: the rule, its wildcards, its outputs, its inputs and its shell
command (with every param the command formats: seeds, --expect grids, tuned choices). The two
checkouts plan the same jobs when these multisets are equal. The checkout's own path is replaced
by REPO (scripts are named relative to the run's directory), and a job's inputs and outputs are
compared as sets (Snakemake lists a rule's named inputs in an order that can differ between runs;
the order that matters, the one on the command line, is in the command).

    python benchmarks/same_jobs.py --old ../old-checkout [config ...]

Each config is a path relative to a checkout (default: config.yaml and the presets under
configs/, and tests/data/tiny_config.yaml); prints one line per config and the first differing
jobs, and exits 1 if any config plans different jobs. It needs no data: a dry run reads none.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIGS = ["config.yaml", "configs/fashion.yaml", "configs/paper-cifar10.yaml",
                   "configs/digits-large-d.yaml", "tests/data/tiny_config.yaml"]
FIELDS = ("input", "output", "wildcards")  # the job lines compared, besides the rule and the command
JOB = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")


def dry_run(checkout: Path, config: str) -> str:
    """The checkout's `snakemake -n -p` of the config, planned from an empty directory."""
    with tempfile.TemporaryDirectory() as workdir:
        env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
        command = [sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "2", "--snakefile",
                   str(checkout / "Snakefile"), "--configfile", str(checkout / config), "--directory", workdir]
        if config != "config.yaml":
            command.append("--replace-workflow-config")
        proc = subprocess.run(command, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"{checkout}: the dry run of {config} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
        return proc.stdout.replace(str(checkout.resolve()), "REPO").replace(str(checkout), "REPO")


def jobs(text: str) -> collections.Counter:
    """The planned jobs as (rule, wildcards, outputs, inputs, command) tuples, counted. A job of a
    group is printed indented inside its group's block; its command follows it unindented, up to
    the next blank line."""
    planned, job, in_command = collections.Counter(), None, False

    def close():
        if job is not None:
            planned[(job["rule"], job.get("wildcards", ""), job.get("output", ()), job.get("input", ()),
                     job.get("command", ""))] += 1

    for line in text.splitlines():
        stripped = line.strip()
        if match := JOB.match(stripped):
            close()
            job, in_command = {"rule": match.group(1)}, False
        elif job is None:
            continue
        elif stripped.startswith("Shell command: "):
            job["command"], in_command = stripped[len("Shell command: "):], True
        elif not stripped or stripped.startswith("["):  # a blank line, or a dated group header
            in_command = False
        elif in_command:
            job["command"] += "\n" + line  # a command that spans lines
        elif line.startswith(" ") and ": " in stripped:
            field, _, value = stripped.partition(": ")
            if field in FIELDS:
                job[field] = value if field == "wildcards" else tuple(sorted(value.split(", ")))
    close()
    return planned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="*", default=DEFAULT_CONFIGS, help="configs, relative to each checkout")
    parser.add_argument("--old", type=Path, required=True, help="the checkout to compare with (e.g. a clone of main)")
    parser.add_argument("--new", type=Path, default=REPO, help="the checkout under test (default: this one)")
    args = parser.parse_args()
    differ = False
    for config in args.configs:
        old, new = jobs(dry_run(args.old, config)), jobs(dry_run(args.new, config))
        if old == new:
            print(f"{config}: the same {sum(new.values())} jobs")
            continue
        differ = True
        print(f"{config}: {sum(old.values())} jobs planned before, {sum(new.values())} now; "
              f"{sum((old - new).values())} only before, {sum((new - old).values())} only now")
        for side, extra in (("only before", old - new), ("only now", new - old)):
            for job in list(extra)[:3]:
                print(f"  {side}: rule {job[0]} ({job[1]}): {job[4][:300]}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
