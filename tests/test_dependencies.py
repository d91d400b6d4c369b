"""Every third-party import under `src/tenk` is declared: in `[project].dependencies`, or in the extra that owns
the importing module; every one of tenk-doctor (packages/tenk-doctor/src/tenk/doctor) in its own pyproject's, and
doctor imports nothing of tenk but itself, since it installs without the service. What merely happens to be
installed (a dependency's dependency, the dev group) does not count: a release of the library that drops it
would break tenk at import.

The imports are read from the source with `ast`, at any depth, as `tests/test_import_graph.py` reads them; the
module each names is mapped to the distributions that install it (`importlib.metadata.packages_distributions`).
An extra's distributions may be imported by the modules it owns (`EXTRA_OWNERS`), and by any module inside a
function: a deferred import runs only on the path that needs the extra (`tenk.app.create_traced_app`, when
tracing is on), which `tests/test_packaging.py` holds to for the lab.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenk.platform.fast_paths import TESTED, release
from tests.test_import_graph import DOCTOR_SRC, SRC, module_files
from tests.test_packaging import DOCTOR_PYPROJECT, PYPROJECT, distribution_name, normalised

LOCK = PYPROJECT.with_name("uv.lock")

# extra -> the modules of tenk (and their submodules) that may import its distributions at the top.
EXTRA_OWNERS: dict[str, tuple[str, ...]] = {
    "lab": ("tenk.lab",),
    "otel": ("tenk.ops.tracing", "tenk.ops.server_spans", "tenk.ingest.tracelinks"),
}


@dataclass(frozen=True)
class ThirdPartyImport:
    module: str  # the importing module of tenk
    line: int
    name: str  # the top-level module imported
    deferred: bool  # inside a function


def _top_level_imports(tree: ast.Module) -> Iterator[tuple[str, int, bool]]:
    """(top-level module, line, deferred) of every absolute import in `tree`."""
    deferred_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            deferred_lines.update(inner.lineno for inner in ast.walk(node) if isinstance(inner, ast.stmt))
    for name, line in _imported_names(tree):
        yield name.partition(".")[0], line, line in deferred_lines


def _imported_names(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(dotted module name, line) of every absolute import in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module, node.lineno


def third_party_imports(src: Path = SRC) -> list[ThirdPartyImport]:
    """The imports of the modules of `tenk` under `src` (one distribution's source root)."""
    found = []
    for module, path in module_files(src, "tenk").items():
        for name, line, deferred in _top_level_imports(ast.parse(path.read_text(), str(path))):
            if name != "tenk" and name not in sys.stdlib_module_names and name != "__future__":
                found.append(ThirdPartyImport(module, line, name, deferred))
    return found


def _owns(extra: str, module: str) -> bool:
    return any(module == owned or module.startswith(f"{owned}.") for owned in EXTRA_OWNERS.get(extra, ()))


def undeclared(project: dict[str, Any], src: Path = SRC) -> list[str]:
    """What `project` (pyproject's `[project]` table) does not declare for the imports of the modules under
    `src`, one line each."""
    dependencies = {distribution_name(requirement) for requirement in project["dependencies"]}
    extras = {
        extra: {distribution_name(requirement) for requirement in requirements}
        for extra, requirements in project.get("optional-dependencies", {}).items()
    }
    installs = importlib.metadata.packages_distributions()
    problems = []
    for found in third_party_imports(src):
        owners = {normalised(owner) for owner in installs.get(found.name, [])}
        where = f"{found.module}:{found.line} imports {found.name}"
        if not owners:
            problems.append(f"{where}, which no installed distribution provides")
        elif owners & dependencies:
            continue
        elif not any(
            owners & distributions and (found.deferred or _owns(extra, found.module))
            for extra, distributions in extras.items()
        ):
            problems.append(f"{where} ({', '.join(sorted(owners))}), declared nowhere that module may use")
    return problems


def _project(pyproject: Path = PYPROJECT) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(pyproject.read_text())["project"]
    return project


def imports_of_the_service(src: Path = DOCTOR_SRC) -> list[str]:
    """Where a module of tenk-doctor imports a module of tenk that is not doctor's: the service's, which a
    `tenk-doctor` install does not have."""
    found = []
    for module, path in module_files(src, "tenk").items():
        for name, line in _imported_names(ast.parse(path.read_text(), str(path))):
            if (name == "tenk" or name.startswith("tenk.")) and not name.startswith("tenk.doctor"):
                found.append(f"{module}:{line} imports {name}")
    return found


def test_every_third_party_import_of_tenk_is_declared_where_its_module_may_use_it() -> None:
    problems = undeclared(_project())
    assert not problems, "\n".join(problems)


def test_every_third_party_import_of_tenk_doctor_is_declared_by_tenk_doctor() -> None:
    problems = undeclared(_project(DOCTOR_PYPROJECT), DOCTOR_SRC)
    assert not problems, "\n".join(problems)
    # The walk found doctor's modules (click, yaml), and only doctor's.
    found = third_party_imports(DOCTOR_SRC)
    assert {"click", "yaml"} <= {imported.name for imported in found}
    assert all(imported.module.startswith("tenk.doctor") for imported in found)


def test_tenk_doctor_imports_nothing_of_the_service() -> None:
    assert not imports_of_the_service(), "\n".join(imports_of_the_service())


def test_an_import_of_the_service_from_doctor_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "tenk" / "doctor"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "def version() -> str:\n    from tenk import __version__\n\n    return __version__\n"
    )
    assert imports_of_the_service(tmp_path) == ["tenk.doctor:2 imports tenk"]


def test_an_import_declared_only_by_a_dependency_of_a_dependency_is_caught() -> None:
    # tenk.doctor reads YAML: without pyyaml among its dependencies, only the dev group would install it.
    project = _project(DOCTOR_PYPROJECT)
    project["dependencies"] = [req for req in project["dependencies"] if distribution_name(req) != "pyyaml"]
    assert any("imports yaml" in problem and "tenk.doctor" in problem for problem in undeclared(project, DOCTOR_SRC))


def test_an_extra_s_distribution_is_for_the_modules_that_extra_owns() -> None:
    # The lab's load reports use rich; were it imported at the top of a service module, that module would
    # fail on an install without the lab.
    project = _project()
    project["optional-dependencies"] = {"otel": project["optional-dependencies"]["lab"]}
    assert any(problem.startswith("tenk.lab.") and "imports rich" in problem for problem in undeclared(project))


def test_the_fast_paths_are_tested_from_the_lower_bounds_to_past_the_locked_versions() -> None:
    # CI runs the suite on both ends (make test-lowest, make test): the range tenk.platform.fast_paths trusts
    # is what they cover, and the newest that uv.lock holds must lie inside it, or make test runs the twins.
    lower = {
        distribution_name(requirement): bound.group(1)
        for requirement in _project()["dependencies"]
        if (bound := re.search(r">=([0-9][0-9.]*)", requirement))
    }
    locked = {package["name"]: package["version"] for package in tomllib.loads(LOCK.read_text())["package"]}
    for distribution, (lowest, below) in TESTED.items():
        assert lowest == lower[distribution], (distribution, lowest, lower[distribution])
        assert release(lowest) <= release(locked[distribution]) < release(below), (distribution, locked[distribution])
