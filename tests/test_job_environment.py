"""Calling the venv's snakemake without activating the venv: the jobs run on the interpreter
that runs Snakemake (not on whatever `python` is first on PATH), and an interpreter that cannot
import torch is refused at start with one sentence, before any job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_workflow import REPO, output_of, tiny_config, write_config

pytestmark = pytest.mark.workflow

# A PATH whose `python` (if any) is not this interpreter: the system's directories only.
BARE_PATH = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin")
                            if Path(sys.executable).parent != Path(p))


def snakemake_without_venv(workdir: Path, config: Path, *args: str, prelude: str = "") -> subprocess.CompletedProcess:
    """`snakemake` run by this interpreter's absolute path, the venv not on PATH."""
    code = f"import sys; {prelude}from snakemake.cli import main; sys.argv = ['snakemake'] + sys.argv[1:]; main()"
    cmd = [sys.executable, "-c", code, "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--cores", "1", *args, "--configfile", str(config)]
    env = {k: v for k, v in os.environ.items() if k not in ("SNAKEMAKE_PROFILE", "VIRTUAL_ENV", "PYTHONPATH")}
    return subprocess.run(cmd, env={**env, "PATH": BARE_PATH}, cwd=workdir, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def tiny(tmp_path) -> tuple[Path, Path]:
    workdir = tmp_path / "run"
    workdir.mkdir()
    return workdir, write_config({**tiny_config(), "data_root": str(tmp_path / "data")}, tmp_path / "tiny.yaml")


def test_jobs_run_on_the_interpreter_that_runs_snakemake(tiny):
    workdir, config = tiny
    proc = snakemake_without_venv(workdir, config, "results/digits/splits.json")
    assert proc.returncode == 0, output_of(proc)[-4000:]
    assert (workdir / "results" / "digits" / "splits.json").is_file()


def test_an_interpreter_without_torch_is_refused_before_any_job(tiny):
    workdir, config = tiny
    # torch hidden from this interpreter: importlib finds no spec for it
    proc = snakemake_without_venv(workdir, config, "results/digits/splits.json", prelude="sys.modules['torch'] = None; ")
    assert proc.returncode != 0
    assert "cannot import torch" in output_of(proc) and "--use-conda" in output_of(proc), output_of(proc)[-3000:]
    assert not (workdir / "results").exists(), "a job ran although the interpreter lacks torch"
