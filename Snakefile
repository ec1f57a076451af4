# privssl: privacy attacks and defences on self-supervised learning.
# One DAG from data to figures; see README.md. Each rule runs one script of scripts/.

import os
import sys

from snakemake.utils import min_version

min_version("8.0")

configfile: "config.yaml"

# The library is used from the source tree (no install needed, also inside conda envs).
SRC = os.path.join(workflow.basedir, "src")
sys.path.insert(0, SRC)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)

from privssl.config import validate_config

validate_config(config, os.path.join(workflow.basedir, "schemas", "config.schema.yaml"))


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/pretrain.smk"
include: "rules/finetune.smk"
include: "rules/sensitivity.smk"
include: "rules/protect.smk"
include: "rules/attack.smk"
include: "rules/audit.smk"
include: "rules/figures.smk"
include: "rules/graph.smk"


rule all:
    input:
        final_outputs(),
    default_target: True
