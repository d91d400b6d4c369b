"""report.md and report.html from a results.json document (also used after `tenk lab merge`)."""

from __future__ import annotations

from pathlib import Path

from tenk.lab.documents import Results
from tenk.lab.results.html_report import html_report
from tenk.lab.results.markdown import markdown


def write_reports(results: Results, out: Path) -> None:
    (out / "report.md").write_text(markdown(results))
    (out / "report.html").write_text(html_report(results))
