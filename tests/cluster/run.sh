#!/usr/bin/env bash
# `make test-cluster`: start the single-node SLURM cluster, run the workflow's cluster checks
# (check.py) through profiles/slurm, and stop the cluster again, also when a check fails or the
# run is interrupted. Needs root and apt-get (see start.sh); the virtualenv's python first on PATH.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)
trap 'bash "$here/stop.sh"; echo "cluster: make test-cluster took $(( $(date +%s) - start )) s"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
bash "$here/start.sh" || exit 1
python "$here/check.py"
