"""SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.

Paths are relative to `%SRCROOT%` (the directory doctor ran in) where they are under it. A finding
reached through helpers carries its chain as a `codeFlow`: the entry point, each call, then the sink.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tenk import __version__
from tenk.doctor._diagnose import Report
from tenk.doctor._findings import Finding
from tenk.doctor._rules import RULES
from tenk.doctor.formats._paths import shown

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
RULE_IDS = list(RULES)


def _location(path: Path, line: int, col: int, code: str, base: Path) -> dict[str, Any]:
    relative = shown(path, base)
    artifact: dict[str, Any] = {"uri": relative}
    if not Path(relative).is_absolute():
        artifact["uriBaseId"] = "%SRCROOT%"
    else:
        artifact = {"uri": path.as_uri()}
    region: dict[str, Any] = {"startLine": line, "startColumn": col}
    if code:
        region["snippet"] = {"text": code}
    return {"physicalLocation": {"artifactLocation": artifact, "region": region}}


def _result(finding: Finding, base: Path) -> dict[str, Any]:
    rule = RULES[finding.rule]
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": RULE_IDS.index(finding.rule),
        "level": rule.severity,
        "message": {"text": finding.message},
        "locations": [_location(finding.path, finding.line, finding.col, finding.code, base)],
    }
    if finding.chain:
        steps = [
            {
                "location": {
                    **_location(step.path, step.line, step.col, step.code, base),
                    "message": {"text": f"in {step.function}"},
                },
                "nestingLevel": level,
            }
            for level, step in enumerate(finding.chain)
        ]
        sink = _location(finding.path, finding.line, finding.col, finding.code, base)
        steps.append({"location": {**sink, "message": {"text": finding.message}}, "nestingLevel": len(steps)})
        result["codeFlows"] = [{"threadFlows": [{"locations": steps}]}]
    return result


def _rule(rule_id: str) -> dict[str, Any]:
    rule = RULES[rule_id]
    study = f"Measured: {rule.study.figure} ({rule.study.seed})." if rule.study else "Not measured by the studies."
    return {
        "id": rule.id,
        "name": rule.id.replace("-", " ").title().replace(" ", ""),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": f"{rule.why}. {study}"},
        "help": {"text": f"Fix:\n{rule.fix}", "markdown": f"Fix:\n\n```diff\n{rule.fix}\n```"},
        "defaultConfiguration": {"level": rule.severity},
    }


def render(report: Report, base: Path) -> str:
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "tenk doctor",
                        "version": __version__,
                        "rules": [_rule(rule_id) for rule_id in RULE_IDS],
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": base.resolve().as_uri() + "/"}},
                "results": [_result(f, base) for f in report.findings],
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
