"""The hand labels (labels/APP.toml), the precision judgments (judgments/APP.toml), and how a tool's
finding is matched to them.

A label is a place where a defect is (verdict "TP") or where a tempting pattern is not one (verdict
"negative"): a file, a line span and the doctor rule it belongs to, with the chain from an entry point
that a reader can check hop by hop. A judgment is a reviewer's verdict on one finding doctor made
(real, advice or false), keyed by rule, file, line and code so that it holds across doctor versions as
long as the pinned app does not change.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from benchmarks.doctor_eval.apps import HERE, LABELS

JUDGMENTS = HERE / "judgments"
VERDICTS = ("real", "advice", "false")


@dataclass(frozen=True)
class Label:
    id: str
    verdict: str
    category: str
    file: str
    line: int
    end_line: int
    call: str
    chain: tuple[str, ...]
    why: str

    def covers(self, path: str, line: int) -> bool:
        return path == self.file and self.line <= line <= self.end_line


@dataclass(frozen=True)
class Finding:
    """One finding of any tool, its path relative to the app's unpacked root."""

    tool: str
    rule: str
    path: str
    line: int
    code: str
    message: str
    chain: tuple[str, ...] = ()
    # doctor's own level for it: a `note` is advice about the app, outside precision and recall.
    severity: str = ""

    @property
    def is_note(self) -> bool:
        return self.severity == "note"

    @property
    def key(self) -> str:
        return f"{self.rule} {self.path}:{self.line} {self.code.strip()[:80]}"

    def document(self) -> dict[str, object]:
        return {
            "tool": self.tool,
            "rule": self.rule,
            "path": self.path,
            "line": self.line,
            "code": self.code,
            "message": self.message,
            "chain": list(self.chain),
            "severity": self.severity,
        }

    @classmethod
    def from_document(cls, document: dict[str, object]) -> Finding:
        chain = document.get("chain") or []
        assert isinstance(chain, list)
        return cls(
            tool=str(document["tool"]),
            rule=str(document["rule"]),
            path=str(document["path"]),
            line=int(str(document["line"])),
            code=str(document["code"]),
            message=str(document["message"]),
            chain=tuple(str(step) for step in chain),
            severity=str(document.get("severity", "")),
        )


@dataclass(frozen=True)
class Judgment:
    verdict: str
    reason: str


def load_labels(app: str) -> list[Label]:
    path = LABELS / f"{app}.toml"
    if not path.exists():
        return []
    with path.open("rb") as f:
        document = tomllib.load(f)
    labels = []
    for entry in document.get("label", []):
        if entry["verdict"] not in ("TP", "negative"):
            raise SystemExit(f"{path}: {entry['id']}: verdict must be TP or negative")
        labels.append(
            Label(
                id=entry["id"],
                verdict=entry["verdict"],
                category=entry["category"],
                file=entry["file"],
                line=int(entry["line"]),
                end_line=int(entry.get("end_line", entry["line"])),
                call=entry["call"],
                chain=tuple(entry["chain"]),
                why=entry["why"],
            )
        )
    ids = [label.id for label in labels]
    if len(ids) != len(set(ids)):
        raise SystemExit(f"{path}: label ids repeat")
    return labels


def load_judgments(app: str) -> dict[str, Judgment]:
    path = JUDGMENTS / f"{app}.toml"
    if not path.exists():
        return {}
    with path.open("rb") as f:
        document = tomllib.load(f)
    judgments = {}
    for entry in document.get("finding", []):
        if entry.get("verdict") not in VERDICTS:
            continue
        judgments[entry["key"]] = Judgment(entry["verdict"], entry.get("reason", ""))
    return judgments


def doctor_match(finding: Finding, labels: list[Label]) -> Label | None:
    """The label at the finding's place and of its rule: doctor reports the blocking call itself."""
    for label in labels:
        if label.category == finding.rule and label.covers(finding.path, finding.line):
            return label
    return None


def blocking_match(finding: Finding, labels: list[Label]) -> Label | None:
    """For ruff and ty-async, whose rules are all about blocking calls: the `blocking-call` label at
    the finding's place (ty-async's transitive findings are kept at the sink they name)."""
    for label in labels:
        if label.category == "blocking-call" and label.covers(finding.path, finding.line):
            return label
    return None


def to_label_document(app: str, findings: list[Finding]) -> str:
    """The drawn findings nobody has judged yet, as entries to fill in and append to judgments/APP.toml."""
    lines = [
        f"# Drawn from doctor's findings on {app} and not yet judged. Set each verdict to real, advice or",
        f"# false, give the reason, and append the entries to benchmarks/doctor_eval/judgments/{app}.toml.",
        "",
    ]
    for finding in findings:
        lines += [
            "[[finding]]",
            f"key = {json.dumps(finding.key)}",
            f"message = {json.dumps(finding.message)}",
            f"chain = {json.dumps(list(finding.chain))}",
            'verdict = ""',
            'reason = ""',
            "",
        ]
    return "\n".join(lines)


def read_jsonl(path: Path) -> list[Finding]:
    return [Finding.from_document(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, findings: list[Finding]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(f.document()) + "\n" for f in findings))
