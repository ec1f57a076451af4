"""The `python` a job runs under the warm start (privssl.warm): it hands `python SCRIPT ARGS…` to
the server with its working directory, environment and standard streams, waits for the job's
exit status and exits with it. Anything else, or no server to take it, runs in a fresh interpreter
(PRIVSSL_WARM_PYTHON). Standard library only: it runs with `python -S`, in milliseconds."""

import json
import os
import socket
import struct
import sys

HEADER = struct.Struct("!I")  # the request's length
STARTED = b"\x01"  # the server's first reply: the job's process is forked
STATUS = struct.Struct("!i")  # its second: the job's exit status


def fresh(python: str, args: list[str]) -> None:
    os.execv(python, [python, *args])


def receive(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return data
        data += chunk
    return data


def main() -> None:
    args, python = sys.argv[1:], os.environ.get("PRIVSSL_WARM_PYTHON") or sys.executable
    socket_path = os.environ.get("PRIVSSL_WARM_SOCKET", "")
    # only `python SCRIPT …`: an option (-c, -m, -u, …) is the interpreter's to read
    if not socket_path or not args or args[0].startswith("-") or not os.path.isfile(args[0]):
        fresh(python, args)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(socket_path)
    except OSError:  # no server (stopped, or another machine of a cluster): as without warm start
        fresh(python, args)
    umask = os.umask(0)
    os.umask(umask)
    request = json.dumps({"argv": args, "cwd": os.getcwd(), "env": dict(os.environ), "umask": umask,
                          "nice": os.nice(0)}).encode()
    try:
        # the streams travel as file descriptors with the header; the request follows in full
        socket.send_fds(connection, [HEADER.pack(len(request))], [0, 1, 2])
        connection.sendall(request)
        started = receive(connection, len(STARTED))
    except OSError:
        started = b""
    if started != STARTED:  # the server stopped before it forked the job: nothing ran yet
        connection.close()
        fresh(python, args)
    # killed here (Snakemake cancels the job), the connection closes and the server's child exits
    try:
        reply = receive(connection, STATUS.size)
    except OSError:
        reply = b""
    if len(reply) < STATUS.size:
        print(f"privssl warm start: the job `python {' '.join(args)}` ended without an exit status "
              "(its process was killed, or the server stopped)", file=sys.stderr)
        sys.exit(1)
    sys.exit(STATUS.unpack(reply)[0])


if __name__ == "__main__":
    main()
