# privssl: privacy attacks and defences on self-supervised learning.
# One DAG from data to figures; see README.md. Each rule runs one script of scripts/.

import importlib.util
import os
import shlex
import sys

from snakemake.exceptions import WorkflowError
from snakemake.settings.types import DeploymentMethod
from snakemake.logging import logger
from snakemake.utils import min_version

min_version("8.0")

# The library is used from the source tree (no install needed, also inside conda envs).
SRC = os.path.join(workflow.basedir, "src")
sys.path.insert(0, SRC)
USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method

from privssl import job_env, warm

if not USE_CONDA and importlib.util.find_spec("torch") is None:
    raise WorkflowError(
        f"{sys.executable} runs this workflow without conda but cannot import torch: run "
        "`make run`, activate the project's virtualenv (. .venv/bin/activate), or add --use-conda."
    )
# Every job: bash strict mode, src/ on PYTHONPATH, and without conda the interpreter that runs
# Snakemake first on PATH, so that `.venv/bin/snakemake` works without activating the venv.
# (shell.prefix formats its argument: {{ }} are literal braces.)
JOB_PATH = "" if USE_CONDA else f"export PATH={shlex.quote(os.path.dirname(sys.executable))}:$PATH; "
# glibc keeps freed memory for the next training step instead of faulting it in again
# (privssl.job_env): set here, before the warm-start server and any job are started.
job_env.apply(os.environ)
# PRIVSSL_WARM_START=1 (local runs without conda): jobs fork from one interpreter that imported
# torch once, ~2.5 s of CPU less per job here (privssl.warm; the benchmark files then measure the
# client only). Its `python` goes first on the jobs' PATH; without its server (a dry run, a
# cluster's jobs) that `python` runs the job in a fresh interpreter.
try:
    WARM_START = warm.WarmStart(sys.executable, SRC) if warm.requested() and not USE_CONDA else None
except ValueError as err:
    raise WorkflowError(str(err))
if WARM_START is not None:
    JOB_PATH = f"export PATH={shlex.quote(WARM_START.bin)}:{shlex.quote(os.path.dirname(sys.executable))}:$PATH; "
PYTHONPATH = f"export PYTHONPATH={shlex.quote(SRC)}${{{{PYTHONPATH:+:$PYTHONPATH}}}}; "
shell.prefix(f"set -euo pipefail; {PYTHONPATH}{JOB_PATH}")

from privssl.config import load_config_file, validate_config
from privssl.config_checks import advisories

# Snakemake names neither the file nor the line of a YAML error in config.yaml, and lets the last
# of a key given twice win silently: every config file is read strictly first. (A --configfile is
# parsed by Snakemake before this runs: its YAML errors show the line only with --verbose.)
for config_path in [*workflow.overwrite_configfiles, "config.yaml"]:
    if os.path.exists(config_path):
        load_config_file(config_path)


configfile: "config.yaml"


# --config overrides: Snakemake reads the values nested in one as strings; validation re-reads them
validate_config(
    config,
    os.path.join(workflow.basedir, "schemas", "config.schema.yaml"),
    overrides=workflow.config_settings.config,
)


for advisory in advisories(config):
    logger.warning(advisory)


include: "rules/common.smk"
include: "rules/resources.smk"
include: "rules/data.smk"
include: "rules/pretrain.smk"
include: "rules/tuning.smk"
include: "rules/finetune.smk"
include: "rules/sensitivity.smk"
include: "rules/protect.smk"
include: "rules/attack.smk"
include: "rules/audit.smk"
include: "rules/contrastive_targets.smk"
include: "rules/contrastive_attack.smk"
include: "rules/semileak.smk"
include: "rules/training_time.smk"
include: "rules/figures.smk"
include: "rules/graph.smk"


onstart:
    # only where the jobs run on this machine: a cluster's jobs find no socket and run fresh
    if WARM_START is not None and workflow.local_exec:
        WARM_START.serve()


rule all:
    default_target: True
    input:
        final_outputs(),
