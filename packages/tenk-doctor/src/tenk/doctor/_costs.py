"""What each rule's pattern costs, as tenk measured it: read from `costs.toml`, the one table findings quote.

Three kinds of figure, each with where it comes from:

- counted: what a test under `tests/doctor/costs/` counts on the real libraries, for the pattern and its
  fix (validator calls, hand-offs to the thread pool, connections made), on the versions it names. The
  tests read this table and fail when what they count is not what it says. A count may hold only on
  some versions (`when`): where the app's versions give no cost, the rule does not fire.
- the lab's: verdicts of `tenk lab run` on the pattern, with the results entry each comes from.
- the study's: the figure the study published, quoted beside tenk's and marked as the study's.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from tenk.doctor._versions import Condition, Versions


@dataclass(frozen=True)
class Counted:
    """One count of the pattern against its fix, on the versions `when` allows (all, when None), for one
    `case` of the rule (the library a no-timeout finding is about) or all of them (None)."""

    case: str | None
    when: Condition | None
    # The versions it was counted on, as a reader needs them ("fastapi 0.115.0 and 0.125.0, pydantic 1.10.26").
    on: str
    pattern: int
    fix: int
    # True: the pattern's count is exactly `pattern`; False: at least `pattern` (a count that depends on
    # how the bytes arrive, such as calls into the event loop's Python code).
    exact: bool
    # Whether the rule fires where this count holds: the pattern costs more than its fix, unless the
    # table says otherwise (a ceiling that exists, though higher than the fix's).
    fires: bool
    # What the count means, where the figures alone would mislead.
    note: str
    test: str

    def describe(self, unit: str) -> str:
        pattern = str(self.pattern) if self.exact else f"at least {self.pattern}"
        note = f"; {self.note}" if self.note else ""
        return f"{unit}: {pattern} with the pattern, {self.fix} with the fix ({self.on}{note}; {self.test})"


@dataclass(frozen=True)
class Verdict:
    """What the lab measured of the pattern, and the results entry that holds it."""

    claim: str
    measured: str
    verdict: str
    entry: str

    def describe(self) -> str:
        verdict = f", {self.verdict}" if self.verdict else ""
        return f"{self.claim}: {self.measured}{verdict} ({self.entry})"


@dataclass(frozen=True)
class StudyFigure:
    """The study's own figure: never tenk's measurement."""

    seed: str
    figure: str
    # The ratio the study claims, where the ladder turns it into a `[[claim]]` for the lab to check.
    ratio: float | None

    def describe(self) -> str:
        return f"{self.figure} ({self.seed})"


@dataclass(frozen=True)
class Cost:
    unit: str
    counted: tuple[Counted, ...]
    lab: tuple[Verdict, ...]
    study: StudyFigure | None

    def counted_on(self, versions: Versions | None, case: str | None = None) -> Counted | None:
        """The count that holds for `case` on `versions`: the first whose case and `when` match, or that
        has neither."""
        for row in self.counted:
            if row.case is not None and row.case != case:
                continue
            if row.when is None or (versions is not None and versions.satisfy(row.when)):
                return row
        return None

    def exists_on(self, versions: Versions | None, case: str | None = None) -> bool:
        """Whether the pattern costs what the rule says on these versions (True where none was counted)."""
        row = self.counted_on(versions, case)
        return row is None or row.fires


@dataclass(frozen=True)
class Table:
    costs: dict[str, Cost]
    # The versions the counts were taken on, per package, oldest first: what an assumption picks from.
    measured: dict[str, list[str]]
    # What one package's versions need of another's (FastAPI before 0.100 needs pydantic 1).
    requires: list[tuple[Condition, Condition]]


def _condition(text: Any) -> Condition | None:
    return Condition.parse(text) if isinstance(text, str) else None


def _cost(data: dict[str, Any]) -> Cost:
    counted = tuple(
        Counted(
            row.get("case"),
            _condition(row.get("when")),
            row["on"],
            int(row["pattern"]),
            int(row["fix"]),
            bool(row.get("exact", True)),
            bool(row.get("fires", int(row["pattern"]) > int(row["fix"]))),
            row.get("note", ""),
            row["test"],
        )
        for row in data.get("counted", [])
    )
    lab = tuple(
        Verdict(row["claim"], row["measured"], row.get("verdict", ""), row["entry"]) for row in data.get("lab", [])
    )
    study = data.get("study")
    figure = StudyFigure(study["seed"], study["figure"], study.get("ratio")) if study else None
    return Cost(data["unit"], counted, lab, figure)


def parse(text: str) -> Table:
    data = tomllib.loads(text)
    requires = []
    for row in data.get("requires", []):
        when, needs = _condition(row["when"]), _condition(row["needs"])
        if when is None or needs is None:
            raise ValueError(f"costs.toml: a [[requires]] needs `when` and `needs`: {row}")
        requires.append((when, needs))
    return Table({rule: _cost(entry) for rule, entry in data["rules"].items()}, data["measured"], requires)


@cache
def table() -> Table:
    return parse(resources.files("tenk.doctor").joinpath("costs.toml").read_text(encoding="utf-8"))
