"""Config files are read strictly before Snakemake's values are validated: a YAML error names the
file, line and column, and a key given twice (which YAML lets the last value win) is refused with
both lines; the Snakefile reads config.yaml and every --configfile so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from privssl.config import ConfigError, load_config_file

REPO = Path(__file__).resolve().parents[1]
SHIPPED = [REPO / "config.yaml", REPO / "tests" / "data" / "tiny_config.yaml",
           *sorted((REPO / "configs").glob("*.yaml"))]


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def refused(path: Path) -> str:
    with pytest.raises(ConfigError) as error:
        load_config_file(path)
    return str(error.value)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_shipped_config_files_give_every_key_once(path):
    assert isinstance(load_config_file(path), dict)


@pytest.mark.parametrize("text, message", [
    ("seed: 0\nhead: {lr: 0.1}\nseed: 1\n", "key 'seed' is given twice, on lines 1 and 3"),
    ("protect:\n  eps: [1, 10]\n  delta: 1.0e-5\n  eps: [100]\n", "key 'protect.eps' is given twice, on lines 2 and 4"),
    ('seed: 0\n"seed": 1\n', "key 'seed' is given twice, on lines 1 and 2"),  # quoting does not make it another key
    ('{"seed": 0, "seed": 1}', "key 'seed' is given twice, on line 1, columns 2 and 13"),  # JSON too
])
def test_a_key_given_twice_is_refused_with_both_lines(tmp_path, text, message):
    path = written(tmp_path, text)
    assert refused(path) == (f"config file {path}: {message} (allowed: each key once; YAML would keep the last "
                             f"silently)")


def test_a_merged_key_may_be_given_again(tmp_path):
    path = written(tmp_path, "defaults: &defaults {epochs: 2, lr: 0.1}\nhead:\n  <<: *defaults\n  lr: 0.01\n")
    assert load_config_file(path)["head"] == {"epochs": 2, "lr": 0.01}


@pytest.mark.parametrize("text, where", [
    ("seed: 0\nprotect:\n  eps: [1, 10\n  delta: 1.0e-5\n",
     "line 4, column 8: expected ',' or ']', but got ':' (while parsing a flow sequence at line 3)"),
    ("seed: 0\nprotect:\n\teps: [1]\n", "line 3, column 1: found character '\\t' that cannot start any token"),
])
def test_a_yaml_error_names_the_file_and_line(tmp_path, text, where):
    path = written(tmp_path, text)
    assert refused(path) == f"config file {path}, {where}"


def test_snakemake_names_no_line_of_a_yaml_error(tmp_path):
    # why the Snakefile reads config.yaml itself first; a --configfile is parsed by Snakemake before
    # the Snakefile runs, so its YAML errors still read like this (the line shows with --verbose)
    from snakemake.common.configfile import load_configfile
    from snakemake_interface_common.exceptions import WorkflowError

    path = written(tmp_path, "protect:\n  eps: [1, 10\n  delta: 1.0e-5\n")
    with pytest.raises(WorkflowError, match="^Config file is not valid JSON or YAML") as error:
        load_configfile(path)
    assert str(path) not in str(error.value) and "line" not in str(error.value)


def test_the_snakefile_reads_every_config_file_strictly_before_snakemake_does(tmp_path):
    # the --configfile's repeated key is refused; the broken config.yaml of the working directory
    # would fail first, with Snakemake's message, were it read by `configfile:` before
    configfile = written(tmp_path, "seed: 0\nseed: 1\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("protect:\n  eps: [1, 10\n")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO / "Snakefile"),
                           "--directory", str(tmp_path / "run"), "--configfile", str(configfile)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert f"config file {configfile}: key 'seed' is given twice, on lines 1 and 2" in proc.stdout + proc.stderr


def test_a_yte_template_is_refused_because_it_is_code(tmp_path):
    path = written(tmp_path, "__use_yte__: true\nseed: 0\n?if True:\n  download: true\n")
    assert refused(path) == (f"config file {path} sets __use_yte__: True: a YTE template is Python code, which "
                             "Snakemake runs when it loads the file (for a --configfile, before this check); "
                             "allowed: plain YAML only (docs/config.md): remove __use_yte__ and write the values")


def test_a_key_that_only_resembles_the_yte_switch_is_left_to_the_schema(tmp_path):
    assert load_config_file(written(tmp_path, "use_yte: true\nseed: 0\n")) == {"use_yte": True, "seed": 0}
