"""report.html is self-contained and its plotly charts draw in a real headless Chromium."""

from __future__ import annotations

import html as html_lib
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tenk.lab.documents import INCONCLUSIVE, CapacityResult, Claim, Estimate, Results, Step
from tenk.lab.results.derivations import compare_rungs
from tenk.lab.results.html_report import capacity_chart, charts, cpu_chart, html_report
from tenk.lab.results.markdown import markdown
from tests.lab.test_compare import figures, result

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def sample_results() -> Results:
    results = result([("sync", figures(1000, 0, 100.0, 300.0)), ("async", figures(4000, 0, 400.0, 30.0))])
    steps = [
        Step(rate=rate, passed=p99 <= 100, reasons=[], figures=figures(rate * 5, 0, rate, p99))
        for rate, p99 in ((100, 10.0), (200, 12.0), (400, 30.0), (800, 900.0), (600, 150.0))
    ]
    search = CapacityResult(
        capacity=400, converged=True, limited_by=["p99"], generator_limited=False,
        plan="capacity search: at most 8 steps", elapsed_s=30, steps=steps,
    )  # fmt: skip
    capacity_rung = results.rungs[1].model_copy(
        update={
            "multi_variable": True, "mode": "capacity", "value": 400, "capacity": search,
            "cpu_ms_estimate": Estimate(median=0.3, low=0.28, high=0.33, values=(0.28, 0.3, 0.33)),
        }
    )  # fmt: skip
    # A capacity rung too (without its steps), so that the two headlines measure the same thing.
    first = results.rungs[0].model_copy(
        update={
            "mode": "capacity",
            "cpu_ms_estimate": Estimate(median=0.5, low=0.45, high=0.6, values=(0.45, 0.5, 0.6)),
        }
    )
    claim = Claim(
        text="41x from sync to async", source="001.txt", from_rung="sync", to_rung="async", metric="rps",
        claimed_ratio=41.4,
    )  # fmt: skip
    return results.model_copy(update={"rungs": [first, capacity_rung], "claims": [claim]})


def search_steps(results: Results) -> list[Step]:
    search = results.rungs[1].capacity
    assert search is not None
    return search.steps


def test_markdown_sets_each_claim_beside_the_measured_ratio() -> None:
    text = markdown(sample_results())
    assert "| 41x from sync to async | 001.txt | sync -> async | rps | 41.40x | 4.00x | 0.10 |" in text
    assert "MULTI-VARIABLE" in text
    assert "| 2 | async |" in text
    assert "4.00x" in text


# Appended to a copy of the page: once every chart is drawn, write what plotly drew into the DOM.
DUMP_RANGES = """<script>window.tenkDrawn.then(() => {
  const out = TENK_CHARTS.map((c) => {
    const gd = document.getElementById(c.id);
    return {id: c.id, ytype: gd._fullLayout.yaxis.type, yrange: gd._fullLayout.yaxis.range,
            ys: gd.data.flatMap((t) => Array.from(t.y || []))};
  });
  const pre = document.createElement('pre');
  pre.id = 'ranges';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});</script>"""
SIZE_BUDGET_BYTES = 2_500_000


def headless_dom(page: Path, profile: Path) -> str:
    return subprocess.run(
        [
            str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--virtual-time-budget=15000",
            "--dump-dom", page.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    ).stdout  # fmt: skip


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make system-deps)")
def test_html_report_charts_render_in_headless_chromium_with_axes_that_fit_the_data(tmp_path: Path) -> None:
    results = sample_results()
    search_steps(results)[0].figures.p99_ms = 0.0  # nothing completed: no log point
    text = html_report(results)
    assert "<script src=" not in text  # plotly.js is inlined: the file works offline
    assert text.count('id="plotly-gz"') == 1  # and loaded once
    assert len(text.encode()) < SIZE_BUDGET_BYTES, len(text.encode())
    page = tmp_path / "report.html"
    page.write_text(text.replace("</body>", DUMP_RANGES + "</body>"))
    dom = headless_dom(page, tmp_path / "profile")
    for chart in ("chart-cpu", "chart-capacity", "chart-latency", "chart-load"):
        start = dom.index(f'id="{chart}"')
        section = dom[start : dom.find("</section>", start)]
        # Plotly fills the empty div with its SVG layers once it has drawn the traces.
        assert 'class="main-svg"' in section, chart
        assert re.search(r'class="(trace bars|trace scatter)', section), chart
    assert dom.count('class="trace bars"') >= 4  # 1 capacity bar trace + p50/p95/p99
    assert "41x from sync to async" in dom
    ranges = json.loads(html_lib.unescape(re.search(r'<pre id="ranges">(.*?)</pre>', dom, re.S).group(1)))  # type: ignore[union-attr]
    assert {chart["id"] for chart in ranges} == {"chart-cpu", "chart-capacity", "chart-latency", "chart-load"}
    for chart in ranges:
        ys = [y for y in chart["ys"] if isinstance(y, int | float)]
        low, high = chart["yrange"]
        if chart["ytype"] == "log":
            logs = [math.log10(y) for y in ys if y > 0]
            low_data, high_data = min(logs), max(logs)
            # Never out to 1e48: within a decade of what is drawn.
            assert low_data - 1 <= low <= low_data, chart
            assert high_data <= high <= high_data + 1, chart
        else:
            assert low <= min(0.0, *ys), chart
            assert max(ys) <= high <= 2 * max(ys), chart


def test_every_chart_axis_range_fits_the_data_even_with_zero_and_nan_latencies() -> None:
    results = sample_results()
    steps = search_steps(results)
    steps[0].figures.p99_ms = 0.0  # a step that completed nothing
    steps[1].figures.p50_ms = float("nan")
    for chart_id, figure in charts(results):
        layout = figure.layout
        for axis in (layout.xaxis, layout.yaxis):
            if axis.type != "log":
                continue
            ys = [y for trace in figure.data for y in trace.y]
            assert all(y > 0 and math.isfinite(y) for y in ys), chart_id
            low, high = axis.range
            drawn = [*ys, results.rungs[0].config["slo_p99_ms"]]
            # The axis spans the data it draws, within a decade either side: never out to 1e48.
            assert math.log10(min(drawn)) - 1 <= low <= math.log10(min(drawn)), (chart_id, axis.range)
            assert math.log10(max(drawn)) <= high <= math.log10(max(drawn)) + 1, (chart_id, axis.range)


def test_the_generators_peak_memory_is_in_the_rungs_details_once_a_run_recorded_it() -> None:
    recorded = figures(5000, 0, 500.0, 20.0)
    recorded.generator_peak_rss_mb = 3157.4
    text = markdown(result([("r", recorded)]))
    assert "- **gen RSS MB**: 3,157\n" in text
    assert "`gen RSS MB` is its peak memory" in text
    before = markdown(result([("r", figures(5000, 0, 500.0, 20.0))]))
    assert "gen RSS MB" not in before


def test_report_opens_with_the_verdict_before_the_tables() -> None:
    text = markdown(sample_results())
    assert text.index("## Verdict") < text.index("## Rungs")
    assert "Test behind each label" in text


def test_a_ceiling_that_is_not_the_targets_is_a_lower_bound_and_not_compared() -> None:
    results = sample_results()
    sync, limited = results.rungs
    limited.verdict = limited.verdict.model_copy(update={"server_figure": False, "ceiling": "postgres on CPU 1"})
    text = markdown(results)
    assert "| ≥ 400 | postgres on CPU 1 |" in text  # a lower bound, and what set it, in the rung table
    assert "capacity: inconclusive (async postgres-bound, not the target); CPU ms/request -40" in text
    assert compare_rungs(sync, limited, "capacity").shown == "inconclusive (async postgres-bound, not the target)"


def test_a_capacity_search_that_passed_no_step_is_said_so_and_not_called_another_bound() -> None:
    results = sample_results()
    sync, failed = results.rungs
    failed.value = 0.0
    failed.verdict = failed.verdict.model_copy(update={"server_figure": False, "ceiling": "target on CPU 0"})
    text = markdown(results)
    assert "capacity: inconclusive (async: no step within the SLO)" in text
    assert "not the target)" not in text
    assert compare_rungs(sync, failed, "capacity").label == INCONCLUSIVE


def test_html_first_screen_is_one_verdict_line_per_comparison_before_charts_and_tables() -> None:
    results = sample_results()
    limited = results.rungs[1]
    limited.verdict = limited.verdict.model_copy(update={"server_figure": False, "ceiling": "postgres on CPU 1"})
    page = html_report(results)
    verdict = page[page.index("<h2>Verdict</h2>") : page.index("<h2>Charts</h2>")]
    assert page.index("<h2>Charts</h2>") < page.index("<h2>Rungs</h2>") < page.index("<h2>Claims</h2>")
    items = re.findall(r"<li>(.*?)</li>", verdict)
    assert len(items) == 2, items  # one change along the ladder, one claim
    assert items[0].startswith("<b>async</b> vs sync (x): capacity: inconclusive (async postgres-bound, not the")
    assert "CPU ms/request -40" in items[0]
    assert items[1].endswith("claimed 41.40x"), items[1]  # the claim is as inconclusive as its comparison
    # The why is said once, in the rung table, not in the verdict.
    assert "postgres on CPU 1" not in verdict


def test_capacity_chart_marks_a_figure_that_is_not_the_targets_grey_and_labelled() -> None:
    results = sample_results()
    limited = results.rungs[1]
    limited.verdict = limited.verdict.model_copy(update={"server_figure": False, "ceiling": "k6 dropped iterations"})
    bar = capacity_chart(results.rungs).data[0]
    assert list(bar.marker.color) == ["#1f77b4", "#bbbbbb"]
    assert list(bar.marker.pattern.shape) == ["", "/"]
    assert bar.text[1] == "≥ 400, k6-bound"


def test_cpu_chart_draws_each_rungs_interval() -> None:
    bar = cpu_chart(sample_results().rungs).data[0]
    assert list(bar.y) == [0.5, 0.3]
    assert list(bar.error_y.array) == pytest.approx([0.1, 0.03])
    assert list(bar.error_y.arrayminus) == pytest.approx([0.05, 0.02])
