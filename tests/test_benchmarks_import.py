"""The benchmark scripts are not run by the suite (speed is measured on a quiet machine, never in a test),
so nothing else notices when a refactor moves a name they import: one did (`wait_http_ok`). What they share
with the suite (the stack, its credentials) is harness/, never the suite itself."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import benchmarks
import pytest

MODULES = sorted(info.name for info in pkgutil.iter_modules(benchmarks.__path__))


def test_there_are_benchmarks_to_check() -> None:
    assert "bench_reads" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_every_benchmark_module_imports(name: str) -> None:
    importlib.import_module(f"benchmarks.{name}")


def test_benchmarks_import_nothing_from_the_suite() -> None:
    found = [
        f"{path.name}:{node.lineno}"
        for path in sorted(Path(benchmarks.__path__[0]).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom | ast.Import)
        and any(
            name == "tests" or name.startswith("tests.")
            for name in ([node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
        )
    ]
    assert not found, f"benchmarks importing the test suite (share it through harness/ instead): {found}"
