# What each job asks a scheduler for: the peak memory and run time measured on a default run
# (benchmarks/measured_peaks.csv, from the rules' benchmark TSVs by benchmarks/measure_peaks.py),
# times a margin, times the dataset's own scale where a config gives one (the paper presets:
# `datasets.<name>.resources`), times the attempt (a job retried after running out of memory or
# time asks for twice as much).
import csv
import math
from pathlib import Path

MEMORY_MARGIN = 2.0  # run-to-run, thread-count and library-version variation of the peak RSS
RUNTIME_MARGIN = 3.0  # a loaded node or a slower CPU than the measuring one
RUNTIME_FLOOR_MIN = 10  # scheduling granularity: a few seconds of measured work still gets minutes
PEAKS_FILE = Path(workflow.basedir, "benchmarks", "measured_peaks.csv")
MEASURED_PEAKS = {row["rule"]: row for row in csv.DictReader(PEAKS_FILE.read_text().splitlines())}


def dataset_scale(wildcards, key):
    """The config's `resources.<key>` of the job's dataset or graph (1 when absent)."""
    dataset = getattr(wildcards, "dataset", None)
    entry = config["datasets"].get(dataset) or config.get("graphs", {}).get(dataset) or {}
    return entry.get("resources", {}).get(key, 1)


def measured(name, column):
    if name not in MEASURED_PEAKS:
        raise WorkflowError(
            f"no measured peak for {name!r} in benchmarks/measured_peaks.csv; measure it by running the default "
            f"config cold (`make run PRIVSSL_WARM_START=0`) and then `python benchmarks/measure_peaks.py` "
            f"(measured: {', '.join(sorted(MEASURED_PEAKS))})"
        )
    return float(MEASURED_PEAKS[name][column])


def job_memory(rule, scale=dataset_scale):
    """mem_mb of the rule's jobs, rounded up to 100 MB; `scale(wildcards, key)`: the dataset's scale."""
    peak = measured(rule, "max_rss_mb")
    return lambda wildcards, attempt: 100 * math.ceil(
        peak * MEMORY_MARGIN * scale(wildcards, "mem_scale") * attempt / 100
    )


def job_runtime(rule, scale=dataset_scale):
    """runtime (minutes) of the rule's jobs."""
    seconds = measured(rule, "s")
    return lambda wildcards, attempt: math.ceil(
        max(RUNTIME_FLOOR_MIN, seconds * RUNTIME_MARGIN / 60) * scale(wildcards, "runtime_scale") * attempt
    )
