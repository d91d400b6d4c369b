"""The lab's stages run one way, and its functions stay short enough to read.

The lab is a pipeline: a ladder is *defined* (definition/), load is *driven* at a target (driving/), the
*targets* the lab ships are served (targets/) by *processes* it starts and stops (processes/), a ladder
is *measured* rung by rung (measuring/), and what was measured becomes *results* (results/). A stage
may import its own modules, the stages before it, and the leaves every stage shares (documents.py, the
data model each stage reads and writes; errors.py; cpus.py). It never imports a later stage: driving
does not know how its figures are reported, and measuring does not know what a report looks like. The
graph is `tests.test_import_graph`'s, so deferred and TYPE_CHECKING imports count, and the failure names
the file and line of each import that runs backwards.

Every function and method of the lab, checked with `ast`, is at most 80 lines from its `def` to its end:
past that, a function holds several steps that want names of their own.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_import_graph import SRC, _write, import_graph, module_files

LAB = "tenk.lab"
# What every stage may import, and which imports no stage.
LEAVES = ("documents", "errors", "cpus")
STAGES = ("definition", "driving", "targets", "processes", "measuring", "results")
# The command line wires the stages together: it may import any of them, and none imports it.
ENTRY = ("cli",)
MAX_FUNCTION_LINES = 80


def rank(module: str, lab: str = LAB) -> int | None:
    """The stage of a module of the lab, as its place in the order (the leaves first, the entry last),
    or None for a module placed in no stage."""
    top = module.removeprefix(lab + ".").split(".")[0]
    order = [LEAVES, *((stage,) for stage in STAGES), ENTRY]
    return next((place for place, names in enumerate(order) if top in names), None)


def backward_imports(src: Path, lab: str = LAB) -> list[str]:
    """Each import of a later stage by an earlier one, and each module placed in no stage."""
    modules = module_files(src, lab.split(".")[0])
    graph = import_graph(src, lab.split(".")[0])
    found = []
    for module, edges in sorted(graph.items()):
        if not module.startswith(lab + "."):
            continue
        here = rank(module, lab)
        if here is None:
            found.append(f"{modules[module].relative_to(src)}: in no stage (place it in one of {STAGES})")
            continue
        later = {target: edge.line for target, edge in edges.items() if (rank(target, lab) or 0) > here}
        # `from tenk.lab.results.latency import ...` runs results/__init__.py too: name the module alone.
        named = {
            target: line
            for target, line in later.items()
            if not any(other.startswith(target + ".") and later[other] == line for other in later)
        }
        for target, line in sorted(named.items(), key=lambda item: (item[1], item[0])):
            found.append(f"{modules[module].relative_to(src)}:{line} imports {target}, a later stage")
    return found


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Every function and method under `root` longer than `limit` lines, with its file (from `root`) and line."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} is {length} lines")
    return found


def test_no_stage_of_the_lab_imports_a_later_one() -> None:
    found = backward_imports(SRC)
    assert not found, "the lab's stages import backwards (deferred and TYPE_CHECKING imports count):\n" + "\n".join(
        found
    )


def test_no_function_of_the_lab_is_over_80_lines() -> None:
    found = long_functions(SRC / "tenk" / "lab")
    assert not found, "functions to split into named steps:\n" + "\n".join(found)


LAB_PACKAGES = {
    "tenk/__init__.py": "",
    "tenk/lab/__init__.py": "",
    "tenk/lab/documents.py": "",
    "tenk/lab/driving/__init__.py": "",
    "tenk/lab/results/__init__.py": "",
    "tenk/lab/results/latency.py": "",
}


def test_a_deferred_import_of_a_later_stage_is_named_with_its_line(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            **LAB_PACKAGES,
            "tenk/lab/driving/k6.py": "from tenk.lab.documents import *\n\ndef run():\n"
            "    from tenk.lab.results.latency import encode\n",
        },
    )
    assert backward_imports(tmp_path) == ["tenk/lab/driving/k6.py:4 imports tenk.lab.results.latency, a later stage"]


def test_a_later_stage_may_import_an_earlier_one_and_the_leaves(tmp_path: Path) -> None:
    _write(tmp_path, {**LAB_PACKAGES, "tenk/lab/results/tables.py": "from tenk.lab import documents, driving\n"})
    assert backward_imports(tmp_path) == []


def test_a_module_in_no_stage_is_named(tmp_path: Path) -> None:
    _write(tmp_path, {**LAB_PACKAGES, "tenk/lab/plan.py": "from tenk.lab.documents import *\n"})
    assert backward_imports(tmp_path) == [
        f"tenk/lab/plan.py: in no stage (place it in one of {STAGES})",
    ]


def test_a_function_is_measured_from_its_def_to_its_last_line(tmp_path: Path) -> None:
    def body(indent: str) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(79))

    _write(
        tmp_path,
        {
            "short.py": f"def fits():\n{body('    ')}",
            "long.py": f"class C:\n    def over(self):\n{body(' ' * 8)}        y = 0\n",
        },
    )
    assert long_functions(tmp_path) == ["long.py:2 over is 81 lines"]
