"""privssl.code_graph: the library code a script can run, and the digest that reruns its rule.

A small package is written to a temporary folder so that each case knows its answer: which
definitions a script reaches, and which edits change the digest. The conventions that the
analysis relies on are checked on src/privssl and scripts/ themselves, and the file that keeps
the analyses between Snakemake starts is checked to give them back exactly or not at all."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from privssl import code_graph
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


# an import the environment may lack, tried: the function it binds is followed like any import's,
# and so is the fallback's (the `try` may fail)
TRY_IMPORTS = {
    "at the top of the module": '''
        try:
            from pkg.noise import laplace
        except ImportError:  # an environment without it
            from math import log as laplace


        def use(u):
            return laplace(u)
    ''',
    "as the fallback": '''
        try:
            from math import log as laplace
        except ImportError:
            from pkg.noise import laplace


        def use(u):
            return laplace(u)
    ''',
    "in a function": '''
        def use(u):
            try:
                from pkg.noise import laplace
            except ImportError:
                return None
            return laplace(u)
    ''',
    "in a function, then the fallback": '''
        def use(u):
            try:
                from pkg.noise import laplace as inverse_cdf
            except ImportError:
                from math import log as inverse_cdf
            return inverse_cdf(u)
    ''',
    "a module, at the top": '''
        try:
            import pkg.noise as noise
        except ImportError:
            pass


        def use(u):
            return noise.laplace(u)
    ''',
}


@pytest.mark.parametrize("case", TRY_IMPORTS)
def test_an_import_in_a_try_is_followed_like_any_other(src, case):
    write(src, {"pkg/optional.py": TRY_IMPORTS[case]})
    path = script(src, "from pkg.optional import use\nuse(0.5)\n")
    assert ("pkg.noise", "laplace") in keys(src, path)
    assert ("pkg.noise", "logistic") not in keys(src, path)  # still by definition, not the whole module
    before = library_code(path, src, "pkg")
    edit(src, "pkg/noise.py", "return -math.log(u)", "return math.log(1 / u)")
    assert library_code(path, src, "pkg") != before


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


def sys_modules(node: ast.AST, names: set[str]) -> bool:
    """Whether `node` is `sys.modules` (`names`: what `sys` and `sys.modules` are bound to)."""
    return (isinstance(node, ast.Attribute) and node.attr == "modules" and isinstance(node.value, ast.Name)
            and node.value.id in names) or (isinstance(node, ast.Name) and node.id in names)


def from_sys_modules(node: ast.AST, names: set[str]) -> ast.AST | None:
    """The key of `sys.modules[key]` or `sys.modules.get(key)`, or None for anything else."""
    if isinstance(node, ast.Subscript) and sys_modules(node.value, names):
        return node.slice
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and sys_modules(node.func.value, names) and node.args:
        return node.args[0]
    return None


def computed_name_lookups(tree: ast.AST) -> list[int]:
    """The lines of `tree` that look up a module's name computed at run time: `getattr` of a module
    (bound by an import, or taken from `sys.modules`), `globals()`, and the module's own object,
    `sys.modules[__name__]`. The analysis follows names, so a definition reached this way would be
    code that no name reaches, and an edit of it would rerun nothing."""
    modules = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
               if isinstance(node, ast.Import) for alias in node.names}
    modules |= {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module for alias in node.names
                if module_file(f"{node.module}.{alias.name}") is not None}
    table = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names if alias.name == "sys"}
    table |= {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
              and node.module == "sys" for alias in node.names if alias.name == "modules"}
    lines = []
    for node in ast.walk(tree):
        key = from_sys_modules(node, table)
        if isinstance(key, ast.Name) and key.id == "__name__":
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "globals":
                lines.append(node.lineno)
            elif node.func.id == "getattr" and node.args and (
                    isinstance(node.args[0], ast.Name) and node.args[0].id in modules
                    or from_sys_modules(node.args[0], table) is not None):
                lines.append(node.lineno)
    return sorted(set(lines))


@pytest.mark.parametrize("source", [
    "from privssl.release import mechanisms\ngetattr(mechanisms, name)(u)",
    "import privssl.release.mechanisms as m\ngetattr(m, name)",
    "globals()[name](u)",
    "globals().get(name)(u)",
    "def f(name):\n    return globals()[name]",
    "import sys\ngetattr(sys.modules[__name__], name)(u)",
    "import sys\ngetattr(sys.modules.get(__name__), name)",
    "import sys\nsys.modules[__name__].__dict__[name]",
    "import sys as system\ngetattr(system.modules[__name__], name)",
    "from sys import modules\ngetattr(modules[__name__], name)",
    "import sys\ngetattr(sys.modules['privssl.release.mechanisms'], name)",
])
def test_a_name_computed_at_run_time_is_refused(source):
    assert computed_name_lookups(ast.parse(source)), source


@pytest.mark.parametrize("source", [
    "getattr(self, name)",  # an object's fields: code the analysis reaches through the class
    "getattr(spec, 'optional', False)",
    "import sys\ntorch = sys.modules.get('torch')",  # a third-party module, by a name written out
    "import sys\nif 'numpy' in sys.modules:\n    sys.modules['numpy'].random.seed()",
    "import sys\nsys.modules['__main__'] = main",
])
def test_a_name_written_in_the_code_is_not_refused(source):
    assert not computed_name_lookups(ast.parse(source)), source


def test_no_library_or_script_code_looks_up_a_name_computed_at_run_time():
    trees = [*library_trees(), *((path, ast.parse(path.read_text(encoding="utf-8")))
                                 for path in sorted((REPO / "scripts").glob("*.py")))]
    assert len(trees) > 100
    assert not [f"{path}:{line}" for path, tree in trees for line in computed_name_lookups(tree)]


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


def same(a, b) -> bool:
    """Equal and of the same types all the way down: a list is not a tuple, a set not a frozenset,
    and dictionaries keep their order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, frozenset):
        return a == b and all(same(x, next(y for y in b if y == x)) for x in a)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[key], b[key]) for key in a)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, field.name), getattr(b, field.name)) for field in dataclasses.fields(a))
    return a == b


def test_an_analysis_kept_as_json_comes_back_exactly(src):
    """Every module of the library, and one whose name an import in a `try` binds twice: through
    JSON, which has lists only, and back."""
    write(src, {"pkg/optional.py": TRY_IMPORTS["at the top of the module"]})
    files = [(path, ".".join(path.relative_to(SRC).with_suffix("").parts))
             for path in sorted(SRC.joinpath("privssl").rglob("*.py"))]
    files.append((src / "pkg" / "optional.py", "pkg.optional"))
    for path, name in files:
        module = code_graph._analysis(path.read_text(encoding="utf-8"), str(path), name, path.name == "__init__.py")
        kept = json.loads(json.dumps(code_graph._module_json(module)))
        assert same(code_graph._module_from_json(kept), module), path
    assert len(module.bindings["laplace"]) == 2


def test_a_later_process_takes_the_analyses_from_the_file(src, tmp_path_factory, monkeypatch):
    folder = tmp_path_factory.mktemp("pycache")
    cache = code_graph._Cache(folder)
    file = src / "pkg" / "noise.py"
    first = cache.module(file, "pkg.noise")
    cache.save()
    assert cache.file.name.endswith(".json") and json.loads(cache.file.read_text())["version"] == cache.version

    def no_analysis(*args, **kwargs):
        raise AssertionError("analysed again, not taken from the file")

    monkeypatch.setattr(code_graph, "_analysis", no_analysis)
    assert same(code_graph._Cache(folder).module(file, "pkg.noise"), first)


def forge_answers(text: str) -> str:
    kept = json.loads(text)
    kept["answers"] = [[*row[:3], "pkg=forged"] for row in kept["answers"]]
    return json.dumps(kept)


def other_version(text: str) -> str:
    kept = json.loads(forge_answers(text))
    kept["version"] = "0" * 64
    return json.dumps(kept)


def broken_analyses(text: str) -> str:
    kept = json.loads(text)
    kept["answers"] = []
    kept["entries"] = [[*row[:3], {"bindings": {}, "nodes": {"<body>": ["a digest"]}}] for row in kept["entries"]]
    return json.dumps(kept)


@pytest.mark.parametrize("spoil", [
    pytest.param(lambda text: "", id="empty"),
    pytest.param(lambda text: text[:len(text) // 2], id="truncated"),
    pytest.param(lambda text: "\x00garbage", id="not JSON"),
    pytest.param(lambda text: "[]", id="a list"),
    pytest.param(lambda text: '{"version": 1}', id="no entries"),
    pytest.param(other_version, id="another version"),  # of code_graph.py: its answers are not served
    pytest.param(broken_analyses, id="analyses that do not decode"),  # the right version: analysed again
    pytest.param(lambda text: json.dumps({**json.loads(text), "answers": [["a row", "too short"]]}), id="a short row"),
])
def test_a_file_that_cannot_be_read_as_kept_is_ignored_and_written_anew(src, tmp_path_factory, monkeypatch, spoil):
    folder = tmp_path_factory.mktemp("pycache")
    monkeypatch.setattr(code_graph, "_CACHE", code_graph._Cache(folder))
    path = script(src, "from pkg.release import release\nrelease(0, 0.5)\n")
    expected = library_code(path, src, "pkg")
    file = code_graph._CACHE.file
    file.write_text(spoil(file.read_text()))
    monkeypatch.setattr(code_graph, "_CACHE", code_graph._Cache(folder))
    assert library_code(path, src, "pkg") == expected
    kept = json.loads(file.read_text())
    assert kept["version"] == code_graph._CACHE.version and [row[3] for row in kept["answers"]] == [expected]


def test_the_forged_answers_are_served_when_the_version_matches(src, tmp_path_factory, monkeypatch):
    # the control of the case above: the spoiling reaches what is served
    folder = tmp_path_factory.mktemp("pycache")
    monkeypatch.setattr(code_graph, "_CACHE", code_graph._Cache(folder))
    path = script(src, "from pkg.release import release\nrelease(0, 0.5)\n")
    library_code(path, src, "pkg")
    code_graph._CACHE.file.write_text(forge_answers(code_graph._CACHE.file.read_text()))
    monkeypatch.setattr(code_graph, "_CACHE", code_graph._Cache(folder))
    assert library_code(path, src, "pkg") == "pkg=forged"


def test_the_file_is_the_same_whatever_the_order_of_a_set(src, tmp_path_factory):
    """String hashes, and with them the order of a frozenset, differ between processes: two runs
    that analyse the same code write the same bytes."""
    path = script(src, "from pkg.release import release\nrelease(0, 0.5)\n")
    program = ("import sys; from pathlib import Path; from privssl import code_graph as c; "
               "c._CACHE = c._Cache(Path(sys.argv[1])); c.library_code(Path(sys.argv[2]), Path(sys.argv[3]), 'pkg'); "
               "print(c._CACHE.file)")
    written = []
    for seed in ("1", "2", "3"):
        folder = tmp_path_factory.mktemp("pycache")
        out = subprocess.run([sys.executable, "-c", program, str(folder), str(path), str(src)], check=True,
                             capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed})
        written.append(Path(out.stdout.strip()).read_bytes())
    assert written[0] == written[1] == written[2]
