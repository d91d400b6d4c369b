"""A report a person reads at a glance: the rung table holds what decides a rung (what changed, the figure
with its interval, what limited it, CPU per request, p99), every other figure is in that rung's details,
and at 1,280 pixels wide nothing scrolls sideways, details open or not: real reports, in headless Chromium."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tenk.lab.documents import Results
from tenk.lab.results.html_report import html_report
from tenk.lab.results.markdown import markdown
from tenk.lab.results.tables import AT_A_GLANCE, rung_rows, rung_table

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
# Real runs with the widest rung tables: the headline (a budget, throttling, the projection at it, ingest),
# and the async ladder's seven rungs (the parked upstream calls).
REAL = (RESULTS / "2026-11-29" / "headline-1", RESULTS / "2026-11-27" / "presets" / "async-ladder-1")
WIDTH = 1280

# Appended to the page: once the charts are drawn, with every rung's details open, how wide the page is
# and which elements reach past the window, written into the DOM for --dump-dom to carry out.
MEASURE = """<script>window.tenkDrawn.then(() => {
  document.querySelectorAll('details').forEach((d) => { d.open = true; });
  const root = document.documentElement;
  const wide = Array.from(document.querySelectorAll('body *'))
    .filter((e) => e.getBoundingClientRect().right > root.clientWidth + 0.5)
    .slice(0, 8)
    .map((e) => `${e.tagName}.${e.getAttribute('class') || ''} to ${Math.round(e.getBoundingClientRect().right)}`);
  const pre = document.createElement('pre');
  pre.id = 'layout';
  pre.textContent = JSON.stringify({scrollWidth: root.scrollWidth, innerWidth: window.innerWidth, wide});
  document.body.appendChild(pre);
});</script>"""


def _results(folder: Path) -> Results:
    return Results.model_validate_json((folder / "results.json").read_text())


def _layout(page: Path, profile: Path) -> dict[str, object]:
    dom = subprocess.run(
        [
            str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
            f"--user-data-dir={profile}", f"--window-size={WIDTH},900", "--hide-scrollbars",
            "--virtual-time-budget=15000", "--dump-dom", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    ).stdout  # fmt: skip
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom, re.S)
    assert found is not None, f"the page never measured itself:\n{dom[-2000:]}"
    layout: dict[str, object] = json.loads(html.unescape(found.group(1)))
    return layout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make system-deps)")
@pytest.mark.parametrize("folder", REAL, ids=lambda folder: folder.name)
def test_a_real_report_has_no_sideways_scroll_at_1280_pixels(folder: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(html_report(_results(folder)).replace("</body>", MEASURE + "</body>"))
    layout = _layout(page, tmp_path / "profile")
    assert layout["innerWidth"] == WIDTH, layout
    assert layout["scrollWidth"] <= WIDTH, layout  # type: ignore[operator]


@pytest.mark.parametrize("folder", REAL, ids=lambda folder: folder.name)
def test_the_rung_table_shows_what_decides_and_every_other_figure_is_in_the_rungs_details(folder: Path) -> None:
    results = _results(folder)
    table = rung_table(results)
    assert [list(row) for row in table.rows] == [list(AT_A_GLANCE)] * len(results.rungs)
    for rung, row, (title, details) in zip(results.rungs, rung_rows(results), table.details, strict=True):
        assert rung.label in title
        shown = {name: value for name, value in row.items() if value not in ("", "-")}
        # Nothing is lost: each figure is in the rung's row, or in its details as the full table had it.
        assert {name: value for name, value in shown.items() if name not in AT_A_GLANCE} == details, rung.label
    text = markdown(results)
    assert text.count("<details>") == len(results.rungs)
    header = next(line for line in text.splitlines() if line.startswith("| #"))
    assert header == "| " + " | ".join(AT_A_GLANCE) + " |"
    page = html_report(results)
    assert page.count("<details>") == len(results.rungs)
