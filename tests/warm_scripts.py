"""The `python` that the tests of the rules' scripts start them with: the warm start's client
(privssl.warm), whose server, one per test process, imported torch and the other heavy libraries
once. A script test then pays its script's work, not the 3–4 s of CPU of torch's and
`torch._dynamo`'s imports, which is most of what a script test costs on 2 cores. A forked script
writes the files, standard streams and exit status of a fresh interpreter (tests/test_warm_start.py),
as the jobs of `make run` do; the client runs the script fresh where it cannot hand it over (`-c`,
another start-up environment, no server)."""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path

from privssl import warm

SRC = str(Path(__file__).resolve().parents[1] / "src")


@functools.cache
def script_python() -> str:
    """The client's `python`; the server starts on the first call and stops with this process."""
    start = warm.WarmStart(sys.executable, SRC)  # its socket and interpreter: in os.environ, for the scripts
    start.serve()
    # the socket is bound before the imports: from then on a script waits for the server rather
    # than run fresh, so every script test runs warm, not only those after the first
    deadline = time.monotonic() + 60
    while not os.path.exists(start.socket) and start.server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return os.path.join(start.bin, "python")
