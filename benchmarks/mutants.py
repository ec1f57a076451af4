#!/usr/bin/env python
"""Mutation testing of the modules a verdict's numbers rest on: `make mutants` (docs/testing.md).

mutmut (pinned in requirements-dev.txt, configured in pyproject.toml's [tool.mutmut]) copies src/
to mutants/, rewrites every function of the configured modules into its mutants (a changed
operator, constant, argument or string each), maps each function to the unit tests that call it,
and runs those tests against every mutant in a fresh pytest session. A mutant the tests fail on
is killed; one they pass on survived: either the tests miss a wrong result, or the mutant
computes the same thing as the original (equivalent).

This script runs mutmut module by module (each module is an `only_mutate` entry of
pyproject.toml; of artefacts/tables.py only the completeness checks in FUNCTIONS count), times each,
reads mutmut's results from mutants/*.meta, subtracts the equivalent mutants listed in
docs/testing.md, and prints per module

    mutants, killed, equivalent, survived, score = killed / (mutants - equivalent), wall time,

then the survivors that are neither killed nor listed (`mutmut show NAME` shows one). It exits
non-zero when a module scores below 90 %, when mutmut fails (its clean run of the tests must
pass), or when a listed equivalent no longer matches its mutant (the list names each mutant's
changed line: an edit of the function renumbers its mutants, and an entry that now names another
mutant must be checked again, not counted).

Counted as killed: mutmut's `killed`, `timeout` (the tests ran past mutmut's limit: the mutant
loops) and `segfault` (the test process died). Not killed: `survived`, `no tests` (no selected
test calls the function), `suspicious`, `not checked`.

Usage:
    python benchmarks/mutants.py                      # every module (`make mutants`)
    python benchmarks/mutants.py audit/bounds.py accounting/
    python benchmarks/mutants.py --no-run audit/bounds.py   # only the report, from mutants/
    python benchmarks/mutants.py --record --idle no   # also append the wall times to benchmarks/timings.csv

Modules are named as in pyproject.toml without `src/privssl/` (`accounting/*` may be written
`accounting/` or `accounting`). The first module run on a fresh mutants/ also collects mutmut's
test-to-function map (one run of every selected test); its wall time includes that.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import fnmatch
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "testing.md"
TIMINGS = REPO / "benchmarks" / "timings.csv"
THRESHOLD = 0.90
PACKAGE_ROOT = "src/privssl/"
# Files of which only these functions' mutants count (mutmut mutates a whole file): artefacts/tables.py's
# completeness checks, the readers' refusal of a table that lost or repeats rows of its grid.
FUNCTIONS = {"src/privssl/artefacts/tables.py": ("load_csv_file", "load_csv_files", "expected_of", "key_value",
                                                 "check_expected", "check_grid")}
DETECTED = ("killed", "timeout", "segfault", "caught by type check")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
MUTANT_NAME = re.compile(r"`(privssl\.[\w.ǁ]+__mutmut_\d+)`")


@dataclass
class Module:
    name: str  # as the docs and the command line name it: audit/bounds.py, accounting/
    pattern: str  # the only_mutate entry
    run_globs: list[str]  # mutant names for `mutmut run` (they also match the functions' names)
    count_globs: list[str]  # mutant names that count
    status: dict[str, str] = field(default_factory=dict)  # mutant -> mutmut's status
    wall: float | None = None
    command: str = ""  # the mutmut command as run
    error: str | None = None


def config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]


def modules() -> list[Module]:
    out = []
    for pattern in config()["only_mutate"]:
        if not pattern.startswith(PACKAGE_ROOT):
            raise SystemExit(f"only_mutate entry {pattern!r} is not under {PACKAGE_ROOT}")
        relative = pattern[len(PACKAGE_ROOT):]
        dotted = "privssl." + relative.removesuffix("*").removesuffix(".py").replace("/", ".").rstrip(".")
        name = relative.removesuffix("*")
        if pattern in FUNCTIONS:
            run = [f"{dotted}.x_{f}*" for f in FUNCTIONS[pattern]]
            count = [f"{dotted}.x_{f}__mutmut_*" for f in FUNCTIONS[pattern]]
        else:
            run = count = [f"{dotted}.*"]
        out.append(Module(name, pattern, run, count))
    return out


def select(all_modules: list[Module], names: list[str]) -> list[Module]:
    if not names:
        return all_modules
    by_name = {m.name.rstrip("/"): m for m in all_modules}
    chosen = []
    for name in names:
        key = name.removeprefix(PACKAGE_ROOT).removesuffix("*").rstrip("/")
        if key not in by_name:
            raise SystemExit(f"unknown module {name!r}; configured: {', '.join(m.name for m in all_modules)}")
        chosen.append(by_name[key])
    return chosen


def files_of(module: Module) -> list[Path]:
    return sorted(p.relative_to(REPO) for p in REPO.glob(module.pattern) if p.suffix == ".py")


def read_status(module: Module) -> None:
    """mutmut's status of every counted mutant of the module, from mutants/<file>.meta."""
    from mutmut.stats import status_by_exit_code

    module.status = {}
    for path in files_of(module):
        meta = REPO / "mutants" / f"{path}.meta"
        if not meta.exists():
            continue
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            if any(fnmatch.fnmatchcase(name, g) for g in module.count_globs):
                module.status[name] = status_by_exit_code[code]


def run_module(module: Module, max_children: int) -> None:
    env = {**os.environ, **{v: "1" for v in THREAD_VARIABLES}}
    mutmut = Path(sys.executable).parent / "mutmut"
    command = [str(mutmut), "run", "--max-children", str(max_children), *module.run_globs]
    module.command = "mutmut " + " ".join(command[1:4]) + " " + " ".join(f"'{g}'" for g in module.run_globs)
    print(f"\n=== {module.name}: {module.command}", flush=True)
    start = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=env)
    module.wall = time.monotonic() - start
    if done.returncode != 0:
        module.error = f"mutmut exited with {done.returncode} (see its output above)"


def mutated_lines(name: str, path: Path) -> list[str]:
    """The lines a mutant changes, as mutmut's diff shows them (`mutmut show NAME`)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        diff = get_diff_for_mutant(name, path=path)
    finally:
        os.chdir(cwd)
    return [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]


def table_cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [c.strip().replace("\\|", "|") for c in cells]


def equivalents() -> dict[str, tuple[str, str]]:
    """docs/testing.md's equivalent mutants: name -> (the changed line as listed, the reason)."""
    listed = {}
    section = DOC.read_text().split("## Equivalent mutants", 1) if DOC.exists() else []
    if len(section) < 2:
        return listed
    for line in section[1].split("\n## ", 1)[0].splitlines():
        if not line.startswith("|"):
            continue
        cells = table_cells(line)
        match = MUTANT_NAME.search(cells[1]) if len(cells) >= 4 else None
        if match:
            listed[match.group(1)] = (cells[2].strip("`"), cells[3])
    return listed


def check_equivalents(module: Module, listed: dict[str, tuple[str, str]]) -> tuple[set[str], list[str]]:
    """The module's listed equivalents that still hold, and a warning for every stale entry."""
    paths = {".".join(p.with_suffix("").parts[1:]).replace(".__init__", ""): p for p in files_of(module)}
    holding, problems = set(), []
    for name, (line, _) in listed.items():
        if not any(fnmatch.fnmatchcase(name, g) for g in module.count_globs):
            continue
        if name not in module.status:
            problems.append(f"{name}: listed as equivalent, but no such mutant (the function changed?)")
            continue
        path = paths[name.rsplit(".", 1)[0]]
        changed = mutated_lines(name, path)
        if line not in changed:
            problems.append(f"{name}: listed as equivalent for `{line}`, but it now changes {changed}: check it again")
        elif module.status[name] in DETECTED:
            problems.append(f"{name}: listed as equivalent, but the tests kill it: remove it from the list")
        else:
            holding.add(name)
    return holding, problems


def summary(module: Module, equivalent: set[str]) -> dict:
    total = len(module.status)
    killed = sum(s in DETECTED for s in module.status.values())
    survivors = sorted(n for n, s in module.status.items() if s not in DETECTED and n not in equivalent)
    denominator = total - len(equivalent)
    score = killed / denominator if denominator else float("nan")
    return {"module": module.name, "mutants": total, "killed": killed, "equivalent": len(equivalent),
            "survived": len(survivors), "score": score, "wall": module.wall, "survivors": survivors}


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip()


def record(chosen: list[Module], rows: list[dict], total_wall: float, idle: str, command: str,
           processes: int) -> None:
    day, head, cores = datetime.date.today().isoformat(), commit(), os.cpu_count()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                           text=True).stdout.strip()
    tree = "; the working tree had uncommitted changes" if dirty else ""
    with TIMINGS.open("a", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        for module, row in zip(chosen, rows):
            writer.writerow([day, module.command, head, "", f"{row['wall']:.0f}", "", cores, idle, "",
                             f"{row['module']} within {command}: {row['mutants']} mutants, score {row['score']:.1%} "
                             f"({row['killed']} killed, {row['equivalent']} equivalent, {row['survived']} survived)"
                             f"{tree}"])
        if len(rows) == 1:  # the module's row is the whole run
            return
        writer.writerow([day, command, head, "", f"{total_wall:.0f}", "", cores, idle, "",
                         f"mutation testing of {len(rows)} modules ({', '.join(r['module'] for r in rows)}); "
                         f"{sum(r['mutants'] for r in rows)} mutants; {processes} mutant process{'es' if processes > 1 else ''} "
                         f"at a time{tree}"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules as named in pyproject.toml without src/privssl/")
    parser.add_argument("--no-run", action="store_true", help="report the results in mutants/ without running")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--record", action="store_true", help="append the wall times to benchmarks/timings.csv")
    parser.add_argument("--idle", default="unknown", choices=("yes", "no", "unknown"),
                        help="whether the machine was otherwise idle, for --record")
    args = parser.parse_args()
    if args.record and args.no_run:
        parser.error("--record needs a run to time")

    chosen = select(modules(), args.modules)
    start = time.monotonic()
    if not args.no_run:
        for module in chosen:
            run_module(module, args.max_children)
    total_wall = time.monotonic() - start
    listed = equivalents()
    rows, failed = [], []
    for module in chosen:
        read_status(module)
        holding, problems = check_equivalents(module, listed)
        row = summary(module, holding)
        rows.append(row)
        for problem in problems:
            print(f"stale equivalent in docs/testing.md: {problem}")
        if module.error or not module.status or not row["score"] >= THRESHOLD or problems:
            failed.append(module.name)

    print("\n| module | mutants | killed | equivalent | survived | score | wall (s) |\n|---|---|---|---|---|---|---|")
    for row in rows:
        wall = "" if row["wall"] is None else f"{row['wall']:.0f}"
        print(f"| {row['module']} | {row['mutants']} | {row['killed']} | {row['equivalent']} | {row['survived']} "
              f"| {row['score']:.1%} | {wall} |")
    if not args.no_run:
        print(f"total wall time {total_wall:.0f} s (commit {commit()}, {datetime.date.today().isoformat()})")
    for row in rows:
        if row["survivors"]:
            print(f"\n{row['module']}: {row['survived']} survivors not listed as equivalent (mutmut show NAME):")
            print("\n".join(f"  {n}" for n in row["survivors"]))
    for module in chosen:
        if module.error:
            print(f"{module.name}: {module.error}")
        elif not module.status:
            print(f"{module.name}: no results in mutants/ (run without --no-run)")
    if args.record:
        command = " ".join(["python benchmarks/mutants.py", *sys.argv[1:]])  # what `make mutants` runs
        record(chosen, rows, total_wall, args.idle, command, args.max_children)
    if failed:
        print(f"\nbelow {THRESHOLD:.0%}, failed or with stale equivalents: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
