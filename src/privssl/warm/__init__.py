"""Warm start of the jobs' interpreters: an opt-in for local runs (PRIVSSL_WARM_START=1).

Most of the DAG's jobs are short, and each pays for a fresh Python that imports torch: 2.5 s of
CPU on the 2-core machines of docs/benchmarks.md, 10-15 s on the GPU machines, against 4-5 s of
work for two thirds of the tiny config's jobs. With the warm start, the Snakefile starts one
server per run that imports the heavy third-party libraries once (`server.PRELOADED`; never
privssl, whose code a run may be editing), and puts a `python` first on every job's PATH that
hands the job's command line, working directory, environment and standard streams to that
server, which forks a copy of itself to run the script. The script, its arguments, its seeds,
its threads and its files are the job's own, so its outputs are those of a fresh interpreter.

What changes: a job's process is a child of the server, not of Snakemake's shell, so the rule's
`benchmark:` file measures the client only (measure with the warm start off); and a job is killed
with its client (Snakemake's cancel), through the connection. Anything the client cannot hand
over (no server, a `python -c` or `-m` command, a cluster node without the socket) runs in a
fresh interpreter as before. With --use-conda every job runs its env's interpreter: no warm start.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

SWITCH = "PRIVSSL_WARM_START"  # "1": warm start on
SOCKET = "PRIVSSL_WARM_SOCKET"  # the server's Unix socket, for the client
PYTHON = "PRIVSSL_WARM_PYTHON"  # the interpreter a job falls back to


def requested(environ=os.environ) -> bool:
    value = environ.get(SWITCH, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"{SWITCH}={value!r} is not allowed; allowed: 1 (warm start) or 0 / unset (off)")
    return value == "1"


class WarmStart:
    """The warm start of one run: `bin` is the folder of the `python` client, to put first on the
    jobs' PATH when the Snakefile is read; `serve()` starts the server when jobs are about to run
    (Snakemake's onstart: a dry run starts none, and its jobs' clients would run fresh). The
    folder, the socket and the server go with this process."""

    def __init__(self, python: str, pythonpath: str):
        self.python, self.pythonpath = python, pythonpath
        # a short temporary folder: a Unix socket's path is limited to 107 bytes
        self.bin = tempfile.mkdtemp(prefix="privssl-warm-")
        self.socket = os.path.join(self.bin, "socket")
        client = Path(__file__).with_name("client.py")
        shim = Path(self.bin) / "python"
        # -S: the client needs the standard library only, and starts in milliseconds without site
        shim.write_text(f"#!/bin/sh\nexec {shlex.quote(python)} -S {shlex.quote(str(client))} \"$@\"\n")
        shim.chmod(0o755)
        os.environ[SOCKET], os.environ[PYTHON] = self.socket, python
        self.server: subprocess.Popen | None = None
        atexit.register(self.stop)

    def serve(self) -> None:
        environ = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (self.pythonpath, os.environ.get("PYTHONPATH")) if p)}
        self.server = subprocess.Popen([self.python, "-m", "privssl.warm.server", "--socket", self.socket,
                                        "--parent", str(os.getpid())], env=environ, stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.server.kill()
        shutil.rmtree(self.bin, ignore_errors=True)
