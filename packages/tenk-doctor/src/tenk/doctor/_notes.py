"""App-level notes: advice is reported once a rule, with a count and its places, never once a call site.

A note says a pattern is in the app where no served request pays for it at that line (the server's
configuration, a pool at its library's default, a call no route reaches). Each rule's notes become one,
at the first place in the report's order, with the count in its message and every other place in
`related`; a rule that writes its own app-wide note (`sync-route`) gives one already.
"""

from __future__ import annotations

from dataclasses import replace

from tenk.doctor._findings import Finding, Step
from tenk.doctor._rules import severity_of


def gather(findings: list[Finding]) -> list[Finding]:
    """The warnings and errors as they are, and one note a rule in place of that rule's notes."""
    kept: list[Finding] = []
    notes: dict[str, list[Finding]] = {}
    for found in sorted(findings, key=Finding.sort_key):
        if severity_of(found) == "note":
            notes.setdefault(found.rule, []).append(found)
        else:
            kept.append(found)
    for same in notes.values():
        kept.append(same[0] if len(same) == 1 else _one(same))
    return sorted(kept, key=Finding.sort_key)


def _one(same: list[Finding]) -> Finding:
    first = same[0]
    related = [*first.related]
    for other in same[1:]:
        related.append(Step(other.path, other.line, other.col, _function(other), other.code))
        related.extend(other.related)
    message = f"{len(related) + 1} places in the app, reported once (the first here, the others listed): "
    message += first.message
    return replace(first, message=message, related=tuple(related), severity="note")


def _function(found: Finding) -> str:
    """Where a place sits, for its line in the list: the function its chain ends in, else the file."""
    return found.chain[-1].function if found.chain else found.path.name
