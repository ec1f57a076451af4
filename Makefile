# Two set-up commands on a fresh machine with only Python 3: `make run` and `make test`.
# Each creates .venv and installs the pinned requirements into it when they are missing.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
CORES ?= 2
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: run test dry-run report lint benchmark clean test-cluster rulegraph docs mutants

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "privssl needs Python >= 3.11 \
	(the pinned numpy 2.4 and pandas 3.1 have no builds for older ones), but $(PYTHON) is \
	$$($(PYTHON) --version 2>&1): run make PYTHON=python3.11 (or newer)."; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --upgrade pip
	$(VENV)/bin/pip install -r requirements.txt
	$(VENV)/bin/pip install --no-deps -e .
	touch $(STAMP)

# --max-threads 1: the scheduler gives every job one core, so the paper's chain (rule priority,
# rules/common.smk) starts each job as soon as it is ready; a script still runs the torch threads
# of config `torch_threads`, so the outputs are those of any other scheduling.
# PRIVSSL_WARM_START=1: every job forks from one interpreter that imported torch once
# (src/privssl/warm; outputs byte for byte a fresh interpreter's): most of the default's ~100 jobs
# are seconds of work behind seconds of imports (docs/benchmarks.md). Its jobs' benchmark files then
# measure the client only: `make run PRIVSSL_WARM_START=0` to measure each job's CPU and memory.
PRIVSSL_WARM_START ?= 1
run: $(STAMP)
	PRIVSSL_WARM_START=$(PRIVSSL_WARM_START) snakemake --cores $(CORES) --max-threads 1 --rerun-incomplete \
	--show-failed-logs

dry-run: $(STAMP)
	snakemake -n

report: $(STAMP)
	snakemake --report results/report.html

# One worker per core, a test module per worker, the whole-DAG module first (tests/conftest.py).
test: $(STAMP)
	python -m pytest -n $(CORES) --dist loadfile --no-loadscope-reorder --durations=20

lint: $(STAMP)
	snakemake --lint
	snakefmt --check .
	lint-imports

# docs/results.md: the default run's digest of results (every figure beside its file and column).
docs: $(STAMP)
	snakemake --cores $(CORES) --rerun-incomplete results/digest.md
	cp results/digest.md docs/results.md

# docs/rulegraph.svg: the DAG's rules (`snakemake --rulegraph`) drawn by Graphviz's dot
# (Debian package graphviz); rerun after adding or renaming a rule.
rulegraph: $(STAMP)
	snakemake --rulegraph --quiet all | dot -Tsvg > docs/rulegraph.svg.tmp
	mv docs/rulegraph.svg.tmp docs/rulegraph.svg

# The workflow through a single-node SLURM cluster that tests/cluster/start.sh installs and
# starts (root and apt-get needed); stopped again whatever the outcome. A few minutes.
test-cluster: $(STAMP)
	bash tests/cluster/run.sh

# Mutation testing (docs/testing.md): mutmut over the modules the verdicts rest on, one mutant at
# a time, with each module's score and wall time; MODULES="audit/bounds.py accounting/" runs some,
# MUTANTS_ARGS="--record --idle no" appends the wall times to benchmarks/timings.csv.
# Not part of `make test`. The pinned mutmut (requirements-dev.txt) is installed on first use.
DEV_STAMP := $(VENV)/.installed-dev
$(DEV_STAMP): requirements-dev.txt $(STAMP)
	$(VENV)/bin/pip install -r requirements-dev.txt
	touch $(DEV_STAMP)

mutants: $(DEV_STAMP)
	python benchmarks/mutants.py $(MUTANTS_ARGS) $(MODULES)

benchmark: $(STAMP)
	python benchmarks/sensitivity.py
	python benchmarks/link_features.py
	python benchmarks/lira.py

clean:
	rm -rf results .snakemake
