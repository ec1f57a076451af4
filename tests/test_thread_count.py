"""--threads of every script: torch's intra-op threads, refused above the CPUs the job may run on
(its affinity: what a cluster allocated, or the machine), since a lowered count would change the
results and a larger one oversubscribes the CPUs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# a process pinned to one CPU, as a one-CPU cluster allocation is, parsing --threads as a script does
PINNED = """
import argparse, os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from privssl.cli import thread_count
parser = argparse.ArgumentParser(prog="job")
parser.add_argument("--threads", type=thread_count)
print(parser.parse_args(sys.argv[1:]).threads)
"""


def pinned(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PINNED, *args], env={"PYTHONPATH": str(REPO / "src")},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_a_job_pinned_to_one_cpu_takes_one_thread_and_refuses_two():
    assert pinned("--threads", "1").stdout == "1\n"
    refused = pinned("--threads", "2")
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1] == ("job: error: argument --threads: 2 threads, but this job may run on 1 "
                                               "CPUs (allowed: 1..1; config torch_threads, which results depend on)")


def test_zero_threads_is_refused():
    assert "0 threads" in pinned("--threads", "0").stderr


def test_every_script_with_threads_checks_the_count():
    # a script parsing --threads as a bare int would run 512 threads on a 2-CPU job
    for script in sorted((REPO / "scripts").glob("*.py")):
        text = script.read_text()
        if '"--threads"' in text:
            assert '"--threads", type=thread_count' in text, script.name
