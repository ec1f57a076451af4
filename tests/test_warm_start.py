"""The warm start (privssl.warm): a job handed to the server behaves as `python SCRIPT ARGS…` in a
fresh interpreter would (outputs byte for byte, exit status, streams, working directory,
environment, arguments), it runs forked from the server, it dies with its client, and without a
server or for another command line the client runs a fresh interpreter."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from privssl import warm

SRC = str(Path(__file__).resolve().parents[1] / "src")

JOB = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import torch
    torch.set_num_threads(int(sys.argv[2]))
    torch.manual_seed(7)
    weights = torch.randn(64, 32, dtype=torch.float64)
    for _ in range(20):  # a few steps of arithmetic whose float sums a changed thread pool would move
        weights = torch.tanh(weights @ torch.randn(32, 32, dtype=torch.float64)) * 0.5
    torch.save({"weights": weights, "draws": np.random.default_rng(3).random(5)}, sys.argv[1])
    print(json.dumps({"cwd": os.getcwd(), "argv": sys.argv, "job_env": os.environ.get("JOB_ONLY"),
                      "parent": os.getppid(), "name": __name__}))
    print("to stderr", file=sys.stderr)
    sys.exit(int(sys.argv[3]))
""")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A started warm start, its `python` first on PATH; stopped at the end of the module."""
    saved = {name: os.environ.get(name) for name in (warm.SOCKET, warm.PYTHON)}
    start = warm.WarmStart(sys.executable, SRC)  # sets them for the jobs of this process
    start.serve()
    deadline = time.monotonic() + 120
    while not os.path.exists(start.socket):
        assert start.server.poll() is None, "the server exited"
        assert time.monotonic() < deadline, "the server made no socket"
        time.sleep(0.05)
    yield start
    start.stop()
    assert not os.path.exists(start.bin)
    for name, value in saved.items():
        os.environ.pop(name) if value is None else os.environ.update({name: value})


def environment(server=None, **extra) -> dict:
    env = {**os.environ, "PYTHONPATH": SRC, **extra}
    if server is not None:
        env["PATH"] = os.pathsep.join([server.bin, os.path.dirname(sys.executable), env["PATH"]])
    return env


def run(command: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_a_warm_job_writes_what_a_fresh_interpreter_writes(server, tmp_path):
    import json

    script = tmp_path / "job.py"
    script.write_text(JOB)
    fresh_dir, warm_dir = tmp_path / "fresh", tmp_path / "warm"
    fresh_dir.mkdir(), warm_dir.mkdir()
    fresh = run([sys.executable, str(script), "out.pt", "2", "0"], fresh_dir, environment(JOB_ONLY="x"))
    warmed = run(["python", str(script), "out.pt", "2", "0"], warm_dir, environment(server, JOB_ONLY="x"))
    assert fresh.returncode == warmed.returncode == 0, (fresh.stderr, warmed.stderr)
    assert (fresh_dir / "out.pt").read_bytes() == (warm_dir / "out.pt").read_bytes()
    said = json.loads(warmed.stdout)
    assert said["parent"] == server.server.pid  # forked from the server, not a fresh interpreter
    assert said["cwd"] == str(warm_dir) and said["argv"] == [str(script), "out.pt", "2", "0"]
    assert said["job_env"] == "x" and said["name"] == "__main__"
    assert warmed.stderr == fresh.stderr == "to stderr\n"


@pytest.mark.parametrize("body, status, stderr", [
    ("import sys; sys.exit(3)", 3, ""),
    ("import sys; sys.exit('a message')", 1, "a message\n"),
    ("raise RuntimeError('boom')", 1, "RuntimeError: boom\n"),
    # the script's own sys.excepthook, as privssl.io.input_error_hook reports an input error in one line
    (("import sys; sys.excepthook = lambda kind, error, tb: print('job.py: error:', error, file=sys.stderr)\n"
      "raise ValueError('bad input')"), 1, "job.py: error: bad input\n"),
])
def test_exit_status_and_error_output_are_the_interpreters(server, tmp_path, body, status, stderr):
    script = tmp_path / "job.py"
    script.write_text(body + "\n")
    fresh = run([sys.executable, str(script)], tmp_path, environment())
    warmed = run(["python", str(script)], tmp_path, environment(server))
    assert fresh.returncode == warmed.returncode == status
    assert warmed.stderr.endswith(stderr) and warmed.stderr == fresh.stderr  # the traceback from the script's frame on


def test_a_cancelled_job_ends_with_its_client(server, tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(120)\n")
    client = subprocess.Popen(["python", str(script)], cwd=tmp_path, env=environment(server))
    deadline = time.monotonic() + 60
    while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    job = int((tmp_path / "pid").read_text())
    assert job != client.pid
    client.send_signal(signal.SIGTERM)  # as Snakemake cancels a job
    client.wait(timeout=30)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{job}").exists() and "zombie" not in Path(f"/proc/{job}/status").read_text():
        assert time.monotonic() < deadline, "the job outlived its client"
        time.sleep(0.05)


def test_without_a_server_or_for_another_command_the_job_runs_fresh(server, tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import os\nprint(os.getppid())\n")
    gone = environment(server, PRIVSSL_WARM_SOCKET=str(tmp_path / "no-socket"))
    ran = run(["python", str(script)], tmp_path, gone)
    assert ran.returncode == 0 and int(ran.stdout) != server.server.pid
    ran = run(["python", "-c", "import os; print(os.getppid())"], tmp_path, environment(server))
    assert ran.returncode == 0 and int(ran.stdout) != server.server.pid


def test_a_server_that_stops_before_it_starts_the_job_leaves_it_to_a_fresh_interpreter(server, tmp_path):
    """A server that takes the request and closes (it stopped, or found CUDA initialised) never
    started the job: the client runs it fresh rather than report a failure."""
    import socket
    import threading

    path = str(tmp_path / "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def take_and_close():
        connection, _ = listener.accept()
        connection.recv(65536)
        connection.close()

    threading.Thread(target=take_and_close, daemon=True).start()
    script = tmp_path / "job.py"
    script.write_text("print('ran')\n")
    ran = run(["python", str(script)], tmp_path, environment(server, PRIVSSL_WARM_SOCKET=path))
    listener.close()
    assert ran.returncode == 0 and ran.stdout == "ran\n", ran.stderr


def test_a_job_ends_as_an_interpreter_does_and_gets_its_own_start_up_settings(server, tmp_path):
    """Found by the referee: a non-daemon thread's work and a module global's finaliser are a
    normal exit's; the job's BLAS pool, umask and global seeds are its own; a setting read at
    start that differs from the server's (PYTHONHASHSEED) runs the job fresh."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import os, random, sys, threading, time
        import numpy as np
        from threadpoolctl import threadpool_info
        def late():
            time.sleep(0.5)
            open("thread.txt", "w").write("done")
        threading.Thread(target=late).start()
        held = open("global.txt", "w")
        held.write("flushed at exit")
        blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
        print(",".join(map(str, blas)), oct(os.umask(0)), np.random.random(), random.random(), os.getppid(),
              os.environ.get("PYTHONHASHSEED"))
    """))
    env = environment(server, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")  # the server started at 1
    first = run(["sh", "-c", "umask 077; python job.py"], tmp_path, env)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "thread.txt").read_text() == "done"
    assert (tmp_path / "global.txt").read_text() == "flushed at exit"
    blas, umask, numpy_draw, python_draw, parent, _ = first.stdout.split()
    assert set(blas.split(",")) == {"2"} and umask == "0o77" and int(parent) == server.server.pid
    second = run(["python", "job.py"], tmp_path, env).stdout.split()
    assert second[2] != numpy_draw and second[3] != python_draw  # not one shared generator state
    fresh = run(["python", "job.py"], tmp_path, environment(server, PYTHONHASHSEED="7")).stdout.split()
    assert int(fresh[4]) != server.server.pid and fresh[5] == "7"


@pytest.mark.parametrize("value, on", [("1", True), ("0", False), ("", False)])
def test_the_switch_accepts_1_or_0(value, on):
    assert warm.requested({warm.SWITCH: value}) is on


def test_a_bad_switch_is_refused_naming_the_value():
    with pytest.raises(ValueError, match=r"PRIVSSL_WARM_START='yes' is not allowed; allowed: 1"):
        warm.requested({warm.SWITCH: "yes"})
