"""The library's stages import one way (the layers contract of import-linter in pyproject.toml):
the contract holds, it covers every module of privssl, and it catches an import against the order."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def contract() -> dict:
    (only,) = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return only


def lint_imports(src: Path, cwd: Path) -> subprocess.CompletedProcess:
    """lint-imports on the privssl package found under `src`, with the contract of `cwd`/pyproject.toml."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_layers_contract_is_kept():
    proc = lint_imports(REPO / "src", REPO)
    assert proc.returncode == 0 and "1 kept, 0 broken" in proc.stdout, proc.stdout + proc.stderr


def test_every_module_of_privssl_sits_in_a_layer():
    """A module outside every layer would be free to import anything: each top-level module and
    sub-package of privssl must be named in the contract."""
    named = {name.strip() for layer in contract()["layers"] for name in layer.split("|")}
    package = REPO / "src" / "privssl"
    present = {f"privssl.{p.stem}" for p in package.glob("*.py") if p.name != "__init__.py"}
    present |= {f"privssl.{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert present == named, f"not in a layer: {sorted(present - named)}; named but absent: {sorted(named - present)}"


def test_an_import_against_the_order_breaks_the_contract(tmp_path):
    """training importing reports (a lower layer importing a higher one) is reported, by module and line."""
    src = tmp_path / "src"
    shutil.copytree(REPO / "src" / "privssl", src / "privssl", ignore=shutil.ignore_patterns("__pycache__"))
    heads = src / "privssl" / "training" / "heads.py"
    heads.write_text(heads.read_text() + "\nfrom privssl.reports import plotting  # noqa: E402\n")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    proc = lint_imports(src, tmp_path)
    assert proc.returncode != 0, proc.stdout
    assert "privssl.training is not allowed to import privssl.reports" in proc.stdout, proc.stdout
    assert "privssl.training.heads -> privssl.reports" in proc.stdout, proc.stdout


def test_the_modules_the_snakefile_imports_are_free_of_torch():
    # with --use-conda, Snakemake itself may run where torch is not installed; the config check
    # and the config's grids (rules/common.smk: the tables' declarations) run there before any job
    code = ("import sys; import privssl.config, privssl.grids, privssl.release.methods, privssl.warm; "
            "import privssl.artefacts.image, privssl.artefacts.audits, privssl.artefacts.contrastive; "
            "import privssl.artefacts.graphs, privssl.artefacts.semileak, privssl.artefacts.training_time; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision', 'torch_geometric')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout
