"""Text, as ruff prints: `path:line:col: rule message`, the code, then the chain, the cost, the study, the fix."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tenk.doctor._diagnose import Report
from tenk.doctor._findings import Finding
from tenk.doctor._project import Unread
from tenk.doctor._rules import CONFIGURATION_RULES, RULES, severity_of
from tenk.doctor._versions import Versions
from tenk.doctor.formats._cost import said, versions_line
from tenk.doctor.formats._escape import printable
from tenk.doctor.formats._paths import shown

# Places an app-level note shows in text, as examples; JSON and SARIF list them all.
RELATED_SHOWN = 3


def render(report: Report, base: Path) -> str:
    costs = [f for f in report.findings if severity_of(f) != "note"]
    notes = [f for f in report.findings if severity_of(f) == "note"]
    blocks = [_finding(finding, report.versions, base) for finding in costs]
    if notes:
        # Advice about the app: under its own heading, and not counted among the findings.
        blocks.append("Notes (advice about the app, not a cost at a line):\n")
        blocks.extend(_finding(finding, report.versions, base) for finding in notes)
    blocks.extend(_unread(unread, base) for unread in report.unread)
    blocks.append(versions_line(report.versions))
    counts = Counter(severity_of(f) for f in costs)
    summary = (
        f"Found {len(costs)} finding(s) ({counts['error']} error(s), {counts['warning']} warning(s))"
        if costs
        else "No findings"
    )
    if notes:
        summary += f" and {len(notes)} note(s)"
    unread = f" ({len(report.unread)} not analysed, listed above)" if report.unread else ""
    summary += (
        f" in {report.files} file(s){unread}, {report.lines} lines, {report.entry_points} entry point(s)"
        f"; {report.suppressed} suppressed; {report.seconds:.2f} s."
    )
    return "\n".join([*blocks, summary]) + "\n"


def _unread(unread: Unread, base: Path) -> str:
    where = f"{shown(unread.path, base)}:{unread.line}" if unread.line else shown(unread.path, base)
    return f"{where}: not analysed: {printable(unread.reason)}"


def _finding(finding: Finding, versions: Versions, base: Path) -> str:
    rule = RULES[finding.rule]
    gutter = " " * len(str(finding.line))
    lines = [
        # File names, source lines and the messages quoting them are the analysed app's: none may reach
        # the terminal as a control character.
        f"{printable(shown(finding.path, base))}:{finding.line}:{finding.col}: {finding.rule} [{severity_of(finding)}] "
        + printable(finding.message),
        f"{gutter} |",
        f"{finding.line} | {printable(finding.code)}",
        f"{gutter} |",
    ]
    if len(finding.chain) > 1 or (finding.chain and finding.chain[0].path != finding.path):
        lines.append(f"{gutter} = via:")
        for step in finding.chain:
            lines.append(
                f"{gutter}     {printable(shown(step.path, base))}:{step.line} in {printable(step.function)}: "
                + printable(step.code)
            )
    if finding.related:
        lines.append(f"{gutter} = also at:")
        for step in finding.related[:RELATED_SHOWN]:
            lines.append(
                f"{gutter}     {printable(shown(step.path, base))}:{step.line} in {printable(step.function)}: "
                + printable(step.code)
            )
        if len(finding.related) > RELATED_SHOWN:
            lines.append(f"{gutter}     and {len(finding.related) - RELATED_SHOWN} more (`--format json` lists them)")
    lines.append(f"{gutter} = why: {rule.why}")
    lines.extend(f"{gutter} = {label}: {text}" for label, text in said(finding.rule, versions, finding.case))
    how = "" if finding.rule in CONFIGURATION_RULES else " with `--patched` (your fixed copy)"
    lines.append(f"{gutter} = on your machine: `tenk doctor --ladder`{how} measures it")
    lines.append(f"{gutter} = fix:")
    lines.extend(f"{gutter}     {printable(line)}" for line in (finding.fix or rule.fix).splitlines())
    return "\n".join(lines) + "\n"
