"""What doctor reports: a finding at a place in the source, and the chain of calls that reaches it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Severity = Literal["error", "warning", "note"]
SEVERITY_RANK: dict[Severity, int] = {"note": 0, "warning": 1, "error": 2}


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
    # Which of the rule's patterns it is, where its cost differs by one (`costs.toml`'s `case`).
    case: str | None = None
    # The flagged call rewritten, where the rule can write it; else the rule's own example.
    fix: str | None = None
    # For a note about the app as a whole: the other places it counts, beside this first one.
    related: tuple[Step, ...] = field(default=())
    # Where the rule's default does not hold: a `note` for a pattern no served request pays for (a line no
    # route, dependency or middleware reaches, or one that runs at start-up). None: the rule's severity.
    severity: Severity | None = None

    def sort_key(self) -> tuple[str, int, int, str]:
        return (str(self.path), self.line, self.col, self.rule)
