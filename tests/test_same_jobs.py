"""benchmarks/same_jobs.py reads a dry run job by job: a job printed inside a job group (indented)
counts like any other, and a command ends at a blank line or at the dated header that follows it,
so two checkouts' plans compare job for job (rule, wildcards, inputs, outputs, command)."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "same_jobs.py"
spec = importlib.util.spec_from_file_location("same_jobs", SCRIPT)
same_jobs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(same_jobs)

# the shape of `snakemake -n -p` (Snakemake 9): a plain job, then a group whose members are indented
# and whose first member's command is followed directly by the next dated line
DRY_RUN = """Job stats:
job      count
data         1
total        3

[Fri Dec  4 19:43:22 2026]
rule data:
    input: REPO/scripts/prepare_data.py
    output: results/d/splits.json
    wildcards: dataset=d
    resources: tmpdir=/tmp
Shell command: python prepare_data.py --seed 1 --out results/d/splits.json

[Fri Dec  4 19:43:22 2026] Group job d_encoder (jobs in lexicogr. order):

    [Fri Dec  4 19:43:22 2026]
    rule pretrain:
        input: results/d/splits.json, REPO/scripts/pretrain.py
        output: results/d/encoder.pt
        wildcards: dataset=d
Shell command: python pretrain.py --seed 2
[Fri Dec  4 19:43:22 2026] Group job d_noise (jobs in lexicogr. order):

    [Fri Dec  4 19:43:22 2026]
    localrule encode:
        input: REPO/scripts/encode.py, results/d/encoder.pt
        output: results/d/features.pt
        wildcards: dataset=d
Shell command: python encode.py
  --batch 64

This was a dry-run (flag -n). The order of jobs does not reflect the order of execution.
"""


def test_every_job_of_a_dry_run_is_read_with_its_own_command_including_a_groups_members():
    planned = same_jobs.jobs(DRY_RUN)
    assert planned == {
        ("data", "dataset=d", ("results/d/splits.json",), ("REPO/scripts/prepare_data.py",),
         "python prepare_data.py --seed 1 --out results/d/splits.json"): 1,
        ("pretrain", "dataset=d", ("results/d/encoder.pt",), ("REPO/scripts/pretrain.py", "results/d/splits.json"),
         "python pretrain.py --seed 2"): 1,
        ("encode", "dataset=d", ("results/d/features.pt",), ("REPO/scripts/encode.py", "results/d/encoder.pt"),
         "python encode.py\n  --batch 64"): 1}


def test_a_changed_seed_or_input_order_is_a_different_job_and_the_inputs_listing_order_is_not():
    planned = same_jobs.jobs(DRY_RUN)
    assert same_jobs.jobs(DRY_RUN.replace("--seed 2", "--seed 3")) != planned
    assert same_jobs.jobs(DRY_RUN.replace("output: results/d/encoder.pt", "output: results/d/encoder2.pt")) != planned
    # Snakemake may list a rule's named inputs in another order; the command holds the order that matters
    swapped = DRY_RUN.replace("input: results/d/splits.json, REPO/scripts/pretrain.py",
                              "input: REPO/scripts/pretrain.py, results/d/splits.json")
    assert same_jobs.jobs(swapped) == planned
