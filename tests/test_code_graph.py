"""privssl.code_graph: the library code a script can run, and the digest that reruns its rule.

A small package is written to a temporary folder so that each case knows its answer: which
definitions a script reaches, and which edits change the digest. The library's own conventions
that the analysis relies on are checked on src/privssl itself."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from privssl.code_graph import BODY, SRC, library_code, module_file, reached

REPO = Path(__file__).resolve().parents[1]


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/noise.py": '''
        """Noise."""
        import math

        SCALE = 2.0


        def logistic(u):
            """The logistic inverse CDF."""
            return math.log(u / (1 - u)) * SCALE  # scaled


        def laplace(u):
            return -math.log(u)
    ''',
    "pkg/release.py": '''
        from pkg.noise import logistic


        def release(x, u):
            return x + logistic(u)


        def unused():
            return 0
    ''',
    "pkg/sub/__init__.py": "",
    "pkg/sub/helpers.py": '''
        from . import leaf
        from .leaf import twice


        def helper(x):
            return twice(x) + leaf.ONE
    ''',
    "pkg/sub/leaf.py": '''
        ONE = 1
        TWO = 2


        def twice(x):
            return 2 * x
    ''',
    "pkg/plots.py": '''
        import math

        math.floor(0.5)  # a statement that runs at import


        def draw():
            return "figure"
    ''',
}


@pytest.fixture
def src(tmp_path) -> Path:
    write(tmp_path, PACKAGE)
    return tmp_path


def script(src: Path, text: str) -> Path:
    path = src / "script.py"
    path.write_text(textwrap.dedent(text))
    return path


def keys(src: Path, path: Path) -> set[tuple[str, str]]:
    return set(reached(path, src, "pkg"))


def test_a_script_reaches_what_it_names_through_from_imports_and_nothing_else(src):
    found = keys(src, script(src, "from pkg.release import release\nprint(release(1, 0.5))\n"))
    assert ("pkg.release", "release") in found and ("pkg.noise", "logistic") in found
    assert ("pkg.noise", "SCALE") in found  # read by logistic
    assert ("pkg.release", "unused") not in found and ("pkg.noise", "laplace") not in found
    # a reached module's (and its package's) import-time statements run too
    assert {("pkg", BODY), ("pkg.noise", BODY), ("pkg.release", BODY)} <= found


def test_attribute_chains_and_relative_imports_resolve_to_the_definition(src):
    found = keys(src, script(src, "import pkg.sub.helpers as h\nh.helper(3)\n"))
    assert {("pkg.sub.helpers", "helper"), ("pkg.sub.leaf", "twice"), ("pkg.sub.leaf", "ONE")} <= found
    assert ("pkg.sub.leaf", "TWO") not in found
    assert ("pkg.sub", BODY) in found


def test_a_module_used_whole_counts_whole(src):
    found = keys(src, script(src, "from pkg import noise\nprint(vars(noise))\n"))
    assert {("pkg.noise", "logistic"), ("pkg.noise", "laplace"), ("pkg.noise", "SCALE")} <= found


def test_an_import_inside_a_function_counts_for_that_function(src):
    found = keys(src, script(src, '''
        def main():
            from pkg.plots import draw
            return draw()
    '''))
    assert ("pkg.plots", "draw") in found and ("pkg.plots", BODY) in found


def test_a_name_the_module_does_not_define_counts_the_whole_module(src):
    (src / "pkg" / "noise.py").write_text((src / "pkg" / "noise.py").read_text() + "\nglobals()['made'] = 1\n")
    found = keys(src, script(src, "from pkg.noise import made\nprint(made)\n"))
    assert ("pkg.noise", "laplace") in found


def edit(src: Path, name: str, old: str, new: str) -> None:
    path = src / name
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize("old, new, changes", [
    ("* SCALE  # scaled", "* SCALE * 0.5  # scaled", True),  # halving the noise
    ("SCALE = 2.0", "SCALE = 1.0", True),  # a constant the function reads
    ("# scaled", "# scaled by SCALE, see the paper", False),  # a comment
    ('"""The logistic inverse CDF."""', '"""The logistic inverse CDF, written out."""', False),  # a docstring
    ("return -math.log(u)", "return math.log(1 / u)", False),  # code the script cannot reach
    ("import math\n", "import math\n\n\n", False),  # formatting
])
def test_only_an_edit_of_reachable_code_changes_the_digest(src, old, new, changes):
    path = script(src, "from pkg.release import release\nrelease(0, 0.5)\n")
    before = library_code(path, src, "pkg")
    edit(src, "pkg/noise.py", old, new)
    assert (library_code(path, src, "pkg") != before) is changes


def test_the_digest_names_the_modules_and_not_the_place_of_the_project(src, tmp_path_factory):
    path = script(src, "from pkg.release import release\nrelease(0, 0.5)\n")
    value = library_code(path, src, "pkg")
    assert [part.split("=")[0] for part in value.split()] == ["pkg", "pkg.noise", "pkg.release"]
    moved = tmp_path_factory.mktemp("moved")
    write(moved, PACKAGE)
    assert library_code(script(moved, "from pkg.release import release\nrelease(0, 0.5)\n"), moved, "pkg") == value


# ---------------------------------------------------------------- the library's own scripts

def reached_modules(name: str) -> dict[str, set[str]]:
    modules: dict[str, set[str]] = {}
    for module, key in reached(REPO / "scripts" / name):
        modules.setdefault(module, set()).add(key)
    return modules


def test_the_training_scripts_cannot_reach_the_release_noise():
    # issue 29's case: halving ALM's noise must not retrain SimCLR, the features or the sampler's
    # heads as such; the head's choice reaches it (issue 31: the head is chosen for its noise)
    for name in ("pretrain.py", "encode.py", "finetune.py", "sensitivity.py"):
        assert "Logistic" not in reached_modules(name).get("privssl.release.mechanisms", set()), name
    for name in ("protect.py", "tune_head.py", "tune_certified.py"):
        assert "Logistic" in reached_modules(name)["privssl.release.mechanisms"], name


def test_only_report_scripts_reach_the_plotting_module():
    reach = {path.name for path in (REPO / "scripts").glob("*.py")
             if "privssl.reports.plotting" in reached_modules(path.name)}
    assert reach and all(name.startswith(("plot_", "make_table", "link_table")) or name.endswith("_report.py")
                         for name in reach), reach


def library_trees():
    for path in sorted(SRC.joinpath("privssl").rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def test_no_library_module_registers_into_another_at_import():
    # the analysis follows names: an assignment at import time into a table of another module (a
    # registration) would be code that no name reaches; into the module's own table it runs with
    # the module's other import-time statements, which count whenever the module is reached
    for path, tree in library_trees():
        own = {target.id for statement in tree.body if isinstance(statement, (ast.Assign, ast.AnnAssign))
               for target in (statement.targets if isinstance(statement, ast.Assign) else [statement.target])
               if isinstance(target, ast.Name)}
        for statement in tree.body:
            if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                for target in targets:
                    if isinstance(target, (ast.Name, ast.Tuple)):
                        continue  # binds names of this module
                    while isinstance(target, (ast.Subscript, ast.Attribute)):
                        target = target.value
                    assert isinstance(target, ast.Name) and target.id in own, f"{path}:{statement.lineno}"


def test_no_library_code_looks_up_a_module_attribute_by_a_computed_name():
    for path, tree in library_trees():
        modules = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                   if isinstance(node, ast.Import) for alias in node.names}
        modules |= {alias.asname or alias.name for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module for alias in node.names
                    if module_file(f"{node.module}.{alias.name}") is not None}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
                first = node.args[0]
                assert not (isinstance(first, ast.Name) and first.id in modules), f"{path}:{node.lineno}"


def test_a_kept_answer_serves_only_the_package_it_was_computed_for(src, tmp_path_factory, monkeypatch):
    """library_code keeps its answers (in __pycache__, for the next Snakemake start) under the
    script's content and a digest of every module of the package: an edit of the same size made
    at once is not served the old answer, and the package as it was is served from what was kept,
    by this process and by a later one, without walking the code again."""
    from privssl import code_graph

    folder = tmp_path_factory.mktemp("pycache")
    monkeypatch.setattr(code_graph, "_CACHE", code_graph._Cache(folder))
    path = script(src, "from pkg.release import release\nrelease(0, 0.5)\n")
    before = library_code(path, src, "pkg")
    edit(src, "pkg/noise.py", "SCALE = 2.0", "SCALE = 3.0")  # same size, within one clock tick
    edited = library_code(path, src, "pkg")
    assert edited != before
    edit(src, "pkg/noise.py", "SCALE = 3.0", "SCALE = 2.0")

    def no_walk(*args, **kwargs):
        raise AssertionError("the answer was computed again, not taken from what was kept")

    monkeypatch.setattr(code_graph, "reached", no_walk)
    assert library_code(path, src, "pkg") == before
    monkeypatch.setattr(code_graph, "_CACHE", code_graph._Cache(folder))  # a later process: the file only
    assert library_code(path, src, "pkg") == before
