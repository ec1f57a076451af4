"""Argument types shared by the scripts in scripts/."""

from __future__ import annotations

import argparse
import json
import os


class FileObject(dict):
    """A JSON object read from a file (`@path`); `path` says which, for the checks of its reader."""

    path: str


def json_object(text: str) -> dict:
    """argparse type: a JSON object given inline, e.g. --head '{"architecture": "linear"}', or
    `@path`: the JSON object in that file (a spec another rule chose, e.g. results/…/tuning/head.json),
    as a FileObject."""
    source = text
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as handle:
                source = handle.read()
        except OSError as err:
            raise argparse.ArgumentTypeError(f"cannot read the JSON file {text[1:]!r}: {err.strerror}") from err
    try:
        value = json.loads(source)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON ({err}): {text!r}") from err
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    if text.startswith("@"):
        value = FileObject(value)
        value.path = text[1:]
    return value


def thread_count(text: str) -> int:
    """argparse type of --threads: torch's intra-op threads, 1 up to the CPUs this process may run
    on (its affinity: a cluster job's allocation, not the node's size). More would oversubscribe
    them; the count is not lowered instead, because float sums, so results, depend on it."""
    count = int(text)
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if not 1 <= count <= available:
        raise argparse.ArgumentTypeError(f"{count} threads, but this job may run on {available} CPUs (allowed: "
                                         f"1..{available}; config torch_threads, which results depend on)")
    return count


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def nonnegative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return value


def expect_argument(parser: argparse.ArgumentParser) -> None:
    """--expect: the config's grid of rows of each input table, by path (its declaration's rows,
    privssl.artefacts; the rule passes it), so that a table cut short or from another config is
    refused by its first reader."""
    parser.add_argument("--expect", type=json_object, default=None,
                        help="JSON object: input table path -> its grid of expected rows (privssl.grids)")


def mia_arguments(parser: argparse.ArgumentParser, what: str = "each dataset", required: bool = True) -> None:
    """--mia and --mia-scores of a reader of the MIA rows (artefacts.image.load_mia): the summary
    tables and the per-record scores whose calls are each row's decisions."""
    many = "+" if required else "*"
    parser.add_argument("--mia", nargs=many, required=required, default=[], help=f"mia.csv of {what}")
    parser.add_argument("--mia-scores", nargs=many, required=required, default=[],
                        help="attack/scores_<target>.parquet of every target of those datasets")


def device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto (CUDA when present, else CPU), cpu or cuda")


def target_arguments(parser: argparse.ArgumentParser) -> None:
    """--targets, --protected, --out of the scripts that attack several targets in one process:
    the clean head (`none`) and the releases of each method."""
    parser.add_argument("--targets", required=True, nargs="+",
                        help="`none` (the clean head) and/or release methods, in the order of --out")
    parser.add_argument("--protected", default=[], nargs="*",
                        help="each method target's noisy heads (.pt), in the order of --targets (none for `none`)")
    parser.add_argument("--out", required=True, nargs="+", help="one CSV per target")


def targets_and_outputs(parser: argparse.ArgumentParser, args) -> list[tuple[str | None, str]]:
    """(noisy-heads file, or None for the clean head; output CSV) per target, the lists checked."""
    methods = [t for t in args.targets if t != "none"]
    if len(args.out) != len(args.targets) or len(args.protected) != len(methods):
        parser.error(f"--out needs one path per target ({len(args.targets)}) and --protected one per method target "
                     f"({len(methods)}); got {len(args.out)} and {len(args.protected)}")
    protected = dict(zip(methods, args.protected))
    return [(protected.get(target), out) for target, out in zip(args.targets, args.out)]


def tuning_parser(description: str) -> argparse.ArgumentParser:
    """The arguments every section's tuning script (scripts/tune_*.py) takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--features", required=True, help="features file of the encode rule (its reference split)")
    parser.add_argument("--config", type=json_object, required=True,
                        help="JSON object with the config sections the tuned section reads, and `tuning`")
    parser.add_argument("--seed", type=int, required=True, help="draws the folds (the same for every section)")
    parser.add_argument("--out-dir", required=True, help="writes <section>.csv and <section>.json here")
    parser.add_argument("--threads", type=thread_count, default=None)
    return parser
