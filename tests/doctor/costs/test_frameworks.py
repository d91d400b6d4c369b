"""The costs that depend on FastAPI's and pydantic's versions, counted on the locked versions in the suite
and, in the slow run, on the oldest and newest FastAPI and pydantic doctor's table was measured on, each in
a throwaway environment; and the table itself: every rule has a count, and the test it names exists."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from harness.stack import Stack
from tenk.doctor import RULES
from tenk.doctor._costs import table
from tests.doctor.costs.frameworks import measure
from tests.doctor.costs.table import check, installed, row
from tests.test_dependencies import LOCK

REPO = Path(__file__).parents[3]
# The oldest FastAPI tenk declares (and the table was counted from), with the oldest pydantic 2 it does and
# the last pydantic 1; the last FastAPI that ran on pydantic 1 (0.126 dropped it); the newest of both.
ENVIRONMENTS = (
    ("fastapi==0.115.0", "pydantic==2.8.0"),
    ("fastapi==0.115.0", "pydantic==1.10.26"),
    ("fastapi==0.125.0", "pydantic==1.10.26"),
    ("fastapi==0.165.0", "pydantic==2.14.4"),
)
# redis-py before 8, whose asyncio pool had no ceiling by default.
REDIS_ENVIRONMENT = ("redis==7.4.1",)
# Creating an environment and installing into it from uv's cache takes seconds; from PyPI on a cold
# cache, a minute or so on this machine's link.
INSTALL_S = 300.0
PROBE_S = 120.0


def check_frameworks(counts: dict[str, Any]) -> None:
    """Every framework count in `counts` (frameworks.measure's) against the table, on the versions it
    reports."""
    versions = installed(fastapi=counts["fastapi"], pydantic=counts["pydantic"], starlette=counts["starlette"])

    def pair(rule: str, pattern: str, fix: str, case: str | None = None) -> None:
        check(rule, counts[pattern], counts[fix], case, versions)

    for case in ("model", "optional", "annotated", "subclass"):
        pair("double-validation", f"double-validation/{case}", "double-validation/fix")
    # Two nested models, each validated again where one model is.
    assert counts["double-validation/nested"] == 2 * row("double-validation", versions=versions).pattern
    # A response model of another class is validated once, from the returned object's attributes: the
    # projection a response model is for, on every version; a dict is validated once, the only time.
    assert (counts["double-validation/other-class"], counts["double-validation/other-class-response-model"]) == (0, 1)
    assert counts["double-validation/dict"] == 1
    pair("dump-only-model", "dump-only-model/pattern", "dump-only-model/fix")
    pair("thread-hop", "thread-hop/def-route", "thread-hop/async-route", "route")
    # Without a return annotation, a def route has no response model to validate in the pool: one hop.
    pair("thread-hop", "thread-hop/def-route-bare", "thread-hop/async-route", "route-bare")
    pair("thread-hop", "thread-hop/def-dependency", "thread-hop/async-dependency", "dependency")
    pair("sync-route", "sync-route/pattern", "sync-route/fix")
    assert (counts["sync-route/threads"], counts["sync-route/waiting"]) == (counts["sync-route/pattern"], 1)
    for kind in ("task-groups", "memory-streams"):
        pair("base-http-middleware", f"base-http-middleware/pattern/{kind}", f"base-http-middleware/fix/{kind}")


async def test_counts_on_the_locked_versions_are_the_tables() -> None:
    check_frameworks(await measure())


def _environment(root: Path, *requirements: str) -> Path:
    """A throwaway environment holding `requirements` (and httpx, which the harness drives apps with)."""
    uv = str(Path(sys.executable).parent / "uv")
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(root)], check=True, timeout=INSTALL_S)
    python = root / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), *requirements, f"httpx=={metadata.version('httpx')}"],
        check=True,
        timeout=INSTALL_S,
    )
    return python


def _probe(python: Path, module: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), "-m", module, *args], cwd=REPO, capture_output=True, text=True, timeout=PROBE_S, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_counts_on_the_oldest_and_newest_supported_versions_are_the_tables(tmp_path: Path, stack: Stack) -> None:
    for number, requirements in enumerate(ENVIRONMENTS):
        counts = _probe(_environment(tmp_path / f"env-{number}", *requirements), "tests.doctor.costs.frameworks")
        assert [f"fastapi=={counts['fastapi']}", f"pydantic=={counts['pydantic']}"] == list(requirements)
        check_frameworks(counts)
    python = _environment(tmp_path / "env-redis", *REDIS_ENVIRONMENT)
    counts = _probe(python, "tests.doctor.costs.redis_pool", stack.redis.url)
    pattern, fix = (counts[f"unbounded-pool/redis.asyncio/{side}"] for side in ("pattern", "fix"))
    check("unbounded-pool", pattern, fix, "redis.asyncio", installed(redis=counts["redis"]))


def test_the_table_names_every_version_it_was_counted_on() -> None:
    counted_on: dict[str, set[str]] = {"fastapi": set(), "pydantic": set(), "redis": set()}
    for requirement in (*(r for env in ENVIRONMENTS for r in env), *REDIS_ENVIRONMENT):
        name, _, version = requirement.partition("==")
        counted_on[name].add(version)
    # And the versions uv.lock holds, which the suite counts on (`make test`); not the installed ones, which
    # `make test-lowest` takes down to pyproject's floors.
    locked = {package["name"]: package["version"] for package in tomllib.loads(LOCK.read_text())["package"]}
    for name in counted_on:
        counted_on[name].add(locked[name])
    assert {name: set(table().measured[name]) for name in counted_on} == counted_on
    assert table().measured["starlette"][-1] == locked["starlette"]


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_rule_has_a_count_and_each_count_names_a_test_that_exists() -> None:
    costs = table().costs
    assert set(costs) == set(RULES)
    for rule, cost in costs.items():
        assert cost.counted, f"{rule}: no count"
        for counted in cost.counted:
            file, _, name = counted.test.partition("::")
            assert name in _tests_in(REPO / file), f"{rule}: {counted.test} does not exist"
