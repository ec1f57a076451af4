"""No config value is interpreted by a shell: the free-text paths of the config (`data_root`,
`graph_data_root`) reach every command as one word, whatever spaces, quotes, `$( )` or
backquotes they hold, and a job given such a path runs nothing it spells."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from test_workflow import REPO, output_of, run_snakemake, tiny_config, write_config

pytestmark = pytest.mark.workflow

# The config's free-text values that reach a command line; the others are numbers, booleans, names
# the schema enumerates or patterns, or JSON that common.smk's as_json quotes.
FREE_TEXT_KEYS = ("data_root", "graph_data_root")


def hostile_paths(root: Path) -> dict[str, str]:
    """A path per key that a shell would split, expand or execute: a space, both quotes, a command
    substitution of each kind; each would create its own marker file if a shell ran it."""
    return {"data_root": f"{root}/da ta$(touch {root}/INJECTED_DATA)'q\"",
            "graph_data_root": f"{root}/gr aph`touch {root}/INJECTED_GRAPH` $HOME"}


def shell_commands(proc) -> list[str]:
    return [line.removeprefix("Shell command: ") for line in output_of(proc).splitlines()
            if line.startswith("Shell command: ")]


def test_every_command_passes_each_free_text_path_as_one_word(tmp_path):
    paths = hostile_paths(tmp_path)
    config = write_config({**tiny_config(), **paths}, tmp_path / "config.yaml")
    proc = run_snakemake(tmp_path / "run", config, "-n", "-p")
    given = {}  # script -> the --data-root values its commands gave
    for command in shell_commands(proc):
        words = shlex.split(command)
        if "--data-root" not in words:
            assert "INJECTED" not in command, command  # no other argument carries the paths
            continue
        assert words.count("--data-root") == 1, command
        value = words[words.index("--data-root") + 1]
        script = Path(words[1]).name
        given.setdefault(script, set()).add(value)
    # every rule file that passes --data-root ran in the dry run, and each passed its key's value intact
    expected = {}
    for rule_file in (REPO / "rules").glob("*.smk"):
        for rule in re.split(r"\nrule ", rule_file.read_text()):
            if "--data-root" in rule:
                script = re.search(r'script\("([a-z_]+\.py)"\)', rule).group(1)
                key = "graph_data_root" if 'config.get("graph_data_root")' in rule else "data_root"
                expected[script] = {paths[key]}
    assert given == expected


def test_a_job_given_a_hostile_path_runs_nothing_it_spells(tmp_path):
    # the digits come with scikit-learn: the job reads no file under data_root, it only receives it
    paths = hostile_paths(tmp_path)
    config = write_config({**tiny_config(), **paths}, tmp_path / "config.yaml")
    run_snakemake(tmp_path / "run", config, "results/digits/splits.json")
    assert (tmp_path / "run" / "results" / "digits" / "splits.json").is_file()
    assert not list(tmp_path.glob("INJECTED_*"))
