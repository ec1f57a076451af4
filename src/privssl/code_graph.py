"""The library code a workflow script can run, read from the source (the standard library's `ast`;
nothing is imported or executed), and a digest of it.

The Snakefile gives every rule the digest of its script's library code as a param, so Snakemake's
`params` rerun trigger reruns exactly the rules whose scripts reach an edited piece of code, and
what depends on them; the checkpointing scripts put the same value into their checkpoints'
fingerprints, so a checkpoint never outlives the code that wrote it (docs/resuming.md).

The unit is the top-level definition, not the module. `privssl.artefacts` (the loader of every
file) imports names from most stages, so at the granularity of modules every script would reach
every module and an edit of the ALM noise would retrain SimCLR. Here a script reaches the
functions, classes and module-level assignments it names, through `from m import f`, `m.f` and
re-exports, then everything those name, transitively; a module used other than through its
attributes counts whole; a module's remaining top-level statements (which run at import, e.g.
`matplotlib.use`, an Opacus registration) count whenever anything of it is reached, and so do
its packages'. Imports inside functions count for that function. An import inside a `try` (or an
`if`) at the top of a module binds its names like any import, and a name that the `try` and its
`except ImportError:` both import is bound to both: which one runs depends on the environment.

The analysis over-approximates wherever it cannot tell (a name it cannot resolve in a privssl
module counts the whole module), so it may rerun too much, never too little, as long as no code
reaches a definition by a name computed at run time, which no reference in the source shows:
tests/test_code_graph.py refuses `getattr(module, name)`, `getattr(sys.modules[...], name)`,
`globals()` (`globals()[name]`, `globals().get(name)`) and `sys.modules[__name__]` in the library
and the scripts, and registration by assignment into another module's table in the library.

What counts as an edit: a definition's code as `ast.unparse` writes it back, without docstrings.
Comments, formatting and docstrings change no number a rule computes, so editing them reruns
nothing; the digest reads content, not paths or times, so a moved or copied project has nothing
to rerun.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "privssl"
SRC = Path(__file__).resolve().parent.parent  # the folder holding the package
DIGEST_LENGTH = 12  # hex characters: 48 bits, far from a collision among a few hundred versions
BODY = "<body>"  # the key of a module's top-level statements that are neither definitions nor imports

# name -> ("node", key) for a definition, ("import", module, attribute or None) for an import
Binding = tuple[str, ...]
Chain = tuple[str, ...]  # a dotted reference: a name and the attributes read from it


@dataclass(frozen=True)
class Node:
    """A top-level definition (or a module's remaining statements): the digest of its code, the
    dotted references it makes and the names its own imports bind."""

    digest: str
    references: frozenset[Chain]
    imports: tuple[tuple[str, Binding], ...]


@dataclass(frozen=True)
class Module:
    bindings: dict[str, tuple[Binding, ...]]  # more than one where an import in a `try` or `if` may bind it
    nodes: dict[str, Node]


def module_file(name: str, src: Path = SRC) -> Path | None:
    """The source file of module `name` (a package's `__init__.py`), or None outside the tree."""
    base = src.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _source_module(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name of a `from ... import` statement's module (relative imports resolved):
    `from . import x` means the package itself in its `__init__.py`, the enclosing one elsewhere."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[:len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _import_bindings(statement: ast.AST, module: str, is_package: bool) -> list[tuple[str, Binding]]:
    if isinstance(statement, ast.Import):
        # `import a.b` binds a; `import a.b as c` binds c to a.b
        return [(alias.asname or alias.name.split(".")[0],
                 ("import", alias.name if alias.asname else alias.name.split(".")[0], ""))
                for alias in statement.names]
    if isinstance(statement, ast.ImportFrom):
        source = _source_module(statement, module, is_package)
        if any(alias.name == "*" for alias in statement.names):
            return [("*" + source, ("import", source, ""))]
        return [(alias.asname or alias.name, ("import", source, alias.name)) for alias in statement.names]
    return []


def _references(statement: ast.AST, module: str, is_package: bool) -> tuple[set[Chain], list[tuple[str, Binding]]]:
    """The maximal dotted chains of a subtree (`a.b.c(x)` gives (a, b, c) and (x,), not (a,)) and
    the names its imports bind, in one walk (breadth first: an Attribute is met before the
    Attribute or Name it reads from, which is then marked as part of it)."""
    chains: set[Chain] = set()
    imports: list[tuple[str, Binding]] = []
    inner: set[int] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
            if id(node) in inner:
                continue
            attributes, value = [], node
            while isinstance(value, ast.Attribute):
                attributes.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name):
                chains.add((value.id, *reversed(attributes)))
        elif isinstance(node, ast.Name):
            if id(node) not in inner:
                chains.add((node.id,))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports += _import_bindings(node, module, is_package)
    return chains, imports


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _node(statements: list[ast.AST], module: str, is_package: bool) -> Node:
    chains: set[Chain] = set()
    imports: list[tuple[str, Binding]] = []
    for statement in statements:
        found, bound = _references(statement, module, is_package)
        chains |= found
        imports += bound
    code = "\n".join(ast.unparse(statement) for statement in statements)
    digest = hashlib.sha256(code.encode("utf-8")).hexdigest()[:DIGEST_LENGTH]
    return Node(digest, frozenset(chains), tuple(imports))


def _analysis(text: str, filename: str, module: str, is_package: bool) -> Module:
    """A module's definitions and bindings, from one parse."""
    tree = _without_docstrings(ast.parse(text, filename=filename))
    bindings: dict[str, tuple[Binding, ...]] = {}
    groups: dict[str, list[ast.AST]] = {BODY: []}
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            groups[statement.name] = [statement]
            bindings[statement.name] = (("node", statement.name),)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and all(
                isinstance(target, ast.Name) for target in _targets(statement)):
            names = [target.id for target in _targets(statement)]
            key = names[0]
            groups.setdefault(key, []).append(statement)  # a name assigned twice: both count
            bindings.update({name: (("node", key),) for name in names})
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            bindings.update({name: (binding,) for name, binding in _import_bindings(statement, module, is_package)})
        elif not isinstance(statement, ast.Pass):
            groups[BODY].append(statement)
            # `try: from m import f` / `except ImportError: from n import f`: f may be either, so it
            # is bound to both, and to what it was bound to before (the `try` may fail)
            for node in ast.walk(statement):
                for name, binding in _import_bindings(node, module, is_package):
                    bindings[name] = bindings.get(name, ()) + (binding,)
    nodes = {key: _node(statements, module, is_package) for key, statements in groups.items()}
    return Module(bindings, nodes)


def _targets(statement: ast.Assign | ast.AnnAssign) -> list[ast.AST]:
    return statement.targets if isinstance(statement, ast.Assign) else [statement.target]


def _module_json(module: Module) -> dict:
    """A module's analysis as JSON, which has lists only: references sorted, so that the file is
    the same whatever the order of a frozenset (string hashes differ between processes)."""
    return {"bindings": {name: [list(binding) for binding in found] for name, found in module.bindings.items()},
            "nodes": {key: [node.digest, sorted(list(chain) for chain in node.references),
                            [[name, list(binding)] for name, binding in node.imports]]
                      for key, node in module.nodes.items()}}


def _module_from_json(data: dict) -> Module:
    """The inverse of `_module_json`: the tuples and frozensets back, so that what was kept equals
    what the analysis gives."""
    return Module({name: tuple(tuple(binding) for binding in found) for name, found in data["bindings"].items()},
                  {key: Node(digest, frozenset(tuple(chain) for chain in references),
                             tuple((name, tuple(binding)) for name, binding in imports))
                   for key, (digest, references, imports) in data["nodes"].items()})


class _Cache:
    """Analyses keyed by a file's content (so an edit is seen whatever its time stamp), kept in
    memory and in `__pycache__` beside the package, like Python's own bytecode: the Snakefile asks
    for every script's code at each start of Snakemake, and parsing the library costs about a
    second. It also keeps `library_code`'s answers, keyed by the script's content and a digest of
    every module of the package (`library_digest`): the traversal from each of the workflow's ~45
    scripts costs another second, at every start of Snakemake. The file is JSON, not a pickle: a
    file that anyone who can write `__pycache__` can edit is read by every start, and JSON is only
    data. It is ignored when written by another Python (`ast.unparse` differs between versions)
    or another version of this module, or when it cannot be read; holds only what the last process
    that analysed something new used and the answers for the package as it is now (so it does not
    grow with every edit); and is not written where the tree is read-only. A start that finds all
    its answers kept decodes none of the analyses: they are turned back into objects when used."""

    def __init__(self, folder: Path):
        self.file = folder / f"code_graph.{sys.implementation.cache_tag}.json"
        self.version = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
        self.stored: dict[tuple[str, str, bool], dict] | None = None  # the file's analyses, as JSON, until used
        self.entries: dict[tuple[str, str, bool], Module] = {}
        self.rows: dict[tuple[str, str, bool], str] = {}  # an analysis as a line of the file: encoded once
        self.answers: dict[tuple[str, str, str], str] = {}  # (script, library digest, package) -> answer
        self.used: set[tuple[str, str, bool]] = set()
        self.libraries: set[str] = set()  # the library digests this process computed: the package now
        self.dirty = False

    def module(self, file: Path, name: str) -> Module:
        self._ensure_loaded()
        data = file.read_bytes()
        key = (hashlib.sha256(data).hexdigest(), name, file.name == "__init__.py")
        if key not in self.entries:
            try:
                self.entries[key] = _module_from_json(self.stored.pop(key))
            except (KeyError, TypeError, ValueError, AttributeError):  # not kept, or not as written
                self.entries[key] = _analysis(data.decode("utf-8"), str(file), name, key[2])
                self.dirty = True
        self.used.add(key)
        return self.entries[key]

    def answer(self, key: tuple[str, str, str]) -> str | None:
        self._ensure_loaded()
        self.libraries.add(key[1])
        return self.answers.get(key)

    def keep_answer(self, key: tuple[str, str, str], answer: str) -> None:
        self.answers[key] = answer
        self.dirty = True

    def _ensure_loaded(self) -> None:
        if self.stored is None:
            self.stored, answers = self._load()
            self.answers = answers | self.answers

    def _load(self) -> tuple[dict, dict]:
        try:
            with open(self.file, encoding="utf-8") as handle:
                kept = json.load(handle)
            if kept["version"] != self.version:
                return {}, {}
            return ({(digest, name, is_package): module for digest, name, is_package, module in kept["entries"]},
                    {(script, library, package): answer for script, library, package, answer in kept["answers"]
                     if isinstance(answer, str)})
        except (OSError, ValueError, KeyError, TypeError):  # ValueError: not JSON, or a row of another length
            return {}, {}

    def save(self) -> None:
        """Write the entries this process used, atomically (xdist workers and Snakemake runs may
        start at once); nothing when nothing is new or the tree is read-only. Sorted, one analysis a
        line: the same analyses give the same file."""
        if not self.dirty or self.stored is None:
            return
        for key in self.used - self.rows.keys():
            self.rows[key] = json.dumps([*key, _module_json(self.entries[key])], separators=(",", ":"))
        answers = sorted([*key, answer] for key, answer in self.answers.items() if key[1] in self.libraries)
        text = "".join(["{", f'"version":{json.dumps(self.version)},\n"entries":[\n',
                        ",\n".join(self.rows[key] for key in sorted(self.used)),
                        '\n],\n"answers":', json.dumps(answers, separators=(",", ":")), "}\n"])
        try:
            self.file.parent.mkdir(exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.file.parent, prefix=self.file.name)
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, self.file)
            self.dirty = False
        except OSError:
            pass


_CACHE = _Cache(SRC / PACKAGE / "__pycache__")


class CodeGraph:
    """The definitions a script reaches, found by walking references from the script's code."""

    def __init__(self, src: Path = SRC, package: str = PACKAGE):
        self.src, self.package = src, package
        self.reached: dict[tuple[str, str], str] = {}  # (module, key) -> digest
        self._whole: set[str] = set()
        self._modules: dict[str, Module | None] = {}

    def module(self, name: str) -> Module | None:
        if name not in self._modules:
            file = module_file(name, self.src) if name.split(".")[0] == self.package else None
            self._modules[name] = None if file is None else _CACHE.module(file, name)
        return self._modules[name]

    def reach_script(self, script: Path) -> None:
        tree = _without_docstrings(ast.parse(Path(script).read_text(encoding="utf-8"), filename=str(script)))
        self._follow(_node([tree], "", False), {}, "")

    def _follow(self, node: Node, bindings: dict[str, tuple[Binding, ...]], module: str) -> None:
        local: dict[str, tuple[Binding, ...]] = {}  # a name imported twice (`try`/`except ImportError`): both
        for name, binding in node.imports:
            local[name] = local.get(name, ()) + (binding,)
        for _, (_, source, attribute) in node.imports:  # an import runs the imported module's statements
            name = f"{source}.{attribute}" if attribute and self.module(f"{source}.{attribute}") else source
            if self.module(name) is not None:
                self._reach(name, BODY)
        for chain in node.references:
            for binding in local.get(chain[0]) or bindings.get(chain[0], ()):
                self._resolve(binding, chain[1:], module)
        for name, found in local.items():  # a star import inside a function: the whole module
            if name.startswith("*"):
                for binding in found:
                    self._resolve(binding, (), module)
        for name, found in bindings.items():
            if name.startswith("*") and node.references:
                for binding in found:
                    self._resolve(binding, (), module)

    def _resolve(self, binding: Binding, rest: Chain, module: str) -> None:
        if binding[0] == "node":
            self._reach(module, binding[1])
            return
        _, source, attribute = binding
        if attribute:
            if self.module(f"{source}.{attribute}") is not None:
                self._resolve_module(f"{source}.{attribute}", rest)
            else:
                self._symbol(source, attribute)
        else:
            self._resolve_module(source, rest)

    def _resolve_module(self, name: str, rest: Chain) -> None:
        """A chain read from module `name`: `m.sub.f` reaches f of m.sub; a bare `m` all of m."""
        if self.module(name) is None:
            return
        for attribute in rest:
            if self.module(f"{name}.{attribute}") is None:
                self._symbol(name, attribute)
                return
            name = f"{name}.{attribute}"
        self._reach_whole(name)

    def _symbol(self, module: str, name: str) -> None:
        code = self.module(module)
        if code is None:
            return
        found = code.bindings.get(name)
        if found is None:  # not a name we can see defined there: count the whole module
            self._reach_whole(module)
        for binding in found or ():
            self._resolve(binding, (), module)

    def _reach_whole(self, module: str) -> None:
        if module in self._whole:
            return
        self._whole.add(module)
        for key in self.module(module).nodes:
            self._reach(module, key)

    def _reach(self, module: str, key: str) -> None:
        if (module, key) in self.reached:
            return
        code = self.module(module)
        node = code.nodes[key]
        self.reached[(module, key)] = node.digest
        self._follow(node, code.bindings, module)
        # anything reached runs its module's and its packages' top-level statements first
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            self._reach(".".join(parts[:i]), BODY)


def code_digest(path: Path) -> str:
    """A digest of a whole file's code: equal for two files that differ only in comments,
    formatting or docstrings."""
    tree = _without_docstrings(ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path)))
    return _node([tree], "", False).digest


def reached(script: Path, src: Path = SRC, package: str = PACKAGE) -> dict[tuple[str, str], str]:
    """{(module, definition): digest} of every library definition `script` can run."""
    graph = CodeGraph(src, package)
    graph.reach_script(Path(script))
    return dict(sorted(graph.reached.items()))


def library_code(script: Path, src: Path = SRC, package: str = PACKAGE) -> str:
    """`module=digest` per library module, of the definitions of it that `script` reaches, one
    string sorted by module: the value of a rule's `library` param and of a checkpoint's `code`
    field. A module absent from it is code the script cannot run."""
    key = (hashlib.sha256(Path(script).read_bytes()).hexdigest(), library_digest(src, package), package)
    answer = _CACHE.answer(key)
    if answer is None:
        by_module: dict[str, list[str]] = {}
        for (module, name), digest in reached(script, src, package).items():
            by_module.setdefault(module, []).append(f"{name}:{digest}")
        answer = " ".join(f"{module}={hashlib.sha256(' '.join(parts).encode()).hexdigest()[:DIGEST_LENGTH]}"
                          for module, parts in by_module.items())
        _CACHE.keep_answer(key, answer)
    _CACHE.save()
    return answer


def library_digest(src: Path = SRC, package: str = PACKAGE) -> str:
    """A digest of every module file of the package, by path and bytes: all that `reached` can
    read besides the script, so an answer kept under it is the answer for the package as it is.
    Read anew at every call (~3 ms for the ~100 files here): a time stamp could miss an edit
    made within the file system's clock tick."""
    digest = hashlib.sha256()
    for file in sorted(Path(src, package).rglob("*.py")):
        digest.update(f"{file.relative_to(src).as_posix()}\0".encode())
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()
