"""The service installs without the lab: nothing `tenk serve` or `tenk worker` runs imports the lab extra."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"

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


def _lab_modules() -> list[str]:
    """The top-level modules of every distribution in the `lab` extra."""
    lab = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["lab"]
    distributions = {re.split(r"[\[<>=; ]", requirement, maxsplit=1)[0].lower() for requirement in lab}
    modules = [
        module
        for module, owners in importlib.metadata.packages_distributions().items()
        if any(owner.lower() in distributions for owner in owners)
    ]
    # Every distribution must be found, or a renamed one would silently go unchecked.
    found = {owner.lower() for module in modules for owner in importlib.metadata.packages_distributions()[module]}
    assert distributions <= found, f"no installed modules for {distributions - found}"
    return modules


def test_the_service_and_its_commands_need_nothing_from_the_lab_extra() -> None:
    modules = _lab_modules()
    assert {"httpx", "rich", "plotly", "psycopg", "hdrh"} <= set(modules)
    run = subprocess.run([sys.executable, "-c", SERVICE_ONLY, *modules], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "service ok" in run.stdout
