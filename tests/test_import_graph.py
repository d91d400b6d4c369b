"""No import cycles in `src/tenk`, counting every import a reader sees.

The graph is built from the source with `ast`, not from what the interpreter happened to load, so that
an import written inside a function (deferred until the call) counts as much as one at the top: a
deferred import that closes a circle hides it from the interpreter, not from the reader.

What counts as an edge from module `m` to module `t`:

- every `import t` and `from t import name`, at any depth: top level, functions, methods, `try`;
- imports under `if TYPE_CHECKING:` too. They never run, but they are a dependency all the same (mypy
  follows them, and a reader must know `t` to read `m`), and a cycle through one is a module that
  both uses and is used by another: the design smell the rule is for;
- `from pkg import name` is an edge to `pkg.name` when that is a module, else to `pkg`;
- importing `a.b.c` also runs `a/__init__.py` and `a/b/__init__.py` first, unless they are `m`'s own
  parents (already running when `m` runs): those are edges too, so a package `__init__` that
  re-exports its modules puts them in the graph of everyone who imports any one of them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src"
# tenk-doctor's source root, a distribution of its own (packages/tenk-doctor): tenk.doctor under it.
DOCTOR_SRC = SRC.parent / "packages" / "tenk-doctor" / "src"


@dataclass(frozen=True)
class Import:
    target: str
    line: int


def module_files(src: Path, package: str) -> dict[str, Path]:
    """Module name -> file, for every module of `package` under `src`."""
    modules = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """(absolute name, line) of everything `module` imports, wherever in the file the import is."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            # `from pkg import name`: the module `pkg.name` if there is one (the graph keeps only modules).
            yield base, node.lineno
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def import_graph(src: Path, package: str) -> dict[str, dict[str, Import]]:
    """module -> {imported module -> the first import of it}, within `package`."""
    modules = module_files(src, package)
    graph: dict[str, dict[str, Import]] = {}
    for module, path in modules.items():
        edges: dict[str, Import] = {}
        own_parents = {".".join(module.split(".")[:depth]) for depth in range(1, module.count(".") + 2)}
        named: dict[str, int] = {}
        for name, line in _imports(ast.parse(path.read_text(), str(path)), module, path.name == "__init__.py"):
            named.setdefault(name, line)
        for name, line in named.items():
            parts = name.split(".")
            for depth in range(1, len(parts) + 1):
                target = ".".join(parts[:depth])
                if target in modules and target not in own_parents:
                    edges.setdefault(target, Import(target, line))
        graph[module] = edges
    return graph


def tangles(graph: dict[str, dict[str, Import]]) -> list[set[str]]:
    """The strongly connected components of more than one module: each holds at least one cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:
        # Tarjan's algorithm; the graph is a few hundred modules deep at most.
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph[node]:
            if successor not in index:
                connect(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return components


def cycles(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """One shortest cycle in each tangle."""
    return [shortest_cycle(graph, component) for component in tangles(graph)]


def shortest_cycle(graph: dict[str, dict[str, Import]], component: set[str]) -> list[str]:
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph[node]):
                if successor == start:
                    return [*paths[node], start]
                if successor in component and successor not in paths:
                    paths[successor] = [*paths[node], successor]
                    following.append(successor)
        frontier = following
    raise AssertionError(f"no cycle through {start} in its own component")


def describe(graph: dict[str, dict[str, Import]], cycle: list[str], src: Path, package: str) -> str:
    """The cycle on one line, then where each of its imports is written."""
    modules = module_files(src, package)
    steps = [
        f"  {modules[here].relative_to(src)}:{graph[here][there].line} imports {there}"
        for here, there in pairwise(cycle)
    ]
    return " -> ".join(cycle) + "\n" + "\n".join(steps)


@pytest.mark.parametrize("src", [SRC, DOCTOR_SRC], ids=["tenk", "tenk-doctor"])
def test_no_module_of_tenk_imports_itself_through_others(src: Path) -> None:
    graph = import_graph(src, "tenk")
    assert graph
    found = [
        describe(graph, shortest_cycle(graph, tangle), src, "tenk") + f"\n  in a tangle of {sorted(tangle)}"
        for tangle in tangles(graph)
    ]
    assert not found, "import cycles (deferred and TYPE_CHECKING imports count):\n" + "\n".join(found)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cycle_closed_by_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import helper\n",
            "pkg/b.py": "def helper():\n    from pkg import a\n    return a\n",
        },
    )
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_a_cycle_closed_by_a_type_checking_import_is_found(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
            "pkg/b.py": "from .a import something\n",
        },
    )
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_a_cycle_through_a_package_init_that_reexports_is_found(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "from pkg.sub.heavy import thing\n",
            "pkg/sub/heavy.py": "import pkg.core\n",
            "pkg/sub/light.py": "",
            "pkg/core.py": "from pkg.sub.light import nothing\n",
        },
    )
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.core", "pkg.sub", "pkg.sub.heavy", "pkg.core"]]


def test_a_package_importing_its_own_modules_is_no_cycle(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.sub import thing\n",
            "pkg/sub/__init__.py": "from .one import thing\n",
            "pkg/sub/one.py": "from pkg.sub.two import other\n",
            "pkg/sub/two.py": "from . import three\n",
            "pkg/sub/three.py": "",
        },
    )
    assert cycles(import_graph(tmp_path, "pkg")) == []
