"""What each fixture app must yield: its `# expect: RULE` comments, and `expected.txt` for files that
cannot carry one (Dockerfile, compose, Procfile). A fixture's findings must be exactly these, each at its
rule's severity, or at the one the mark names (`# expect: no-timeout:note`). An app-level note counts
at each place it lists."""

from __future__ import annotations

import re
from pathlib import Path

from tenk.doctor import RULES, Finding, Report, diagnose
from tenk.doctor._rules import severity_of

FIXTURES = Path(__file__).parent / "fixtures"
# The lab's naive baselines, by package: the one place to change if they move.
BASELINES = "tenk.lab.targets.baselines"
_MARK = re.compile(r"# expect: ([\w\-:, ]+)")

# (rule, file name, line, severity)
Place = tuple[str, str, int, str]


def _place(mark: str, file: str, line: int) -> Place:
    rule, _, severity = mark.strip().partition(":")
    return rule, file, line, severity or RULES[rule].severity


def fixture_names() -> list[str]:
    return sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())


def expected(name: str) -> set[Place]:
    root = FIXTURES / name
    places: set[Place] = set()
    for path in root.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = _MARK.search(line)
            if match:
                places.update(_place(mark, path.name, number) for mark in match.group(1).split(","))
    listing = root / "expected.txt"
    if listing.exists():
        for line in listing.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                where, mark = line.split()
                file, line_number = where.split(":")
                places.add(_place(mark, file, int(line_number)))
    return places


def found(report: Report) -> set[Place]:
    places: set[Place] = set()
    for f in report.findings:
        severity = severity_of(f)
        places.add((f.rule, f.path.name, f.line, severity))
        places.update((f.rule, step.path.name, step.line, severity) for step in f.related)
    return places


def run(name: str, depth: int | None = None) -> Report:
    return diagnose(str(FIXTURES / name)) if depth is None else diagnose(str(FIXTURES / name), depth)


def rules(report: Report) -> set[str]:
    return {f.rule for f in report.findings}


def callee(finding: Finding) -> str:
    """The resolved name a call finding's message gives: "`io.connect` (psycopg.connect) blocks ..."."""
    match = re.search(r"` \((\S+)\) ", finding.message)
    return match.group(1) if match else ""
