"""benchmarks/gpu/collect.py: job names and wall times from Snakemake's benchmark files, and the
GPU-to-CPU speed-up of each job."""

import csv
import importlib.util
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("collect", Path(__file__).parents[1] / "benchmarks/gpu/collect.py")
collect = importlib.util.module_from_spec(spec)
spec.loader.exec_module(collect)

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def benchmark(root: Path, name: str, seconds: float, rss: float = 100.0, cpu: float = 1.0) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{seconds}\t0:00:01\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\n")


def test_each_benchmark_file_is_one_job_named_by_its_path(tmp_path):
    benchmark(tmp_path, "digits/benchmarks/pretrain.tsv", 12.5, rss=300, cpu=20)
    benchmark(tmp_path, "sbm/benchmarks/link/steal_3.tsv", 2.0)
    (tmp_path / "digits/pretrain").mkdir()
    (tmp_path / "digits/pretrain/history.tsv").write_text("not a benchmark\n")
    rows = collect.job_times(tmp_path)
    assert rows == [{"job": "digits/pretrain", "wall_s": 12.5, "max_rss_mb": "300", "cpu_time_s": "20"},
                    {"job": "sbm/link/steal_3", "wall_s": 2.0, "max_rss_mb": "100.0", "cpu_time_s": "1.0"}]


def test_a_run_without_benchmark_files_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no benchmark files under"):
        collect.job_times(tmp_path)


def test_the_speedup_is_the_baseline_time_over_this_runs():
    rows = [{"job": "a", "wall_s": 10.0}, {"job": "b", "wall_s": 4.0}]
    got = collect.with_ratios(rows, [{"job": "a", "wall_s": "160"}, {"job": "c", "wall_s": "1"}])
    assert got == [{"job": "a", "wall_s": 10.0, "baseline_wall_s": 160.0, "speedup": 16.0},
                   {"job": "b", "wall_s": 4.0, "baseline_wall_s": "", "speedup": ""}]


def test_timings_rows_name_the_device_and_the_ratio(tmp_path):
    timings = tmp_path / "timings.csv"
    timings.write_text("date,command,commit,jobs,wall_s,user_s,cores,idle,tests,note\n")
    rows = collect.with_ratios([{"job": "x/pretrain", "wall_s": 15.5}], [{"job": "x/pretrain", "wall_s": "250"}])
    collect.append_timings(rows, timings, "NVIDIA H200", "configs/gpu-smoke.yaml", "abc1234", "no")
    row = list(csv.DictReader(open(timings)))[0]
    assert (row["command"], row["commit"], row["wall_s"], row["idle"]) == (
        "snakemake --configfile configs/gpu-smoke.yaml job x/pretrain", "abc1234", "15.5", "no")
    assert row["note"] == "on NVIDIA H200; 16.129x the 2-core CPU's 250.0 s"
