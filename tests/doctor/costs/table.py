"""The cost table as the tests read it: what it says a rule's pattern and fix cost on the versions this
environment has installed."""

from __future__ import annotations

from importlib import metadata

from tenk.doctor._costs import Counted, table
from tenk.doctor._versions import Version, Versions

PACKAGES = ("fastapi", "pydantic", "starlette", "redis")


def installed(**overrides: str) -> Versions:
    """The versions this environment holds (or `overrides`, for counts taken in another one)."""
    found = {name: overrides.get(name) or metadata.version(name) for name in PACKAGES}
    return Versions({name: Version(name, version, "installed", assumed=False) for name, version in found.items()})


def row(rule: str, case: str | None = None, versions: Versions | None = None) -> Counted:
    found = table().costs[rule].counted_on(versions or installed(), case)
    assert found is not None, f"costs.toml has no count for {rule} {case or ''} on these versions"
    return found


def counted(rule: str, case: str | None = None, versions: Versions | None = None) -> tuple[int, int]:
    """What the table says the pattern and its fix cost here."""
    found = row(rule, case, versions)
    return found.pattern, found.fix


def check(rule: str, pattern: int, fix: int, case: str | None = None, versions: Versions | None = None) -> None:
    """That the pattern and its fix cost here what the table says: exactly, or at least (`exact = false`)."""
    found = row(rule, case, versions)
    if found.exact:
        assert (pattern, fix) == (found.pattern, found.fix), f"{rule} {case or ''}: counted {(pattern, fix)}"
    else:
        assert pattern >= found.pattern, f"{rule} {case or ''}: counted {pattern}, under {found.pattern}"
        assert fix == found.fix, f"{rule} {case or ''}: the fix counted {fix}"
