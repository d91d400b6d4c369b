"""What each fixture app must yield: its `# expect: RULE` comments, and `expected.txt` for files that
cannot carry one (Dockerfile, compose, Procfile). A fixture's findings must be exactly these."""

from __future__ import annotations

import re
from pathlib import Path

from tenk.doctor import Finding, Report, diagnose

FIXTURES = Path(__file__).parent / "fixtures"
# The lab's naive baselines, by package: the one place to change if they move.
BASELINES = "tenk.lab.targets.baselines"
_MARK = re.compile(r"# expect: ([\w\-, ]+)")

Place = tuple[str, str, int]


def fixture_names() -> list[str]:
    return sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())


def expected(name: str) -> set[Place]:
    root = FIXTURES / name
    places: set[Place] = set()
    for path in root.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = _MARK.search(line)
            if match:
                places.update((rule.strip(), path.name, number) for rule in match.group(1).split(","))
    listing = root / "expected.txt"
    if listing.exists():
        for line in listing.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                where, rule = line.split()
                file, line_number = where.split(":")
                places.add((rule, file, int(line_number)))
    return places


def found(report: Report) -> set[Place]:
    return {(f.rule, f.path.name, f.line) for f in report.findings}


def run(name: str, depth: int | None = None) -> Report:
    return diagnose(str(FIXTURES / name)) if depth is None else diagnose(str(FIXTURES / name), depth)


def rules(report: Report) -> set[str]:
    return {f.rule for f in report.findings}


def callee(finding: Finding) -> str:
    """The resolved name a call finding's message gives: "`io.connect` (psycopg.connect) blocks ..."."""
    match = re.search(r"` \((\S+)\) ", finding.message)
    return match.group(1) if match else ""
