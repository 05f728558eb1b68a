"""The product's import graph, drawn from the code: no cycle, the layers import downwards only, no
module too long to take in at one sitting.

Every `import` and `from ... import` of every module in the product's packages counts, at any
depth (inside functions too: an import moved into a function hides a cycle, it does not remove
it). Imports under `if TYPE_CHECKING:` never run: they are kept apart, left out of the cycle
check, and held to the layering rules all the same.

An edge goes to the module named: `from a.b import c` is an edge to `a.b.c` when that is a
module, else to `a.b` (its `__init__`). Parent packages are not edges of their own (a package's
`__init__` that imports its submodules is not a cycle with them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("reader", "audio", "api", "hall", "yomite", "desk", "cluster")
MAX_LINES = 420  # "~400 lines": audio/voices/pronunciation.py (412) is one concept

# What each layer may not import: product packages and third-party web servers. desk is the
# tournament's domain: it knows nothing of the reader's engine (a reading is a channel name, a
# seed and a journal's path to it), of audio, or of the hall that drives it.
FORBIDDEN: dict[str, set[str]] = {
    "reader": {"audio", "hall", "api", "yomite", "desk", "cluster"},
    "audio": {"hall", "api", "yomite", "desk", "cluster"},
    "desk": {"reader", "audio", "hall", "api", "yomite", "cluster"},
    "hall": {"api", "yomite", "fastapi", "starlette", "uvicorn", "cluster"},
    # the cluster carries a hall's channels over a broker: below the web edge and the command
    "cluster": {"api", "yomite", "desk", "fastapi", "starlette", "uvicorn"},
    "api": {"yomite"},
    "yomite": set(),
}
# Known exceptions, each to be deleted when its work lands: (importer, imported top package).
KNOWN_EDGES: set[tuple[str, str]] = set()
# The hall reaches uvicorn's internals by name too (a module path in a string), which no import
# shows: (module, server) pairs allowed to name one.
KNOWN_NAMED: set[tuple[str, str]] = set()
SERVERS = ("fastapi", "starlette", "uvicorn")

# modules allowed over MAX_LINES, each with its reason (none today)
LONG_ALLOWED: set[str] = set()


@dataclass(frozen=True, slots=True)
class Edge:
    source: str  # module importing
    target: str  # module imported (a product module, or a third party's top-level name)
    line: int
    type_checking: bool
    in_function: bool


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_files() -> list[Path]:
    return sorted(f for p in PACKAGES for f in (ROOT / p).rglob("*.py")
                  if "migrations" not in f.relative_to(ROOT).parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import node with (under `if TYPE_CHECKING:`, inside a function)."""
    def walk(node: ast.AST, tc: bool, fn: bool) -> Iterator[
            tuple[ast.Import | ast.ImportFrom, bool, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, tc, fn
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for n in child.body:
                    yield from walk(ast.Module(body=[n], type_ignores=[]), True, fn)
                for n in child.orelse:
                    yield from walk(ast.Module(body=[n], type_ignores=[]), tc, fn)
            else:
                inner = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                yield from walk(child, tc, fn or inner)
    return walk(tree, False, False)


def edges_of(path: Path, modules: set[str], root: Path = ROOT) -> list[Edge]:
    """The imports of one file. `modules`: every product module's dotted name."""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: list[Edge] = []
    for node, tc, fn in _imports(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem
                       for a in node.names]
        for t in dict.fromkeys(targets):
            top = t.split(".")[0]
            if top in PACKAGES:
                # `import a.b.c` names a module; anything else resolves to its longest module
                while t not in modules and "." in t:
                    t = t.rpartition(".")[0]
            else:
                t = top
            out.append(Edge(me, t, node.lineno, tc, fn))
    return out


def import_graph(files: list[Path]) -> list[Edge]:
    modules = {module_name(f) for f in files}
    return [e for f in files for e in edges_of(f, modules)]


def find_cycles(edges: list[Edge]) -> list[list[str]]:
    """One cycle (as a path a -> b -> ... -> a) per strongly connected group of modules; edges
    under TYPE_CHECKING are left out (they never run)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if not e.type_checking and e.target.split(".")[0] in PACKAGES:
            graph.setdefault(e.source, set()).add(e.target)
            graph.setdefault(e.target, set())
    # Tarjan's strongly connected components, iteratively (no recursion limit to meet)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        n = stack.pop()
                        on_stack.discard(n)
                        group.add(n)
                        if n == node:
                            break
                    if len(group) > 1 or node in graph[node]:
                        groups.append(group)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    cycles = []
    for group in groups:
        start = min(group)
        # the shortest way back to the start, inside the group (breadth first)
        came: dict[str, str] = {}
        frontier = [start]
        found = None
        while frontier and found is None:
            nxt = []
            for n in frontier:
                for m in sorted(graph[n] & group):
                    if m == start:
                        found = n
                        break
                    if m not in came:
                        came[m] = n
                        nxt.append(m)
                if found is not None:
                    break
            frontier = nxt
        assert found is not None
        path = [found]
        while path[-1] != start:
            path.append(came[path[-1]])
        cycles.append([*reversed(path), start])
    return sorted(cycles)


def layer_violations(edges: list[Edge]) -> list[str]:
    bad = []
    for e in edges:
        layer = e.source.split(".")[0]
        top = e.target.split(".")[0]
        if top in FORBIDDEN[layer] and (e.source, top) not in KNOWN_EDGES:
            how = " (under TYPE_CHECKING)" if e.type_checking else ""
            bad.append(f"{e.source} imports {e.target}{how}, line {e.line}: "
                       f"{layer} must not import {top}")
    return bad


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return import_graph(product_files())


def test_the_graph_is_drawn_from_every_package(edges):
    sources = {e.source.split(".")[0] for e in edges}
    assert sources == set(PACKAGES)
    assert any(e.in_function for e in edges)  # imports inside functions are seen


def test_every_product_import_names_a_product_module(edges):
    modules = {module_name(f) for f in product_files()}
    assert [f"{e.source} line {e.line}: {e.target}" for e in edges
            if e.target.split(".")[0] in PACKAGES and e.target not in modules] == []


def test_no_import_cycle(edges):
    cycles = find_cycles(edges)
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_cycle_through_imports_only_a_type_checker_reads(edges):
    """Imports under TYPE_CHECKING are left out of the check above (they never run); a cycle
    that needs one of them is reported here, apart, and is still one to remove."""
    as_run = {tuple(c) for c in find_cycles(edges)}
    typed = [e for e in edges if e.type_checking]
    everything = [Edge(e.source, e.target, e.line, False, e.in_function) for e in edges]
    cycles = [c for c in find_cycles(everything) if tuple(c) not in as_run]
    assert cycles == [], (
        "import cycles through TYPE_CHECKING imports ("
        + ", ".join(f"{e.source} -> {e.target}" for e in typed) + "):\n"
        + "\n".join(" -> ".join(c) for c in cycles))


def test_layers_import_downwards_only(edges):
    assert layer_violations(edges) == []


def named_servers(path: Path) -> set[str]:
    """The web servers a module names in a string ("uvicorn.protocols...")."""
    return {node.value.split(".")[0] for node in ast.walk(ast.parse(path.read_text("utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.split(".")[0] in SERVERS and " " not in node.value}


def test_the_hall_names_no_web_server_internals():
    named = {(module_name(f), server) for f in (ROOT / "hall").rglob("*.py")
             for server in named_servers(f)}
    assert named - KNOWN_NAMED == set()


def test_known_exceptions_are_still_needed(edges):
    """A known exception whose import (or name) is gone must leave its list."""
    seen = {(e.source, e.target.split(".")[0]) for e in edges}
    assert KNOWN_EDGES - seen == set()
    named = {(module_name(f), server) for f in (ROOT / "hall").rglob("*.py")
             for server in named_servers(f)}
    assert KNOWN_NAMED - named == set()


def test_no_module_is_too_long_to_read_at_one_sitting():
    long = {str(f.relative_to(ROOT)): n for f in product_files()
            if (n := len(f.read_text("utf-8").splitlines())) > MAX_LINES}
    assert {k: v for k, v in long.items() if k not in LONG_ALLOWED} == {}
    # an allowed module that has been split leaves the list
    assert sorted(LONG_ALLOWED - set(long)) == []


# ---------------------------------------------------------------------- the checker itself
def _tree(tmp_path: Path, files: dict[str, str]) -> list[Edge]:
    for name, text in files.items():
        f = tmp_path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, "utf-8")
    paths = sorted(tmp_path.rglob("*.py"))
    modules = {module_name(p, tmp_path) for p in paths}
    return [e for p in paths for e in edges_of(p, modules, tmp_path)]


def test_the_checker_finds_a_cycle_hidden_in_a_function(tmp_path):
    edges = _tree(tmp_path, {
        "audio/__init__.py": "",
        "audio/a.py": "from audio import b\n",
        "audio/b.py": "def f():\n    from .c import x\n",
        "audio/c.py": "import audio.a\n",
        "audio/d.py": ("from typing import TYPE_CHECKING\n"
                       "if TYPE_CHECKING:\n    from audio import a\n"),
        "audio/e.py": "from audio.d import thing\n",
    })
    assert find_cycles(edges) == [["audio.a", "audio.b", "audio.c", "audio.a"]]
    tc = [e for e in edges if e.type_checking]
    assert [(e.source, e.target) for e in tc] == [("audio.d", "audio.a")]
    assert ("audio.e", "audio.d") in {(e.source, e.target) for e in edges}


def test_the_checker_finds_a_layer_violation(tmp_path):
    edges = _tree(tmp_path, {
        "hall/__init__.py": "",
        "api/__init__.py": "",
        "api/app.py": "",
        "hall/x.py": "def f():\n    import uvicorn\n    from api.app import create_app\n",
    })
    assert [v.split(",")[0] for v in layer_violations(edges)] == [
        "hall.x imports uvicorn", "hall.x imports api.app"]
