"""What a finding says its pattern costs, from the table: tenk's count first, the lab's verdicts, and the
study's figure last, marked as the study's claim."""

from __future__ import annotations

from typing import Any

from tenk.doctor._rules import RULES
from tenk.doctor._versions import Version, Versions

COUNTED = "tenk counted"
LAB = "the lab measured"


def study_label(seed: str) -> str:
    """`study 003 claimed`: the study's figure, beside tenk's and marked as the study's, never as tenk's."""
    number = seed.split("_", 1)[0]
    return f"study {number} claimed" if number.isdigit() else "the study claimed"


def said(rule_id: str, versions: Versions, case: str | None = None) -> list[tuple[str, str]]:
    """(label, text) pairs, in the order a reader weighs them."""
    cost = RULES[rule_id].cost
    lines = []
    counted = cost.counted_on(versions, case)
    if counted is not None:
        lines.append((COUNTED, counted.describe(cost.unit)))
    lines.extend((LAB, verdict.describe()) for verdict in cost.lab)
    if cost.study is not None:
        lines.append((study_label(cost.study.seed), cost.study.describe()))
    return lines


def document(rule_id: str, versions: Versions, case: str | None = None) -> dict[str, Any]:
    cost = RULES[rule_id].cost
    counted = cost.counted_on(versions, case)
    return {
        "unit": cost.unit,
        "counted": None
        if counted is None
        else {
            "pattern": counted.pattern,
            "fix": counted.fix,
            "exact": counted.exact,
            "on": counted.on,
            "note": counted.note or None,
            "test": counted.test,
        },
        "lab": [
            {"claim": v.claim, "measured": v.measured, "verdict": v.verdict or None, "entry": v.entry} for v in cost.lab
        ],
    }


def study(rule_id: str) -> dict[str, Any] | None:
    figure = RULES[rule_id].cost.study
    return None if figure is None else {"seed": figure.seed, "figure": figure.figure}


def version_documents(versions: Versions) -> list[dict[str, Any]]:
    return [
        {"package": v.package, "version": v.version, "source": v.source, "assumed": v.assumed} for v in versions.shown()
    ]


def versions_line(versions: Versions) -> str:
    """`versions: fastapi 0.165.0 (uv.lock), ...; assumed: ...`: what the findings rest on."""

    def listed(found: list[Version]) -> str:
        return ", ".join(v.describe().replace("(assumed: ", "(") for v in found)

    shown = versions.shown()
    read = [v for v in shown if not v.assumed]
    assumed = [v for v in shown if v.assumed]
    parts = [f"read {listed(read)}"] if read else []
    if assumed:
        parts.append(f"assumed {listed(assumed)}")
    return "versions: " + "; ".join(parts)
