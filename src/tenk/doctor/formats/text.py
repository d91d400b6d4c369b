"""Text, as ruff prints: `path:line:col: rule message`, the code, then the chain, the cost, the study, the fix."""

from __future__ import annotations

from pathlib import Path

from tenk.doctor._diagnose import Report
from tenk.doctor._findings import Finding
from tenk.doctor._rules import CONFIGURATION_RULES, RULES
from tenk.doctor.formats._paths import shown

# Source lines are the analysed app's: a control character in one must not reach the terminal as one.
_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F) if code != 0x09}


def _printable(text: str) -> str:
    return text.translate(_CONTROL)


def render(report: Report, base: Path) -> str:
    blocks = [_finding(finding, base) for finding in report.findings]
    errors = sum(1 for f in report.findings if RULES[f.rule].severity == "error")
    summary = (
        f"Found {len(report.findings)} finding(s) ({errors} error(s), {len(report.findings) - errors} warning(s))"
        if report.findings
        else "No findings"
    )
    summary += (
        f" in {report.files} file(s), {report.lines} lines, {report.entry_points} entry point(s)"
        f"; {report.suppressed} suppressed; {report.seconds:.2f} s."
    )
    return "\n".join([*blocks, summary]) + "\n"


def _finding(finding: Finding, base: Path) -> str:
    rule = RULES[finding.rule]
    gutter = " " * len(str(finding.line))
    lines = [
        f"{shown(finding.path, base)}:{finding.line}:{finding.col}: {finding.rule} [{rule.severity}] "
        + _printable(finding.message),
        f"{gutter} |",
        f"{finding.line} | {_printable(finding.code)}",
        f"{gutter} |",
    ]
    if len(finding.chain) > 1 or (finding.chain and finding.chain[0].path != finding.path):
        lines.append(f"{gutter} = via:")
        for step in finding.chain:
            lines.append(
                f"{gutter}     {shown(step.path, base)}:{step.line} in {step.function}: {_printable(step.code)}"
            )
    lines.append(f"{gutter} = why: {rule.why}")
    if rule.study is not None:
        lines.append(f"{gutter} = measured: {rule.study.figure} ({rule.study.seed})")
    else:
        how = "--ladder" if finding.rule in CONFIGURATION_RULES else "--ladder with --patched (your fixed copy)"
        lines.append(f"{gutter} = measured: not by the studies; `tenk doctor {how}` measures it")
    lines.append(f"{gutter} = fix:")
    lines.extend(f"{gutter}     {line}" for line in rule.fix.splitlines())
    return "\n".join(lines) + "\n"
