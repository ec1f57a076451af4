# Two set-up commands on a fresh machine with only Python 3: `make run` and `make test`.
# Each creates .venv and installs the pinned requirements into it when they are missing.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
CORES ?= 2
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: run test dry-run report benchmark clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --upgrade pip
	$(VENV)/bin/pip install -r requirements.txt
	$(VENV)/bin/pip install --no-deps -e .
	touch $(STAMP)

run: $(STAMP)
	snakemake --cores $(CORES) --rerun-incomplete

dry-run: $(STAMP)
	snakemake -n

report: $(STAMP)
	snakemake --report results/report.html

test: $(STAMP)
	python -m pytest

benchmark: $(STAMP)
	python benchmarks/sensitivity.py
	python benchmarks/link_features.py
	python benchmarks/lira.py

clean:
	rm -rf results .snakemake
