"""Inline suppression, as ruff's `# noqa`: `# tenk: ignore[rule, other-rule]: the reason`.

A suppression applies on the finding's own line or on any line of its call chain (so one comment on a
helper's call covers every route that reaches it through that call). It must give a reason after a
colon: one without a reason does not apply, and is itself a finding (suppression-reason).
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tenk.doctor._findings import Finding

PATTERN = re.compile(r"#\s*tenk:\s*ignore\[([^\]]*)\](?:\s*:\s*(.*))?")


@dataclass(frozen=True)
class Suppression:
    rules: frozenset[str]
    reason: str


def parse(line: str) -> Suppression | None:
    match = PATTERN.search(line)
    if match is None:
        return None
    rules = frozenset(rule.strip() for rule in match.group(1).split(",") if rule.strip())
    return Suppression(rules, (match.group(2) or "").strip())


@lru_cache(maxsize=4096)
def _lines(path: Path) -> tuple[str, ...]:
    """The file's lines, where only comments can hold a suppression: in Python source, the text of
    strings is blanked out (a docstring that shows the syntax is not a suppression)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    lines = text.splitlines()
    if path.suffix != ".py" or "tenk:" not in text:
        return tuple(lines)
    comments = [""] * len(lines)
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and token.start[0] <= len(lines):
                comments[token.start[0] - 1] = token.string
    except (tokenize.TokenError, SyntaxError):
        return tuple(lines)
    return tuple(comments)


def _suppression_at(path: Path, line: int) -> Suppression | None:
    lines = _lines(path)
    return parse(lines[line - 1]) if 0 < line <= len(lines) else None


def is_suppressed(finding: Finding) -> bool:
    places = [(finding.path, finding.line), *((step.path, step.line) for step in finding.chain)]
    for path, line in places:
        found = _suppression_at(path, line)
        if found is not None and found.reason and finding.rule in found.rules:
            return True
    return False


def missing_reasons(path: Path) -> list[Finding]:
    found = []
    for number, text in enumerate(_lines(path), 1):
        suppression = parse(text)
        if suppression is not None and not suppression.reason:
            column = 1
            message = "`# tenk: ignore[...]` needs a reason after a colon; without one it does not apply"
            found.append(Finding("suppression-reason", path, number, column, _code(path, number), message))
    return found


def _code(path: Path, line: int) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return ""


def forget() -> None:
    """Read files afresh (the cache is per run: a long-lived process may see them change)."""
    _lines.cache_clear()
