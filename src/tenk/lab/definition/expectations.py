"""A claim's qualitative expectation, checked as held or not held: `expect = "A OP B"`.

Some studies state no ratio, only a shape ("a sync service melts while an async one parks
thousands"). Such a claim is checked as inequalities between the two rungs' measured quantities:

    expect = ["from_rung.goodput <= 0.1 * to_rung.goodput",
              "to_rung.upstream_in_flight_max >= 20 * from_rung.upstream_in_flight_max"]

Each side is a number, `RUNG.QUANTITY`, or `NUMBER * RUNG.QUANTITY`; RUNG is `from_rung` or
`to_rung`; OP is one of `>=`, `<=`, `>`, `<`. The text is parsed by a regular expression, never
evaluated as Python, so a ladder file cannot run code. A quantity that was not measured (no mock
upstream, no ingest) leaves the expectation *not measured*, never held.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

# What an expectation may name; the report reads each from a rung's results (`expectations.quantity`).
QUANTITIES = {
    "goodput": "successful requests per second",
    "offered": "offered requests per second",
    "capacity": "capacity (req/s within the SLO)",
    "p99_ms": "p99 latency, ms",
    "error_rate": "share of requests that failed",
    "cpu_ms": "target CPU ms per request",
    "upstream_in_flight": "mock upstream: requests in flight at the step's end",
    "upstream_in_flight_max": "mock upstream: most requests in flight during the step",
    "target_in_flight_max": "the target's own in-flight gauge: its maximum during the step",
    "rows_landed_per_s": "ingest: rows written to Postgres per second",
    "lag_p99_ms": "ingest: accept-to-visible lag p99, ms",
    "backlog_growth": "ingest: backlog at the step's end minus at its start",
}
RUNGS = ("from_rung", "to_rung")
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_NUMBER = r"\d+(?:\.\d+)?(?:e[+-]?\d+)?"
_SIDE = rf"(?:(?P<{{p}}k>{_NUMBER})\s*\*\s*)?(?:(?P<{{p}}rung>\w+)\.(?P<{{p}}name>\w+)|(?P<{{p}}n>{_NUMBER}))"
_PATTERN = re.compile(rf"^\s*{_SIDE.format(p='l')}\s*(?P<op>>=|<=|>|<)\s*{_SIDE.format(p='r')}\s*$")

HELD = "held"
NOT_HELD = "not held"
NOT_MEASURED = "not measured"

# (rung, quantity) -> its measured value, or None when not measured.
Lookup = Callable[[str, str], float | None]


class ExpectationError(ValueError):
    pass


@dataclass(frozen=True)
class Side:
    factor: float
    rung: str  # "" for a bare number
    name: str

    def value(self, lookup: Lookup) -> float | None:
        if not self.rung:
            return self.factor
        measured = lookup(self.rung, self.name)
        return None if measured is None else self.factor * measured

    def __str__(self) -> str:
        if not self.rung:
            return f"{self.factor:g}"
        return f"{self.rung}.{self.name}" if self.factor == 1 else f"{self.factor:g} * {self.rung}.{self.name}"


@dataclass(frozen=True)
class Expectation:
    text: str
    left: Side
    op: str
    right: Side

    def check(self, lookup: Lookup) -> tuple[str, str]:
        """(held | not held | not measured, the values compared)."""
        left, right = self.left.value(lookup), self.right.value(lookup)
        if left is None or right is None:
            missing = [str(side) for side, value in ((self.left, left), (self.right, right)) if value is None]
            return NOT_MEASURED, f"{', '.join(missing)} not measured"
        shown = f"{left:,.3g} {self.op} {right:,.3g}"
        return (HELD if _COMPARE[self.op](left, right) else NOT_HELD), shown


def _side(match: re.Match[str], p: str) -> Side:
    if match[f"{p}n"] is not None:
        if match[f"{p}k"] is not None:
            raise ExpectationError("a number times a number: write the product")
        return Side(float(match[f"{p}n"]), "", "")
    rung, name = match[f"{p}rung"], match[f"{p}name"]
    if rung not in RUNGS:
        raise ExpectationError(f"{rung!r} is not a rung: use {' or '.join(RUNGS)}")
    if name not in QUANTITIES:
        raise ExpectationError(f"unknown quantity {name!r}; known: {', '.join(QUANTITIES)}")
    return Side(float(match[f"{p}k"] or 1), rung, name)


def parse(text: str) -> Expectation:
    match = _PATTERN.match(text)
    if match is None:
        raise ExpectationError(
            f"expected 'RUNG.QUANTITY OP [NUMBER *] RUNG.QUANTITY' (OP one of >=, <=, >, <), got {text!r}"
        )
    left, right = _side(match, "l"), _side(match, "r")
    if not left.rung and not right.rung:
        raise ExpectationError("compares two numbers: name a measured quantity")
    return Expectation(text.strip(), left, match["op"], right)


def verdict(results: list[str]) -> str:
    """All held: held. Any not held: not held. Otherwise (something unmeasured): not measured."""
    if NOT_HELD in results:
        return NOT_HELD
    return HELD if results and all(r == HELD for r in results) else NOT_MEASURED
