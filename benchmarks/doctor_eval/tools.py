"""Run doctor, ruff's ASYNC rules and ty-async's transitive mode on one app, as Finding records.

Every tool runs from the app's unpacked root with a relative target, so the paths they print are the
paths the labels use.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.doctor_eval.apps import App
from benchmarks.doctor_eval.labels import Finding

TY_ASYNC = "ty-async==0.4.0"
# What a user would add to ty-async's stdlib preset for these apps: the third-party blocking clients
# doctor models too, and `open`, which the preset leaves out and doctor and the labels count.
TY_ASYNC_PATTERNS = ",".join(
    [
        "requests.*->httpx.AsyncClient()",
        "httpx.get->httpx.AsyncClient()",
        "httpx.post->httpx.AsyncClient()",
        "httpx.put->httpx.AsyncClient()",
        "httpx.patch->httpx.AsyncClient()",
        "httpx.delete->httpx.AsyncClient()",
        "httpx.head->httpx.AsyncClient()",
        "httpx.request->httpx.AsyncClient()",
        "httpx.stream->httpx.AsyncClient()",
        "psycopg.connect->psycopg.AsyncConnection.connect()",
        "psycopg2.connect->asyncpg.connect()",
        "pymysql.connect->aiomysql.connect()",
        "redis.Redis->redis.asyncio.Redis()",
        "boto3.client->aioboto3()",
        "boto3.resource->aioboto3()",
        "open->anyio.open_file()",
    ]
)
_FLAKE8_LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>\S+) (?P<message>.*)$")
# ASYNC200T names the blocking call it reached at the end: "... via helper (pkg/mod.py:3:5)".
_SINK = re.compile(r"\((?P<path>[^():]+):(?P<line>\d+):\d+\)$")


@dataclass(frozen=True)
class DoctorRun:
    mode: str
    target: str
    exit_code: int
    seconds: float | None
    files: int | None
    lines: int | None
    entry_points: int | None
    error: str
    findings: list[Finding]


def _tenk() -> str:
    found = Path(sys.executable).with_name("tenk")
    return str(found) if found.exists() else "tenk"


def run_doctor(app: App, mode: str) -> DoctorRun:
    target = app.target if mode == "directory" else app.entry
    process = subprocess.run(
        [_tenk(), "doctor", target, "--format", "json"], cwd=app.root, capture_output=True, text=True, check=False
    )
    if process.returncode not in (0, 1):
        return DoctorRun(mode, target, process.returncode, None, None, None, None, process.stderr.strip(), [])
    document = json.loads(process.stdout)
    summary = document["summary"]
    findings = [
        Finding(
            tool="doctor",
            rule=f["rule"],
            path=f["path"],
            line=f["line"],
            code=f["code"],
            message=f["message"],
            chain=tuple(f"{s['path']}:{s['line']} {s['function']}: {s['code']}" for s in f["chain"]),
            severity=f.get("severity", ""),
        )
        for f in document["findings"]
    ]
    return DoctorRun(
        mode,
        target,
        process.returncode,
        summary.get("seconds"),
        summary.get("files"),
        summary.get("lines"),
        summary.get("entry_points"),
        process.stderr.strip(),
        findings,
    )


def _ruff() -> str:
    found = Path(sys.executable).with_name("ruff")
    return str(found) if found.exists() else "ruff"


def run_ruff(app: App) -> list[Finding]:
    process = subprocess.run(
        [_ruff(), "check", "--isolated", "--select", "ASYNC", "--output-format", "json", "--exit-zero", app.target],
        cwd=app.root,
        capture_output=True,
        text=True,
        check=True,
    )
    findings = []
    for entry in json.loads(process.stdout):
        path = Path(entry["filename"]).resolve().relative_to(app.root.resolve())
        findings.append(
            Finding(
                tool="ruff",
                rule=entry["code"],
                path=str(path),
                line=entry["location"]["row"],
                code="",
                message=entry["message"],
            )
        )
    return findings


def ruff_version() -> str:
    return subprocess.run([_ruff(), "--version"], capture_output=True, text=True, check=True).stdout.strip()


def _uv() -> str:
    found = Path(sys.executable).with_name("uv")
    return str(found) if found.exists() else (shutil.which("uv") or "uv")


def run_ty_async(app: App) -> list[Finding]:
    """ty-async from PyPI through `uv tool run`, stdlib preset plus TY_ASYNC_PATTERNS, transitive."""
    process = subprocess.run(
        [_uv(), "tool", "run", "--quiet", "--from", TY_ASYNC, "ty-async", app.target, "--async200-stdlib",
         "--async200-transitive", f"--async200-blocking-calls={TY_ASYNC_PATTERNS}"],
        cwd=app.root,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if process.returncode not in (0, 1):
        raise RuntimeError(f"ty-async on {app.name} exited {process.returncode}: {process.stderr.strip()[-500:]}")
    return parse_ty_async(process.stdout)


def parse_ty_async(output: str) -> list[Finding]:
    """ty-async's flake8-style lines as findings; a transitive one (ASYNC200T) is kept at the sink it
    names, where the labels are, and the call site in the async function that leads there is its chain."""
    findings = []
    for line in output.splitlines():
        match = _FLAKE8_LINE.match(line)
        if not match:
            continue
        sink = _SINK.search(match["message"])
        path, number = (sink["path"], sink["line"]) if sink else (match["path"], match["line"])
        site = f"{Path(match['path'])}:{match['line']} (the call in the async function)"
        findings.append(
            Finding(
                tool="ty-async",
                rule=match["code"],
                path=str(Path(path)),
                line=int(number),
                code="",
                message=match["message"],
                chain=(site,) if sink else (),
            )
        )
    return findings
