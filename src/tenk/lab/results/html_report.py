"""report.html: the report as one offline page, with plotly charts (the lab's only plotly user).

Imported by `write_reports` only: `tenk lab plan` and `tenk lab compare` never load plotly.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import math
import re
from typing import Any

import plotly.graph_objects as go

from tenk.lab.documents import GENERATORS, Estimate, Results, RungResult
from tenk.lab.results.derivations import (
    bound_by,
    cpu_ms_per_request,
    headline_metric,
    metric_value,
    not_the_targets,
    unconverged,
)
from tenk.lab.results.markdown import RUNG_TABLE_NOTE
from tenk.lab.results.profiles import PROFILE_NOTE, changed_rows, profile_line, top_rows
from tenk.lab.results.tables import RungTable, claim_rows, or_unknown, provenance_line, rung_table, verdict_lines


def _figure_html(figure: go.Figure, div_id: str) -> str:
    figure.update_layout(template="plotly_white", height=380, margin={"l": 60, "r": 20, "t": 50, "b": 60})
    # Inside <script>, "</" could end the element early; "<\/" is the same string to JavaScript.
    spec = str(figure.to_json()).replace("</", "<\\/")
    return f'<div id="{div_id}"></div><script>TENK_CHARTS.push({{id: "{div_id}", spec: {spec}}});</script>'


@functools.cache
def _plotly_gzip_base64() -> str:
    """plotly.js, gzipped and base64-encoded: the report stays one offline file, a fraction of the size;
    the browser inflates it once with DecompressionStream and draws every chart."""
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
    await Plotly.newPlot(chart.id, chart.spec.data, chart.spec.layout, {responsive: true, displayModeBar: false});
  }
}
</script>"""


def _interval(estimate: Estimate | None, median: float) -> tuple[float, float]:
    """(above, below) the median, for plotly's asymmetric error bars; 0 for a single run."""
    if estimate is None or len(estimate.values) < 2:
        return 0.0, 0.0
    return max(estimate.high - median, 0.0), max(median - estimate.low, 0.0)


def cpu_chart(rungs: list[RungResult]) -> go.Figure:
    """The target's CPU ms per request with its interval, and each dependency's stacked above it:
    the figure that stays valid on a shared machine, whatever limited the rung."""
    labels = [rung.label for rung in rungs]
    medians = [cpu_ms_per_request(rung) or 0.0 for rung in rungs]
    bars = [_interval(rung.cpu_ms_estimate, m) for rung, m in zip(rungs, medians, strict=True)]
    figure = go.Figure()
    figure.add_bar(
        x=labels, y=medians, name="target", text=[f"{m:.3f}" for m in medians], textposition="inside",
        insidetextanchor="middle",
        error_y={"type": "data", "symmetric": False, "array": [b[0] for b in bars], "arrayminus": [b[1] for b in bars]},
    )  # fmt: skip
    roles = sorted({role for rung in rungs for role in rung.cpu_ms if role not in ("target", *GENERATORS)})
    for role in roles:
        figure.add_bar(x=labels, y=[rung.cpu_ms.get(role, 0.0) for rung in rungs], name=role)
    figure.update_layout(
        title="CPU ms per request, per rung (median, 95 % interval)", yaxis_title="CPU ms / request",
        barmode="stack", showlegend=bool(roles),
    )  # fmt: skip
    return figure


def capacity_chart(rungs: list[RungResult]) -> go.Figure:
    """Each rung's headline with its interval; a figure that is not the target's is a grey hatched
    bar labelled with what set it, so nobody reads it as the target's capacity."""
    labels = [rung.label for rung in rungs]
    values = [metric_value(rung, headline_metric(rung)) for rung in rungs]
    bars = [_interval(rung.estimate, v) for rung, v in zip(rungs, values, strict=True)]
    own = [not not_the_targets(rung) for rung in rungs]
    text = [f"{v:,.0f}" if own[i] else f"≥ {v:,.0f}, {_why_not(rungs[i])}" for i, v in enumerate(values)]
    figure = go.Figure(
        go.Bar(
            x=labels, y=values, text=text, textposition="inside", insidetextanchor="middle",
            marker={"color": ["#1f77b4" if mine else "#bbbbbb" for mine in own],
                    "pattern": {"shape": ["" if mine else "/" for mine in own]}},
            error_y={"type": "data", "symmetric": False, "array": [b[0] for b in bars],
                     "arrayminus": [b[1] for b in bars]},
        )
    )  # fmt: skip
    budgets = {rung.cpu_budget.millicores for rung in rungs if rung.cpu_budget and rung.cpu_budget.millicores}
    under = f" under a {', '.join(f'{m}m' for m in sorted(budgets))} CPU budget" if budgets else ""
    figure.update_layout(
        title=f"Capacity (req/s within SLO) or goodput, per rung{under}; grey: not the target's",
        yaxis_title="req/s",
    )
    return figure


def _why_not(rung: RungResult) -> str:
    """A bar's label for a figure that is not the target's: what set it, or that its search did not converge."""
    return "not converged" if unconverged(rung) else bound_by(rung)


def charts(results: Results) -> list[tuple[str, go.Figure]]:
    rungs = results.rungs
    labels = [rung.label for rung in rungs]
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
    return [
        ("chart-cpu", cpu_chart(rungs)),
        ("chart-capacity", capacity_chart(rungs)),
        ("chart-latency", latency),
        ("chart-load", curve),
    ]


def _plottable(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _html_table(rows: list[dict[str, str]], css: str = "") -> str:
    if not rows:
        return "<p>(none)</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row.values()) + "</tr>" for row in rows)
    opened = f'<table class="{css}">' if css else "<table>"
    return f"{opened}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _rungs_html(table: RungTable) -> str:
    """The rung table, then a `<details>` per rung with its other figures, one per line."""
    folds = []
    for title, figures in table.details:
        rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in figures.items())
        folds.append(f'<details><summary>{html.escape(title)}</summary><table class="figures">{rows}</table></details>')
    note = f'<p class="note">{html.escape(RUNG_TABLE_NOTE)}</p>'
    return _html_table(table.rows, "rungs") + note + "".join(folds)


def _verdict_html(results: Results) -> str:
    """The verdict lines, each comparison an item with its rung in bold; the rest as plain notes."""
    items: list[str] = []
    notes: list[str] = []
    for line in verdict_lines(results):
        text = line.strip()
        escaped = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(text.removeprefix("- ")))
        (items if text.startswith("- ") else notes).append(escaped)
    listed = "".join(f"<li>{item}</li>" for item in items)
    return f'<ul class="verdict">{listed}</ul>' + "".join(f'<p class="note">{note}</p>' for note in notes if note)


def _profiles_html(results: Results) -> str:
    """Each profiled rung's flame graph (shown, and linked), top functions and changes."""
    if not any(rung.profile is not None for rung in results.rungs):
        return ""
    parts = [f'<h2>Where the CPU went</h2><p class="note">{html.escape(PROFILE_NOTE)}</p>']
    for rung in results.rungs:
        profile = rung.profile
        if profile is None:
            continue
        parts.append(f"<h3>{html.escape(rung.label)}</h3><p>{html.escape(profile_line(profile))}</p>")
        for link, table in ((profile.flame, top_rows(profile)), (profile.diff, changed_rows(profile))):
            if not link:
                continue
            where = html.escape(link, quote=True)
            caption = "flame graph" if link == profile.flame else f"against {profile.against}"
            parts.append(
                f'<p><a href="{where}">{html.escape(caption)}: {where}</a></p>'
                f'<a href="{where}"><img src="{where}" alt="{html.escape(caption)}" style="max-width: 100%"></a>'
                + _html_table(table)
            )
    return "\n".join(parts)


def html_report(results: Results) -> str:
    divs = "\n".join(f'<section class="chart">{_figure_html(fig, div_id)}</section>' for div_id, fig in charts(results))
    title = html.escape(results.ladder)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tenk lab: {title}</title>
<script id="plotly-gz" type="application/octet-stream">{_plotly_gzip_base64()}</script>
{_LOADER}
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.85rem; margin: 1rem 0; max-width: 100%; }}
th, td {{ border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: right; overflow-wrap: anywhere; }}
th {{ background: #f4f4f4; }} :is(td, th):is(:nth-child(2), :nth-child(3), :last-child) {{ text-align: left; }}
table.rungs :is(td, th):nth-child(6) {{ text-align: left; }} table.rungs :is(td, th):last-child {{ text-align: right; }}
table.figures th {{ text-align: left; font-weight: normal; width: 16rem; }} table.figures td {{ text-align: left; }}
details {{ margin: 0.3rem 0; }} summary {{ cursor: pointer; }}
p {{ overflow-wrap: anywhere; }}
.charts {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(min(560px, 100%), 1fr)); gap: 1rem; }}
.chart {{ min-width: 0; }}
ul.verdict {{ font-size: 1.05rem; line-height: 1.5; }} .note {{ color: #666; font-size: 0.8rem; }}
</style></head><body>
<h1>{title}</h1>
<p>{html.escape(results.description)}</p>
<h2>Verdict</h2>
{_verdict_html(results)}
<h2>Charts</h2>
<div class="charts">{divs}</div>
<h2>Rungs</h2>
{_rungs_html(rung_table(results))}
<h2>Claims</h2>
{_html_table(claim_rows(results))}
{_profiles_html(results)}
<p>Created {html.escape(results.created)}; took {or_unknown(results.elapsed_s)}s.
{html.escape(results.merge_note)}</p>
<p>{html.escape(provenance_line(results))}</p>
<script>window.tenkDrawn = tenkDraw();</script>
</body></html>
"""
