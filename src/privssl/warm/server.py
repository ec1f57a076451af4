"""The warm start's server (privssl.warm): imports the heavy libraries once, then forks a copy of
itself for each job the client hands over and reports the job's exit status back.

One thread, and no work before a fork but imports, so every child starts as a fresh interpreter
would after those imports: no thread pool, no CUDA context (torch creates both on first use, in
the child). The loop waits on the socket and on a self-pipe that SIGCHLD writes to, so a job's
status reaches its client as soon as the job ends. The server exits with its parent (Snakemake)."""

from __future__ import annotations

import argparse
import atexit
import builtins
import gc
import importlib
import io
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import threading
import types
import warnings

from privssl.warm.client import HEADER, STARTED, STATUS, receive

# third-party libraries the jobs import, heaviest first; never privssl (a run may edit it),
# nothing a job configures before import (matplotlib's backend: pyplot is left to the job), and
# nothing that may initialise CUDA on import (torch_geometric asks whether CUDA is available): a
# process forked after CUDA's initialisation cannot use CUDA
# (torch._dynamo: torch.optim imports it at a training's first step, ~1.5 s)
# read by an interpreter or a preloaded library when it starts, and not settable afterwards: a job
# whose value differs from the server's runs in a fresh interpreter
READ_AT_START = ("PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONDEVMODE", "PYTHONOPTIMIZE", "PYTHONIOENCODING",
                 "PYTHONUTF8", "PYTHONSAFEPATH", "PYTHONMALLOC", "MPLBACKEND", "MATPLOTLIBRC", "MPLCONFIGDIR",
                 "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_PRELOAD", "LD_LIBRARY_PATH")
PRELOADED = ("torch", "torch._dynamo", "torchvision", "numpy", "pandas", "scipy.stats", "scipy.optimize",
             "scipy.special", "matplotlib", "sklearn")


def preload() -> None:
    # quietly: an import's warning belongs to the job that would import it (here: the run's terminal)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in PRELOADED:
            try:
                importlib.import_module(name)
            except ImportError:  # an environment without it (the graph track's): its jobs import their own
                pass


def run_job(connection: socket.socket, streams: list[int], request: dict, base_path: list[str]) -> None:
    """In the forked child: become the job's `python SCRIPT ARGS…` and exit with its status."""
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(streams):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(request["umask"])
    os.nice(request["nice"] - os.nice(0))  # the server checked it is not below its own
    # what a fresh interpreter reads from its environment at start, set again for this one: the
    # BLAS and OpenMP pools (Snakemake gives each job its thread count), and the seeds of the
    # global generators, which a forked copy would share with every other job
    threads = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    if threads and threads.isdigit() and int(threads) > 0:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=int(threads))
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    script, *args = request["argv"]
    sys.argv = [script, *args]
    # as `python SCRIPT`: the script's folder first, then PYTHONPATH, then the interpreter's own
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.path.dirname(os.path.abspath(script)), *extra, *base_path]

    def watch() -> None:  # the client gone (the job cancelled): end the job with it
        if not connection.recv(1):
            os._exit(128 + signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()
    code = 0
    try:
        run_as_main(script)
    except SystemExit as exit_:
        if exit_.code is None:
            code = 0
        elif isinstance(exit_.code, int):
            code = exit_.code
        else:  # sys.exit("message"): printed, status 1, as the interpreter does
            print(exit_.code, file=sys.stderr)
            code = 1
    except BaseException as error:  # noqa: BLE001 - the interpreter's behaviour: sys.excepthook, status 1
        report_uncaught(error, os.path.abspath(script))
        code = 1
    # what a normal exit does for the job: non-daemon threads joined, atexit run, the globals of
    # __main__ finalised, the streams flushed (without them their writes are lost); then os._exit
    # skips the teardown of torch and the other preloaded modules, a second of CPU for each job
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.modules["__main__"].__dict__.clear()
        gc.collect()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def run_as_main(script: str) -> None:
    """Run the script as `python SCRIPT` does: its code in a module `__main__` that stays in
    sys.modules, so that the interpreter's exit finalises its globals as a fresh one would."""
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=script, __cached__=None, __builtins__=builtins)
    sys.modules["__main__"] = main
    with io.open_code(script) as handle:
        source = handle.read()
    exec(compile(source, script, "exec"), main.__dict__)


def runs_here(request: dict) -> bool:
    """Whether a forked copy of this server can be the job's fresh interpreter: the same settings
    read at start (READ_AT_START), and a niceness it can reach (a process may raise its own, not
    lower it)."""
    env = request["env"]
    same = all(env.get(name) == os.environ.get(name) for name in READ_AT_START)
    return same and request["nice"] >= os.nice(0)


def report_uncaught(error: BaseException, script: str) -> None:
    """What `python SCRIPT` does with an exception the script did not catch: sys.excepthook (the
    script's own where it set one, e.g. privssl.io.input_error_hook's one-line input errors; else
    the interpreter's traceback), given the traceback from the script's frame on, without this
    module's frames above it."""
    tb = error.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != script:
        tb = tb.tb_next
    # on the exception too: the interpreter's hook prints the exception's own __traceback__
    error = error.with_traceback(tb or error.__traceback__)
    sys.excepthook(type(error), error, error.__traceback__)


def exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # killed by signal s: 128 + s, as a shell says


def serve(socket_path: str, parent: int) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(64)  # clients that come while the imports run wait here
    preload()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():  # no job could use CUDA: clients fall back to fresh
        sys.exit("privssl warm start: CUDA was initialised by an import; the jobs run in fresh interpreters")
    base_path = sys.path[1:]  # without this module's own folder
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    jobs: dict[int, socket.socket] = {}
    while os.getppid() == parent:
        ready, _, _ = select.select([listener, wake_read], [], [], 1.0)
        if wake_read in ready:
            while True:
                try:
                    if not os.read(wake_read, 512):
                        break
                except BlockingIOError:
                    break
        if listener in ready:
            connection, _ = listener.accept()
            streams = []
            try:
                header, streams, _, _ = socket.recv_fds(connection, HEADER.size, 3)
                header += receive(connection, HEADER.size - len(header))
                request = json.loads(receive(connection, HEADER.unpack(header)[0]))
                if len(streams) != 3:
                    raise ValueError(f"{len(streams)} standard streams received, 3 expected")
                if not runs_here(request):
                    raise ValueError("the job's start-up settings differ from the server's")
            except (OSError, ValueError, KeyError, struct.error):  # the client runs the job fresh
                for fd in streams:
                    os.close(fd)
                connection.close()
                continue
            pid = os.fork()
            if pid == 0:
                listener.close()
                os.close(wake_read)
                os.close(wake_write)
                for other in jobs.values():
                    other.close()
                run_job(connection, streams, request, base_path)
            for fd in streams:
                os.close(fd)
            jobs[pid] = connection
            try:
                connection.sendall(STARTED)
            except OSError:  # the client is gone: its job ends with it (run_job's watch)
                pass
        while jobs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            connection = jobs.pop(pid, None)
            if connection is not None:
                try:
                    connection.sendall(STATUS.pack(exit_code(status)))
                except OSError:  # the client is gone
                    pass
                connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--parent", type=int, required=True, help="exit when this process is gone")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(args.socket, args.parent)


if __name__ == "__main__":
    main()
