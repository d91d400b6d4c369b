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
from tenk.doctor._rules import severity_of
from tenk.doctor._version import __version__
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
    failing = [f for f in report.findings if SEVERITY_RANK[severity_of(f)] >= threshold]
    return EXIT_FINDINGS if failing else EXIT_CLEAN


@click.command("doctor")
@click.argument("target")
@click.option(
    "--format", "output_format", type=click.Choice(["text", "json", "sarif"]), default="text", show_default=True
)
@click.option(
    "--fail-on",
    type=click.Choice(["note", "warning", "error"]),
    default="warning",
    show_default=True,
    help="Exit 1 when a finding of this severity or worse is found.",
)
@click.option("--depth", type=click.IntRange(min=0), default=None, help="Calls followed into helpers [default: 4].")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write here, not stdout.")
@click.option(
    "--ladder",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a `tenk lab run` ladder measuring each configuration fix (needs TARGET as module:app).",
)
@click.option("--patched", default=None, help="module:app of a fixed copy: the ladder gets a rung against it.")
@click.option("--mix", default=None, help="The ladder's mix (default: the app's GET routes, written beside it).")
@click.version_option(__version__, prog_name="tenk-doctor")
def command(
    target: str,
    output_format: str,
    fail_on: str,
    depth: int | None,
    output: Path | None,
    ladder: Path | None,
    patched: str | None,
    mix: str | None,
) -> None:
    """Find the studies' anti-patterns in a FastAPI or Starlette app (a path, or module:app), statically.

    `tenk doctor` in the service and `tenk-doctor` alone (the tenk-doctor distribution) are this command."""
    sys.exit(run(target, output_format, fail_on, depth, output, ladder, patched, mix))  # type: ignore[arg-type]
