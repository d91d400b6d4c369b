"""report.html: the report as one offline page, with plotly charts (the lab's only plotly user).

Imported by `write_reports` only: `tenk lab plan` and `tenk lab compare` never load plotly.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import math
from typing import Any

import plotly.graph_objects as go

from tenk.lab.documents import Results
from tenk.lab.results.derivations import headline_metric, metric_value
from tenk.lab.results.tables import claim_rows, or_unknown, provenance_line, rung_rows, verdict_lines


def _figure_html(figure: go.Figure, div_id: str) -> str:
    figure.update_layout(template="plotly_white", height=380, margin={"l": 60, "r": 20, "t": 50, "b": 60})
    # Inside <script>, "</" could end the element early; "<\/" is the same string to JavaScript.
    spec = str(figure.to_json()).replace("</", "<\\/")
    return f'<div id="{div_id}"></div><script>TENK_CHARTS.push({{id: "{div_id}", spec: {spec}}});</script>'


@functools.cache
def _plotly_gzip_base64() -> str:
    """plotly.js, gzipped and base64-encoded: the report stays one offline file at about 40 % of
    the size; the browser inflates it once with DecompressionStream and draws every chart."""
    from plotly.offline import get_plotlyjs

    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), compresslevel=9, mtime=0)).decode()


# Loads plotly.js once from the inlined gzip, then draws the charts queued in TENK_CHARTS.
# `window.tenkDrawn` settles when every chart is drawn (the browser test waits on it).
_LOADER = """<script>
const TENK_CHARTS = [];
async function tenkDraw() {
  const text = document.getElementById('plotly-gz').textContent.trim();
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  const code = await new Response(stream).text();
  const element = document.createElement('script');
  element.text = code;
  document.head.appendChild(element);
  for (const chart of TENK_CHARTS) {
    await Plotly.newPlot(chart.id, chart.spec.data, chart.spec.layout, {responsive: true});
  }
}
</script>"""


def charts(results: Results) -> list[tuple[str, go.Figure]]:
    rungs = results.rungs
    labels = [rung.label for rung in rungs]
    values = [metric_value(rung, headline_metric(rung)) for rung in rungs]
    headline = go.Figure(go.Bar(x=labels, y=values, text=[f"{v:,.0f}" for v in values], textposition="auto"))
    headline.update_layout(
        title="Capacity (req/s within SLO) or achieved RPS, per rung", yaxis_title="req/s", xaxis_title="rung"
    )
    latency = go.Figure()
    latency.add_bar(x=labels, y=[rung.figures.p50_ms for rung in rungs], name="p50")
    latency.add_bar(x=labels, y=[rung.figures.p95_ms for rung in rungs], name="p95")
    latency.add_bar(x=labels, y=[rung.figures.p99_ms for rung in rungs], name="p99")
    latency.update_layout(title="Latency percentiles per rung", yaxis_title="ms", barmode="group")
    curve = go.Figure()
    plotted: list[float] = []

    def add(xs: list[float], ys: list[float], name: str, **style: Any) -> None:
        # A log axis cannot show 0 (a step with no completed request) or NaN: plotly would stretch
        # the axis to 1e48 trying. Such points are left out; the tables still list them.
        points = [(x, y) for x, y in zip(xs, ys, strict=True) if _plottable(y)]
        if points:
            plotted.extend(y for _, y in points)
            curve.add_scatter(x=[x for x, _ in points], y=[y for _, y in points], name=name, **style)

    for rung in rungs:
        search = rung.capacity
        if search is not None:
            steps = sorted(search.steps, key=lambda s: s.rate)
            xs = [s.rate for s in steps]
            add(xs, [s.figures.p99_ms for s in steps], f"{rung.label} p99", mode="lines+markers")
            add(xs, [s.figures.p50_ms for s in steps], f"{rung.label} p50", mode="lines+markers",
                line={"dash": "dot"})  # fmt: skip
        else:
            figures = rung.figures
            offered = figures.offered_rps or figures.rps
            add([offered], [figures.p99_ms], f"{rung.label} p99", mode="markers")
    slo = rungs[0].config["slo_p99_ms"] if rungs else 100
    curve.add_hline(y=slo, line_dash="dash", annotation_text=f"SLO p99 {slo:g} ms")
    shown = [*plotted, slo]
    # An explicit range (log10 units), padded a little, from the data actually drawn.
    low, high = math.log10(min(shown)) - 0.1, math.log10(max(shown)) + 0.1
    curve.update_layout(
        title="Latency against offered load", xaxis_title="offered req/s", yaxis_title="ms (log)", yaxis_type="log",
        yaxis_range=[low, high],
    )  # fmt: skip
    return [("chart-capacity", headline), ("chart-latency", latency), ("chart-load", curve)]


def _plottable(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _html_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "<p>(none)</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row.values()) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _verdict_html(results: Results) -> str:
    items = [html.escape(line.strip().removeprefix("- ").replace("**", "")) for line in verdict_lines(results)]
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items if item) + "</ul>"


def html_report(results: Results) -> str:
    divs = "\n".join(f'<section class="chart">{_figure_html(fig, div_id)}</section>' for div_id, fig in charts(results))
    title = html.escape(results.ladder)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tenk lab: {title}</title>
<script id="plotly-gz" type="application/octet-stream">{_plotly_gzip_base64()}</script>
{_LOADER}
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.85rem; margin: 1rem 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: right; }}
th {{ background: #f4f4f4; }} td:nth-child(2), td:nth-child(3), td:last-child {{ text-align: left; }}
.chart {{ max-width: 1100px; }}
</style></head><body>
<h1>{title}</h1>
<p>{html.escape(results.description)}</p>
<p>Created {html.escape(results.created)}; took {or_unknown(results.elapsed_s)}s.
{html.escape(results.merge_note)}</p>
<h2>Verdict</h2>
{_verdict_html(results)}
<p>{html.escape(provenance_line(results))}</p>
<h2>Rungs</h2>
{_html_table(rung_rows(results))}
<h2>Claims</h2>
{_html_table(claim_rows(results))}
<h2>Charts</h2>
{divs}
<script>window.tenkDrawn = tenkDraw();</script>
</body></html>
"""
