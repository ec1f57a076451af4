"""Argument types shared by the scripts in scripts/."""

from __future__ import annotations

import argparse
import json


def json_object(text: str) -> dict:
    """argparse type: a JSON object given inline, e.g. --head '{"architecture": "linear"}'."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON ({err}): {text!r}") from err
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto (CUDA when present, else CPU), cpu or cuda")
