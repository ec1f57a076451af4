"""Checkpoints of long trainings, resumed only under the settings and code that wrote them.

A fingerprint is a flat record {field: repr(value)} of everything that shapes what a checkpoint
holds: each field of a spec (a dataclass or a dict) under its own name, the seed, a digest of the
data, the device's arithmetic, the intra-op thread count, and the code (privssl.code_graph:
the script's own code and every library definition it can run). A checkpoint with another
record is ignored, with a log line that names the fields that differ.

Checkpoints exist to resume a job that died: each script deletes its own once the job's outputs
are written (`discard`), so `--forcerun` trains from scratch and no finished checkpoint is found
by a later run under settings it was not written for.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Callable

from privssl.code_graph import code_digest, library_code

OLDER_FORMAT = "(the whole record: written by an older version of privssl)"


def fingerprint(**fields) -> dict[str, str]:
    """The record of named values: a dataclass or a dict is spread into `name.field` entries, so a
    mismatch names the very setting that changed."""
    record: dict[str, str] = {}
    for name, value in fields.items():
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            record |= {f"{name}.{f.name}": repr(getattr(value, f.name)) for f in dataclasses.fields(value)}
        elif isinstance(value, dict):
            record |= {f"{name}.{key}": repr(item) for key, item in sorted(value.items())}
        else:
            record[name] = repr(value)
    return record


def differing(saved, current: dict[str, str]) -> list[str]:
    """The fields whose values differ (or that only one record has), sorted."""
    if not isinstance(saved, dict):
        return [OLDER_FORMAT]
    return sorted(key for key in saved.keys() | current.keys() if saved.get(key) != current.get(key))


def resumable(saved, current: dict[str, str], path: Path, log: Callable[[str], None]) -> bool:
    """Whether a checkpoint with fingerprint `saved` may be resumed; if not, say why."""
    fields = differing(saved, current)
    if fields:
        shown = ", ".join(fields[:8]) + (f" and {len(fields) - 8} more" if len(fields) > 8 else "")
        log(f"ignoring {path}: it was written under another {shown}; starting afresh")
    return not fields


def script_code(script: str | Path) -> str:
    """The code field of a fingerprint: the script's own code and the library code it can run."""
    script = Path(script)
    return f"{script.name}={code_digest(script)} {library_code(script)}"


def discard(path: str | Path) -> None:
    """Delete a finished job's checkpoint (a file or a folder of them); nothing if there is none."""
    path = Path(path)
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
