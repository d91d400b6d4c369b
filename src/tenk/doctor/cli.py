"""`tenk doctor`'s command body: run, print in the chosen format, write the ladder, exit for CI.

Exit codes: 0 when no finding reaches `--fail-on`; 1 when one does; 2 when the target cannot be read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tenk.doctor._diagnose import diagnose
from tenk.doctor._findings import SEVERITY_RANK, Severity
from tenk.doctor._follow import DEFAULT_DEPTH
from tenk.doctor._project import TargetError
from tenk.doctor._rules import RULES
from tenk.doctor.formats import FORMATS
from tenk.doctor.ladder import LadderError, write_ladder

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_UNREADABLE = 2


def run(
    target: str,
    output_format: str,
    fail_on: Severity,
    depth: int | None,
    output: Path | None,
    ladder: Path | None,
    patched: str | None,
    mix: str | None,
) -> int:
    try:
        report = diagnose(target, DEFAULT_DEPTH if depth is None else depth)
    except TargetError as exc:
        click.echo(f"tenk doctor: {exc}", err=True)
        return EXIT_UNREADABLE
    text = FORMATS[output_format](report, Path.cwd())
    if output is not None:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if ladder is not None:
        try:
            written = write_ladder(report, ladder, patched, mix)
        except LadderError as exc:
            click.echo(f"tenk doctor: {exc}", err=True)
            return EXIT_UNREADABLE
        click.echo(f"ladder written to {written}: run it with `tenk lab run {written}`", err=True)
    threshold = SEVERITY_RANK[fail_on]
    failing = [f for f in report.findings if SEVERITY_RANK[RULES[f.rule].severity] >= threshold]
    return EXIT_FINDINGS if failing else EXIT_CLEAN
