"""The conda env files pin what requirements.txt pins, and every rule's env provides what its
script imports (the script and, transitively, the privssl modules it imports)."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
ENVS = {"ENV": REPO / "envs" / "privssl.yaml", "GRAPH_ENV": REPO / "envs" / "graph.yaml"}
# Needed by Snakemake or the tests, not by any rule's script: only in requirements.txt.
WORKFLOW_ONLY = {"snakemake", "snakemake-executor-plugin-slurm", "snakefmt", "pytest", "pytest-xdist", "import-linter"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines) -> dict[str, str]:
    """{distribution: version} of `name==version` requirement lines; anything else is refused."""
    pinned = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if not line:
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{line!r} is not pinned with =="
        pinned[canonical(req.name)] = specs[0].version
    return pinned


def env_pins(path: Path) -> dict[str, str]:
    env = yaml.safe_load(path.read_text())
    pip = [d for d in env["dependencies"] if isinstance(d, dict)]
    conda = [d for d in env["dependencies"] if isinstance(d, str) and d not in ("pip",)]
    assert conda == ["python=3.11"], f"{path.name}: conda packages other than python: {conda}"
    assert len(pip) == 1, f"{path.name}: expected one pip section"
    return pins(pip[0]["pip"])


def requirement_pins() -> dict[str, str]:
    return pins((REPO / "requirements.txt").read_text().splitlines())


@pytest.mark.parametrize("env", sorted(ENVS))
def test_env_pins_the_versions_of_requirements_txt(env):
    required, declared = requirement_pins(), env_pins(ENVS[env])
    differing = {name: (version, required.get(name)) for name, version in declared.items()
                 if required.get(name) != version}
    assert not differing, f"{ENVS[env].name} pins {{name: (env, requirements.txt)}} = {differing}"


def test_every_requirement_is_in_an_env_or_workflow_only():
    declared = set().union(*(env_pins(path) for path in ENVS.values()))
    missing = set(requirement_pins()) - declared - WORKFLOW_ONLY
    assert not missing, f"requirements.txt pins {sorted(missing)} that no env file has"


def rule_scripts_and_envs() -> list[tuple[str, str, str]]:
    """(rule, script, env variable) of every rule with a script, read from the rule files."""
    found = []
    for smk in sorted((REPO / "rules").glob("*.smk")):
        for block in re.split(r"\n(?=\s*rule \w+:)", smk.read_text()):
            rule = re.search(r"rule (\w+):", block)
            script = re.search(r'script\("([\w.]+)"\)', block)
            env = re.search(r"conda:\s*\n\s*(\w+)", block)
            if rule and script:
                assert env, f"rule {rule.group(1)} ({smk.name}) has no conda env"
                found.append((rule.group(1), script.group(1), env.group(1)))
    return found


def imported_modules(path: Path, seen: set[Path]) -> set[str]:
    """Top-level modules imported by a file, following privssl's own modules."""
    if path in seen:
        return set()
    seen.add(path)
    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        for name in names:
            if name.split(".")[0] == "privssl":
                module = REPO / "src" / Path(*name.split("."))
                for candidate in (module.with_suffix(".py"), module / "__init__.py"):
                    if candidate.is_file():
                        tops |= imported_modules(candidate, seen)
            else:
                tops.add(name.split(".")[0])
    return tops


def with_dependencies(distributions: set[str]) -> set[str]:
    """The distributions and everything they require, as installed here."""
    closure, todo = set(), list(distributions)
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        for req in importlib.metadata.requires(name) or []:
            req = Requirement(req)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonical(req.name))
    return closure


@functools.cache
def installed_modules() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


@pytest.mark.parametrize("rule,script,env", rule_scripts_and_envs())
def test_rule_env_provides_what_its_script_imports(rule, script, env):
    provided = with_dependencies(set(env_pins(ENVS[env])))
    by_module = installed_modules()
    third_party = {m for m in imported_modules(REPO / "scripts" / script, set())
                   if m not in sys.stdlib_module_names and m != "__future__"}
    missing = {m: by_module.get(m) for m in third_party
               if not {canonical(d) for d in by_module.get(m, [])} & provided}
    assert not missing, f"rule {rule}: {script} imports {missing} (module: distributions), not in {ENVS[env].name}"


def test_rules_were_found():
    rules = {rule for rule, _, _ in rule_scripts_and_envs()}
    assert {"pretrain", "sensitivity", "protect", "attack", "lira", "graph_pretrain", "link_protect"} <= rules
