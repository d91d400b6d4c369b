"""JSON: one object per finding, with its rule's reasons, study and fix, and the run's summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tenk.doctor._diagnose import Report
from tenk.doctor._findings import Finding
from tenk.doctor._rules import RULES, severity_of
from tenk.doctor._versions import Versions
from tenk.doctor.formats import _cost as cost
from tenk.doctor.formats._paths import shown

# 2: `cost` (tenk's count, the lab's verdicts), `versions`, `unread`, `related`; the study apart.
VERSION = 2


def finding_document(finding: Finding, versions: Versions, base: Path) -> dict[str, Any]:
    rule = RULES[finding.rule]
    return {
        "rule": finding.rule,
        "severity": severity_of(finding),
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
        "related": [
            {"path": shown(s.path, base), "line": s.line, "column": s.col, "function": s.function, "code": s.code}
            for s in finding.related
        ],
        "why": rule.why,
        "cost": cost.document(finding.rule, versions, finding.case),
        "study": cost.study(finding.rule),
        "fix": finding.fix or rule.fix,
    }


def render(report: Report, base: Path) -> str:
    document = {
        "version": VERSION,
        "target": report.target,
        "findings": [finding_document(f, report.versions, base) for f in report.findings],
        "unread": [
            {"path": shown(unread.path, base), "line": unread.line, "reason": unread.reason} for unread in report.unread
        ],
        "versions": cost.version_documents(report.versions),
        "summary": {
            # Findings cost something at a line (errors and warnings); notes are advice, counted apart.
            "findings": sum(1 for f in report.findings if severity_of(f) != "note"),
            "errors": sum(1 for f in report.findings if severity_of(f) == "error"),
            "notes": sum(1 for f in report.findings if severity_of(f) == "note"),
            "suppressed": report.suppressed,
            "files": report.files,
            "unread": len(report.unread),
            "lines": report.lines,
            "entry_points": report.entry_points,
            "seconds": round(report.seconds, 3),
        },
    }
    return json.dumps(document, indent=2) + "\n"
