"""SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.

Paths are relative to `%SRCROOT%` (the directory doctor ran in) where they are under it, as URI
references: a file name's `#`, `%`, space or newline is percent-encoded, so that a viewer reads the name
whole. A finding reached through helpers carries its chain as a `codeFlow`: the entry point, each call,
then the sink.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tenk.doctor._diagnose import Report
from tenk.doctor._findings import Finding
from tenk.doctor._project import Unread
from tenk.doctor._rules import RULES, severity_of
from tenk.doctor._version import __version__
from tenk.doctor._versions import Versions
from tenk.doctor.formats._cost import said, version_documents
from tenk.doctor.formats._paths import shown

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
RULE_IDS = list(RULES)


def _location(path: Path, line: int | None, col: int | None, code: str, base: Path) -> dict[str, Any]:
    relative = shown(path, base)
    # An undecodable byte of a file name (a surrogate escape) goes out as that byte, percent-encoded.
    artifact: dict[str, Any] = {"uri": quote(relative, errors="surrogateescape")}
    if not Path(relative).is_absolute():
        artifact["uriBaseId"] = "%SRCROOT%"
    else:
        artifact = {"uri": path.as_uri()}
    if line is None:
        return {"physicalLocation": {"artifactLocation": artifact}}
    region: dict[str, Any] = {"startLine": line}
    if col is not None:
        region["startColumn"] = col
    if code:
        region["snippet"] = {"text": code}
    return {"physicalLocation": {"artifactLocation": artifact, "region": region}}


def _unread(unread: Unread, base: Path) -> dict[str, Any]:
    """A file not analysed, as a notification of the run (not a result: nothing was found in it)."""
    return {
        "level": "warning",
        "message": {"text": f"not analysed: {unread.reason}"},
        "locations": [_location(unread.path, unread.line, None, "", base)],
    }


def _result(finding: Finding, base: Path) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": RULE_IDS.index(finding.rule),
        # A finding's own level where no served request pays for its line (a note), else its rule's.
        "level": severity_of(finding),
        "message": {"text": finding.message},
        "locations": [_location(finding.path, finding.line, finding.col, finding.code, base)],
    }
    if finding.related:
        result["relatedLocations"] = [
            {
                "id": number,
                **_location(step.path, step.line, step.col, step.code, base),
                "message": {"text": step.function},
            }
            for number, step in enumerate(finding.related)
        ]
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


def _rule(rule_id: str, versions: Versions) -> dict[str, Any]:
    rule = RULES[rule_id]
    study = " ".join(f"{label[:1].upper()}{label[1:]}: {text}." for label, text in said(rule_id, versions))
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
                        "rules": [_rule(rule_id, report.versions) for rule_id in RULE_IDS],
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": base.resolve().as_uri() + "/"}},
                "invocations": [
                    {
                        "executionSuccessful": True,
                        "toolExecutionNotifications": [_unread(unread, base) for unread in report.unread],
                    }
                ],
                "results": [_result(f, base) for f in report.findings],
                "properties": {"versions": version_documents(report.versions)},
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
