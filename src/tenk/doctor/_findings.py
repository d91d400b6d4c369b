"""What doctor reports: a finding at a place in the source, and the chain of calls that reaches it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Severity = Literal["error", "warning"]
SEVERITY_RANK: dict[Severity, int] = {"warning": 1, "error": 2}


@dataclass(frozen=True)
class Step:
    """One call on the way from an entry point (a route, a dependency, a middleware) to the finding."""

    path: Path
    line: int
    col: int
    function: str
    code: str


@dataclass(frozen=True)
class Finding:
    rule: str
    path: Path
    line: int
    col: int
    code: str
    message: str
    # Empty for a finding written directly in its entry point; else entry point first, the sink last.
    chain: tuple[Step, ...] = field(default=())

    def sort_key(self) -> tuple[str, int, int, str]:
        return (str(self.path), self.line, self.col, self.rule)
