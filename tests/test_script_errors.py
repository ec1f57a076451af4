"""A script run with a missing or malformed input says so in one line, `<script>: error: <message>`,
and exits with status 1 (a Snakemake job then fails, the line in its log); any other exception, a
bug, keeps its traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from warm_scripts import script_python

from privssl.artefacts.specs import ArtefactError
from privssl.io import input_error_hook

REPO = Path(__file__).resolve().parents[1]


def test_a_script_with_a_missing_input_says_so_in_one_line(tmp_path):
    missing = tmp_path / "features.pt"
    args = ["--dataset", "digits", "--method", "none", "--features", missing, "--splits", tmp_path / "splits.json",
            "--heads", tmp_path / "heads.pt", "--attacks", "loss", "--fpr", "0.01", "--delta", "1e-5",
            "--out-csv", tmp_path / "lira.csv", "--out-scores", tmp_path / "scores.parquet",
            "--out-audit", tmp_path / "audit.csv"]
    proc = subprocess.run([script_python(), REPO / "scripts" / "lira.py", *map(str, args)],
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [(f"lira.py: error: {missing}: not readable (FileNotFoundError: [Errno 2] No "
                                         f"such file or directory: '{missing}') (expected a complete file written by "
                                         f"torch.save)")]


def reported(error: BaseException, monkeypatch, capsys, argv: list[str]) -> str:
    monkeypatch.setattr(sys, "argv", argv)
    try:
        raise error
    except BaseException as raised:  # noqa: BLE001 - the hook is handed whatever reached the top
        input_error_hook(type(raised), raised, raised.__traceback__)
    return capsys.readouterr().err


@pytest.mark.parametrize("error, line", [
    (ArtefactError("results/x.csv: field 'eps': nan (expected a finite number)"),
     "protect.py: error: results/x.csv: field 'eps': nan (expected a finite number)\n"),
    # a missing input named on the command line, and one the data loaders describe in their own words
    (FileNotFoundError(2, "No such file or directory", "results/in.pt"),
     "protect.py: error: [Errno 2] No such file or directory: 'results/in.pt'\n"),
    (FileNotFoundError("cifar10 not found under data root data"),
     "protect.py: error: cifar10 not found under data root data\n"),
])
def test_an_input_error_is_one_line(monkeypatch, capsys, error, line):
    assert reported(error, monkeypatch, capsys, ["scripts/protect.py", "--release", "results/in.pt"]) == line


@pytest.mark.parametrize("error", [KeyError("eps"), ValueError("shapes disagree"),
                                   FileNotFoundError(2, "No such file or directory", "/tmp/made/up/by/a/bug.pt")])
def test_any_other_error_keeps_its_traceback(monkeypatch, capsys, error):
    shown = reported(error, monkeypatch, capsys, ["scripts/protect.py", "--release", "results/in.pt"])
    assert shown.startswith("Traceback (most recent call last):") and "in reported" in shown
    assert shown.endswith(f"{type(error).__name__}: {error}\n")


def test_rmia_without_its_population_is_refused_before_any_input_is_read(tmp_path):
    args = ["--dataset", "digits", "--method", "none", "--features", tmp_path / "missing.pt", "--splits",
            tmp_path / "splits.json", "--heads", tmp_path / "heads.pt", "--attacks", "lira_online", "rmia_offline",
            "--fpr", "0.01", "--delta", "1e-5", "--out-csv", tmp_path / "lira.csv",
            "--out-scores", tmp_path / "scores.parquet", "--out-audit", tmp_path / "a.csv"]
    proc = subprocess.run([script_python(), REPO / "scripts" / "lira.py", *map(str, args)],
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == "lira.py: error: --attacks rmia_offline need --population (RMIA's z)"


def test_the_crafted_pair_refuses_a_release_of_another_head_before_any_input_is_read(tmp_path):
    args = ["--dataset", "digits", "--sensitivity", tmp_path / "missing.json", "--methods", "certified_gaussian",
            "gaussian", "--releases", tmp_path / "a.pt", tmp_path / "b.pt", "--eps", "1", "--draws", "100",
            "--delta", "1e-5", "--out", tmp_path / "out.csv"]
    proc = subprocess.run([script_python(), REPO / "scripts" / "audit_crafted_pair.py", *map(str, args)],
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == ("audit_crafted_pair.py: error: --methods 'gaussian' does not release the "
                                            "certified head; allowed: the methods whose head is 'certified' "
                                            "(privssl.release.methods)")
    assert not (tmp_path / "out.csv").exists()
