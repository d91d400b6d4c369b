"""JSON: one object per finding, with its rule's reasons, study and fix, and the run's summary."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tenk.doctor._diagnose import Report
from tenk.doctor._findings import Finding
from tenk.doctor._rules import RULES
from tenk.doctor.formats._paths import shown

VERSION = 1


def finding_document(finding: Finding, base: Path) -> dict[str, Any]:
    rule = RULES[finding.rule]
    return {
        "rule": finding.rule,
        "severity": rule.severity,
        "title": rule.title,
        "path": shown(finding.path, base),
        "line": finding.line,
        "column": finding.col,
        "code": finding.code,
        "message": finding.message,
        "chain": [
            {"path": shown(s.path, base), "line": s.line, "column": s.col, "function": s.function, "code": s.code}
            for s in finding.chain
        ],
        "why": rule.why,
        "study": asdict(rule.study) if rule.study is not None else None,
        "fix": rule.fix,
    }


def render(report: Report, base: Path) -> str:
    document = {
        "version": VERSION,
        "target": report.target,
        "findings": [finding_document(f, base) for f in report.findings],
        "summary": {
            "findings": len(report.findings),
            "errors": sum(1 for f in report.findings if RULES[f.rule].severity == "error"),
            "suppressed": report.suppressed,
            "files": report.files,
            "lines": report.lines,
            "entry_points": report.entry_points,
            "seconds": round(report.seconds, 3),
        },
    }
    return json.dumps(document, indent=2) + "\n"
