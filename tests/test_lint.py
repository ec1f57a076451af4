"""The workflow passes `snakemake --lint` and `snakefmt --check`, and the report captions are
valid reStructuredText (Snakemake renders them with docutils)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import docutils.core
import docutils.utils
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*cmd: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}
    env.pop("SNAKEMAKE_PROFILE", None)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_snakemake_lint_is_clean():
    proc = run(sys.executable, "-m", "snakemake", "--lint")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in out, out[-4000:]


def test_snakefmt_check_is_clean():
    proc = run(str(BIN / "snakefmt"), "--check", ".")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]


@pytest.mark.parametrize("caption", sorted(p.name for p in (REPO / "report").glob("*.rst")))
def test_report_caption_renders_without_warnings(caption):
    text = (REPO / "report" / caption).read_text()
    # halt at warnings (level 2): an undefined substitution such as |d| raises instead of rendering
    try:
        docutils.core.publish_string(text, writer="html",
                                     settings_overrides={"halt_level": 2, "report_level": 5})
    except docutils.utils.SystemMessage as err:
        pytest.fail(f"report/{caption}: {err}")
