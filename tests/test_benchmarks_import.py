"""The benchmark scripts are not run by the suite (speed is measured on a quiet machine, never in a test),
so nothing else notices when a refactor moves a name they import: one did (`wait_http_ok`)."""

from __future__ import annotations

import importlib
import pkgutil

import benchmarks
import pytest

MODULES = sorted(info.name for info in pkgutil.iter_modules(benchmarks.__path__))


def test_there_are_benchmarks_to_check() -> None:
    assert "bench_reads" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_every_benchmark_module_imports(name: str) -> None:
    importlib.import_module(f"benchmarks.{name}")
