"""benchmarks/measure_peaks.py refuses the benchmark files of a warm-start run (`make run`'s
default), which measure the client that hands the job over, not the job: the peaks of
benchmarks/measured_peaks.csv are what a cluster's jobs are given, so a client's 14 MB there would
kill every job."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "measure_peaks.py"
spec = importlib.util.spec_from_file_location("measure_peaks", SCRIPT)
measure_peaks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(measure_peaks)

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def benchmark(root: Path, name: str, rss: float) -> Path:
    path = root / "digits" / "benchmarks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    # the rows of the warm (13.76 MB) and cold (519.7 MB) `data` job of the default config
    path.write_text(HEADER + f"6.07\t0:00:06\t{rss}\t17.44\t4.85\t6.51\t0.00\t0.00\t0.00\t0.01\n")
    return path


def test_only_the_files_that_measured_a_client_are_named(tmp_path):
    warm = benchmark(tmp_path, "data.tsv", 13.76)
    cold = benchmark(tmp_path, "pretrain.tsv", 519.7)
    assert measure_peaks.warm_start_files([warm, cold]) == [warm]


def test_a_warm_start_run_is_refused_and_the_measured_peaks_are_kept(tmp_path, monkeypatch):
    benchmark(tmp_path, "pretrain.tsv", 519.7)
    warm = benchmark(tmp_path, "data.tsv", 13.76)
    out = tmp_path / "measured_peaks.csv"
    out.write_text("rule,max_rss_mb,s,jobs,measured\ndata,519.7,1.8,1,2026-12-02\n")
    before = out.read_bytes()
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--results", str(tmp_path), "--out", str(out)])
    with pytest.raises(SystemExit) as refused:
        measure_peaks.main()
    message = str(refused.value.code)
    assert str(warm) in message and "PRIVSSL_WARM_START=0" in message, message
    assert out.read_bytes() == before
