"""Files and devices: atomic writes, so an interrupted job never leaves a file that looks
complete, and the device choice every script logs.

Writes are byte-reproducible: the same object gives the same bytes whatever the path, run or
time, so checksums of results can be compared across runs and clusters."""

from __future__ import annotations

import gzip
import json
import logging
import os
import signal
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import numpy as np

if TYPE_CHECKING:
    import torch


def _current_umask() -> int:
    """The process's umask. Linux reports it in /proc; elsewhere it can only be read by setting
    it, which briefly gives any thread creating a file meanwhile the permissive 0o022."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds.

    The file gets the mode an ordinary open() would give it (0o666 less the umask), not
    mkstemp's 0o600, so a group sharing a results directory can read it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_current_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def atomic_write_bytes(data: bytes, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_torch_save(obj, path: str | Path) -> None:
    # Given a path, torch.save names the zip's root record after it (here the random temporary
    # name); given a file object it names it "archive". Its other records are fixed (timestamps
    # 1980-01-01, a serialization id derived from the content), so the bytes follow the object.
    import torch  # here only: the report scripts import this module and need no torch

    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        torch.save(obj, f)


def atomic_write_json(obj, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2) + "\n")


def atomic_write_csv(frame, path: str | Path) -> None:
    """Plain CSV, or gzip-compressed for a .gz path."""
    data = frame.to_csv(index=False).encode()
    if Path(path).suffix == ".gz":
        # A gzip header holds a name and a time (pandas writes the temporary name and now);
        # gzip.compress leaves the name out, and mtime=0 the time. Level 6 (zlib's default), not
        # gzip's 9: a LiRA job's 89 MB of ROC curves in 1.1 s instead of 4.3 s, 4 % larger.
        data = gzip.compress(data, compresslevel=6, mtime=0)
    atomic_write_bytes(data, path)


def atomic_write_parquet(frame, path: str | Path) -> None:
    """A table of per-record values as Parquet (pyarrow, no index), byte-reproducible: the same
    frame gives the same bytes (the file holds no time and no path)."""
    import io

    buffer = io.BytesIO()
    frame.to_parquet(buffer, engine="pyarrow", index=False, compression="zstd")
    atomic_write_bytes(buffer.getvalue(), path)


def pack_decisions(correct) -> str:
    """One draw's per-record decisions (1-D bool, records in a fixed order) as a hex string of
    their packed bits, a CSV cell: the reports pair and cluster draws by record from it."""
    bits = np.asarray(correct)
    if bits.ndim != 1 or bits.dtype != bool:
        raise ValueError(f"decisions must be a 1-D bool array, got {bits.dtype} of shape {bits.shape}")
    return np.packbits(bits).tobytes().hex()


def unpack_decisions(text: str, records: int) -> np.ndarray:
    """The `records` decisions of a `pack_decisions` cell; anything else is refused."""
    if not isinstance(text, str) or len(text) != 2 * ((records + 7) // 8):
        raise ValueError(f"a decisions cell of {records} records holds {2 * ((records + 7) // 8)} hex digits, "
                         f"got {len(text) if isinstance(text, str) else type(text).__name__}")
    try:
        bits = np.unpackbits(np.frombuffer(bytes.fromhex(text), dtype=np.uint8))
    except ValueError as err:
        raise ValueError(f"a decisions cell must be hex digits: {err}") from None
    if bits[records:].any():
        raise ValueError(f"a decisions cell of {records} records has bits set past its last record")
    return bits[:records].astype(bool)


DEVICES = ("auto", "cpu", "cuda")


def pick_device(requested: str = "auto") -> torch.device:
    """CUDA when present (or asked for), else CPU. On CUDA, cuDNN is made deterministic: a rerun on
    the same GPU, driver and library versions repeats its results (docs/resuming.md says what
    is not reproducible across devices); its autotuner would pick kernels by timing."""
    if requested not in DEVICES:
        raise InputError(f"device {requested!r} is not allowed; allowed: {', '.join(DEVICES)}")
    import torch

    cuda = torch.cuda.is_available()
    if requested == "cuda" and not cuda:
        raise InputError("device 'cuda' was asked for, but torch sees no CUDA device "
                         f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}): use device auto or cpu")
    if requested == "cpu" or not cuda:
        return torch.device("cpu")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    return torch.device("cuda")


class InputError(ValueError):
    """A script's input is missing or malformed; the message names it and what is allowed, so a
    script reports it in one line (privssl.artefacts.specs.ArtefactError is one)."""


def input_error_hook(kind: type[BaseException], error: BaseException, traceback) -> None:
    """sys.excepthook of a script: an input error (an InputError, or a FileNotFoundError of a
    path on the command line or raised with its own message, as the data loaders do) as one line
    `<script>: error: <message>`, as argparse reports a bad argument; anything else, a bug, with
    its full traceback. Python exits with status 1 either way."""
    missing = isinstance(error, FileNotFoundError) and (
        error.filename is None or any(str(error.filename) in arg for arg in sys.argv[1:]))
    if isinstance(error, InputError) or missing:
        print(f"{os.path.basename(sys.argv[0])}: error: {error}", file=sys.stderr)
    else:
        sys.__excepthook__(kind, error, traceback)


def script_logger(name: str) -> logging.Logger:
    """Log to stderr (Snakemake rules redirect stderr into the rule's `log:` file), an input error
    there in one line (input_error_hook). Also makes SIGTERM (scancel, a job killed for its time
    limit) exit through Python's cleanup, so that an atomic write in progress removes its
    temporary file instead of leaving it in results/."""
    sys.excepthook = input_error_hook
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return logging.getLogger(name)


class Progress:
    """How far a long loop is, for a person reading the job's log: `done/total (percent),
    elapsed, about T left`, one line each time a tenth of the work is done or `every_s` seconds
    have passed since the last line, and at the end; no carriage-return bars (the log is a file).
    The time left assumes the remaining units take as long as the finished ones did on average."""

    def __init__(self, log: Callable[[str], None], what: str, total: int, every_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        self.log, self.what, self.total, self.every_s, self.clock = log, what, max(int(total), 1), every_s, clock
        self.done, self.start = 0, clock()
        self.last_time, self.last_tenth = self.start, 0

    def advance(self, units: int = 1) -> None:
        self.done = min(self.done + units, self.total)
        now = self.clock()
        tenth = 10 * self.done // self.total
        if self.done == self.total or tenth > self.last_tenth or now - self.last_time >= self.every_s:
            self.last_time, self.last_tenth = now, tenth
            elapsed = now - self.start
            left = elapsed / self.done * (self.total - self.done)
            self.log(f"{self.what}: {self.done}/{self.total} ({100 * self.done / self.total:.0f} %), "
                     f"{_duration(elapsed)} elapsed, about {_duration(left)} left")


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def with_progress(items: Iterable, total: int, log: Callable[[str], None] | None, what: str) -> Iterator:
    """The items, logging a Progress line as each one's loop body finishes (nothing without `log`)."""
    progress = Progress(log, what, total) if log is not None else None
    for item in items:
        yield item
        if progress is not None:
            progress.advance()
