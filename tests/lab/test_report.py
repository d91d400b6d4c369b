"""report.html is self-contained and its plotly charts draw in a real headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tenk.lab.report import html_report, markdown
from tests.lab.test_compare import figures, result

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def sample_results() -> dict[str, Any]:
    results = result([("sync", figures(1000, 0, 100.0, 300.0)), ("async", figures(4000, 0, 400.0, 30.0))])
    rungs = results["rungs"]
    rungs[1]["multi_variable"] = True
    steps = [
        {"rate": rate, "passed": p99 <= 100, "reasons": [], "figures": figures(rate * 5, 0, rate, p99), "server": {}}
        for rate, p99 in ((100, 10.0), (200, 12.0), (400, 30.0), (800, 900.0), (600, 150.0))
    ]
    rungs[1]["mode"] = "capacity"
    rungs[1]["value"] = 400
    rungs[1]["capacity"] = {"capacity": 400, "converged": True, "limited_by": ["p99"], "generator_limited": False,
                            "plan": "capacity search: at most 8 steps", "elapsed_s": 30, "steps": steps}  # fmt: skip
    results["claims"] = [
        {"text": "41x from sync to async", "source": "001.txt", "from_rung": "sync", "to_rung": "async",
         "metric": "rps", "claimed_ratio": 41.4}
    ]  # fmt: skip
    return results


def test_markdown_sets_each_claim_beside_the_measured_ratio() -> None:
    text = markdown(sample_results())
    assert "| 41x from sync to async | 001.txt | sync -> async | rps | 41.40x | 4.00x | 0.10 |" in text
    assert "MULTI-VARIABLE" in text
    assert "| 2 | async |" in text
    assert "4.00x" in text


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make system-deps)")
def test_html_report_charts_render_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(html_report(sample_results()))
    assert "<script src=" not in page.read_text()  # plotly.js is inlined: the file works offline
    dom = subprocess.run(
        [
            str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000",
            "--dump-dom", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=90, check=False,
    ).stdout  # fmt: skip
    for chart in ("chart-capacity", "chart-latency", "chart-load"):
        start = dom.index(f'id="{chart}"')
        section = dom[start : dom.find("</section>", start)]
        # Plotly replaces the empty div with its SVG layers once it has drawn the traces.
        assert 'class="main-svg"' in section, chart
        assert re.search(r'class="(trace bars|trace scatter)', section), chart
    assert dom.count('class="trace bars"') >= 4  # 1 capacity bar trace + p50/p95/p99
    assert "41x from sync to async" in dom
