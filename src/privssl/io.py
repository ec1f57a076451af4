"""Files and devices: atomic writes, so an interrupted job never leaves a file that looks
complete, and the device choice every script logs."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pandas as pd
import torch


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def atomic_torch_save(obj, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def atomic_write_json(obj, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2) + "\n")


def atomic_write_csv(frame, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def read_csvs(paths) -> pd.DataFrame:
    """The rows of several tidy CSV files (e.g. one per dataset) as one frame."""
    return pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)


def load_tensors(path: str | Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def pick_device(requested: str = "auto") -> torch.device:
    """CUDA when present (or asked for), else CPU."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def script_logger(name: str) -> logging.Logger:
    """Log to stderr; Snakemake rules redirect stderr into the rule's `log:` file."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return logging.getLogger(name)
