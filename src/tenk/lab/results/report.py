"""report.md and report.html from a results.json document (also used after `tenk lab merge`)."""

from __future__ import annotations

import base64
import functools
import gzip
import html
import math
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from tenk.lab.definition import expectations
from tenk.lab.documents import Claim, IngestFigures, Results, RungResult, ServerSample
from tenk.lab.results.stats import INVALID, Comparison, compare

# For rates, "x" is to/from; for latency and errors, lower is better, so it is from/to.
HIGHER_IS_BETTER = {"rps": True, "capacity": True, "p99_ms": False, "errors": False, "cpu_ms": False}


def cpu_ms_per_request(rung: RungResult) -> float | None:
    """The target's CPU time per completed request, in ms; None when the target was not sampled.

    On a shared machine this is the steadiest figure: the kernel counts CPU time whether or not a
    neighbour delayed the process, while p99 and capacity move with the neighbours.
    """
    estimate = rung.cpu_ms_estimate
    if estimate is not None and estimate.values:
        return estimate.median
    cores, rps = rung.server.cpu_cores_mean, rung.figures.rps
    return cores * 1000 / rps if cores and rps else None


def metric_value(rung: RungResult, metric: str) -> float:
    figures = rung.figures
    if metric == "cpu_ms":
        return cpu_ms_per_request(rung) or 0.0
    if metric == "capacity":
        return rung.value if rung.mode == "capacity" else 0.0
    if metric == "rps":
        return figures.rps if rung.mode == "rate" else rung.value
    if metric == "p99_ms":
        return figures.p99_ms
    return figures.error_rate


def target_in_flight_max(server: ServerSample) -> float | None:
    """The target's own in-flight gauge (tenk's upstream bulkhead), its peak during the step."""
    peaks = [g["max"] for key, g in server.gauges.items() if key.startswith("tenk_upstream_inflight")]
    return sum(peaks) if peaks else None


def quantity(rung: RungResult, name: str) -> float | None:
    """A claim expectation's quantity (`expectations.QUANTITIES`) as measured on `rung`; None if not."""
    figures, server = rung.figures, rung.server
    upstream, ingest = server.upstream, server.ingest
    found: dict[str, float | None] = {
        "goodput": figures.rps,
        "offered": figures.offered_rps,
        "capacity": rung.value if rung.mode == "capacity" else None,
        "p99_ms": figures.p99_ms,
        "error_rate": figures.error_rate,
        "cpu_ms": cpu_ms_per_request(rung),
        "upstream_in_flight": upstream.get("in_flight"),
        "upstream_in_flight_max": upstream.get("max_in_flight"),
        "target_in_flight_max": target_in_flight_max(server),
        "rows_landed_per_s": ingest.get("rows_landed_per_s"),
        "lag_p99_ms": ingest.get("lag_p99_ms"),
        "backlog_growth": ingest.get("backlog_growth"),
    }
    value = found.get(name)
    return None if value is None else float(value)


def check_expectations(claim: Claim, before: RungResult, after: RungResult) -> tuple[str, list[str]]:
    """(held | not held | not measured, one line per expectation with the values compared)."""
    rungs = {"from_rung": before, "to_rung": after}
    results, lines = [], []
    for text in claim.expect:
        result, shown = expectations.parse(text).check(lambda rung, name: quantity(rungs[rung], name))
        results.append(result)
        lines.append(f"{text}: {result} ({shown})")
    return expectations.verdict(results), lines


def ratio(before: float, after: float, metric: str) -> float | None:
    if HIGHER_IS_BETTER[metric]:
        return after / before if before else None
    return before / after if after else None


def repeat_values(rung: RungResult, metric: str) -> list[float]:
    """Every repeat's figure for `metric`; a result without repeats counts as one."""
    return [metric_value(repeat, metric) for repeat in rung.repeats or [rung]]


def is_server_figure(rung: RungResult) -> bool:
    return rung.verdict.server_figure


def ceiling(rung: RungResult) -> str:
    return rung.verdict.ceiling


def headline(rung: RungResult) -> str:
    """The rung's headline as a person should read it: a capacity only when it is the target's."""
    est = rung.estimate
    shown = est.show() if est is not None and len(est.values) > 1 else f"{rung.value:,.0f}"
    unit = "req/s capacity" if rung.mode == "capacity" else "req/s goodput"
    limit = ceiling(rung)
    if rung.mode == "capacity" and not is_server_figure(rung):
        reason = f"limited by {limit}" if limit and limit != "no ceiling reached" else "ceiling not reached"
        return f"≥ {shown} req/s, {reason} (not the target's capacity)"
    return f"{shown} {unit}" + (f", limited by {limit}" if limit and limit != "no ceiling reached" else "")


def compare_rungs(before: RungResult, after: RungResult, metric: str) -> Comparison:
    """Label `after` against `before`. A capacity set by something other than the target cannot
    be compared: it would compare the neighbours, not the change."""
    if metric == "cpu_ms":
        return compare(repeat_values(before, metric), repeat_values(after, metric), False, ("lower", "higher"))
    if metric in ("capacity", "rps") and not (is_server_figure(before) and is_server_figure(after)):
        limited = [r for r in (before, after) if not is_server_figure(r)]
        why = "; ".join(f"{r.label!r} is limited by {ceiling(r) or 'an unknown ceiling'}" for r in limited)
        return Comparison(0.0, 0.0, 0.0, INVALID, why + ", not the target")
    return compare(repeat_values(before, metric), repeat_values(after, metric), HIGHER_IS_BETTER[metric])


def verdict_lines(results: Results) -> list[str]:
    """The report's opening: what limited each rung, and each change's effect with how sure we are."""
    rungs = results.rungs
    repeats = results.repeats or max((len(r.repeats) for r in rungs), default=1) or 1
    lines = [f"Each rung measured {repeats} time(s), interleaved; figures are medians [95 % interval]."]
    effects: list[tuple[float, str]] = []
    for i, rung in enumerate(rungs):
        lines.append(f"- **{rung.label}**: {headline(rung)}.")
        if i == 0:
            continue
        previous = rungs[i - 1]
        metric = _headline_metric(rung)
        head = compare_rungs(previous, rung, metric)
        cpu = compare_rungs(previous, rung, "cpu_ms")
        lines.append(f"  - vs {previous.label!r} ({rung.changed}): {metric}: {head.show()}")
        if cpu.label != INVALID:
            lines.append(f"  - target CPU ms per request: {cpu.show()}")
        for comparison, name in ((head, metric), (cpu, "CPU ms/request")):
            if comparison.label not in (INVALID, "no detectable change"):
                effects.append((abs(comparison.ratio - 1), f"{rung.changed} ({name} {comparison.show()})"))
    if effects:
        lines.insert(1, f"**The change that mattered most:** {max(effects)[1]}.")
    else:
        lines.insert(1, "**No change had a statistically supported effect.**")
    lines.append(f"\nTest behind each label: {compare([1.0, 1.0], [1.0, 1.0]).test}.")
    return lines


def _headline_metric(rung: RungResult) -> str:
    return "capacity" if rung.mode == "capacity" else "rps"


def _fmt_float(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def rung_rows(results: Results) -> list[dict[str, str]]:
    rows = []
    rungs = results.rungs
    for i, rung in enumerate(rungs):
        figures, server = rung.figures, rung.server
        metric = _headline_metric(rung)
        value = metric_value(rung, metric)
        previous = metric_value(rungs[i - 1], metric) if i else None
        first = metric_value(rungs[0], metric)
        delta = "-" if not previous else f"{(value - previous) / previous:+.1%}"
        if i:
            label = compare_rungs(rungs[i - 1], rung, metric).label
            delta = f"{delta} ({label})"
        times_first = "-" if not first else f"{value / first:.2f}x"
        marks = []
        if rung.multi_variable:
            marks.append("MULTI-VARIABLE")
        marks += rung.verdict.notes
        prefix = "≥ " if rung.mode == "capacity" and not is_server_figure(rung) else ""
        est = rung.estimate
        interval = f" [{est.low:,.0f}–{est.high:,.0f}]" if est is not None and len(est.values) > 1 else ""
        deps = ", ".join(f"{role} {ms:.3f}" for role, ms in rung.cpu_ms.items() if role != "target")
        reasons = figures.errors_by_reason
        projected = rung.projected_rps_per_core
        rows.append(
            {
                "#": str(i + 1),
                "rung": rung.label,
                "changed": rung.changed,
                "measure": "capacity req/s" if metric == "capacity" else "RPS",
                "value": f"{prefix}{value:,.0f}{interval}",
                "limited by": ceiling(rung) or "-",
                "p50 ms": f"{figures.p50_ms:.1f}",
                "p95 ms": f"{figures.p95_ms:.1f}",
                "p99 ms": f"{figures.p99_ms:.1f}",
                "errors": f"{figures.error_rate:.2%}",
                "errors by reason": ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "-",
                "CPU cores": _fmt(server.cpu_cores_mean, ".2f"),
                "CPU ms/req": _cpu_cell(rung),
                _NODES: ", ".join(f"{node} {ms:.3f}" for node, ms in sorted(rung.cpu_ms_per_node.items())) or "-",
                "dependency CPU ms/req": deps or "-",
                "projected req/s per core": f"{projected:,.0f} (projection)" if projected else "-",
                "RSS MB": _fmt(server.rss_mb_max, ".0f"),
                "neighbour cores": _fmt(server.neighbour_cores_mean, ".2f"),
                "gen CPU": f"{figures.generator_util:.0%}",
                _PARKED: _parked_cell(server),
                _INGEST: _ingest_cell(server.ingest),
                "delta vs prev": delta,
                "x vs first": times_first,
                "notes": "; ".join(marks),
            }
        )
    # Columns no rung measured (no upstream, no ingest) are left out; the ingest one sits beside the
    # accept rate it qualifies.
    for optional in (_NODES, _PARKED, _INGEST):
        if rows and all(row[optional] == "-" for row in rows):
            for row in rows:
                del row[optional]
    return [_beside_value(row) for row in rows]


_NODES = "CPU ms/req per API node"
_PARKED = "parked: mock now/max, target in-flight max"
_INGEST = "ingest: rows landed/s, lag p50/p99 ms, backlog start→end"


def _beside_value(row: dict[str, str]) -> dict[str, str]:
    if _INGEST not in row:
        return row
    ordered: dict[str, str] = {}
    for key, value in row.items():
        if key != _INGEST:
            ordered[key] = value
        if key == "value":
            ordered[_INGEST] = row[_INGEST]
    return ordered


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _parked_cell(server: ServerSample) -> str:
    upstream = server.upstream
    own = target_in_flight_max(server)
    if not upstream:
        return "-"  # no mock upstream: nothing was parked on one
    mock = f"{upstream.get('in_flight', '-')}/{upstream.get('max_in_flight', '-')}"
    return f"{mock}, {'-' if own is None else f'{own:g}'}"


def _ingest_cell(ingest: IngestFigures) -> str:
    if not ingest:
        return "-"
    lag = f"{_ms(ingest.get('lag_p50_ms'))}/{_ms(ingest.get('lag_p99_ms'))}"
    backlog = (
        f"{ingest['backlog_start']}→{ingest['backlog_end']}" + (" GREW" if ingest.get("backlog_grew") else "")
        if "backlog_start" in ingest
        else "none (direct write)"
    )
    return f"{ingest.get('rows_landed_per_s', 0):,.0f}, {lag}, {backlog}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def claim_rows(results: Results) -> list[dict[str, str]]:
    by_label = {rung.label: rung for rung in results.rungs}
    rows = []
    for claim in results.claims:
        before, after = by_label.get(claim.from_rung), by_label.get(claim.to_rung)
        measured = None
        if before is not None and after is not None:
            measured = ratio(metric_value(before, claim.metric), metric_value(after, claim.metric), claim.metric)
        claimed = claim.claimed_ratio
        expected = "-"
        if claim.expect:
            held, lines = check_expectations(claim, before, after) if before and after else ("not measured", [])
            expected = f"{held}: " + "; ".join(lines)
        rows.append(
            {
                "claim": claim.text,
                "source": claim.source,
                "rungs": f"{claim.from_rung} -> {claim.to_rung}",
                "metric": claim.metric,
                "claimed": "qualitative" if claimed is None else f"{claimed:.2f}x",
                "measured": _fmt_ratio(measured),
                "measured / claimed": "-" if measured is None or claimed is None else f"{measured / claimed:.2f}",
                "expectation": expected,
                "verdict": "-"
                if before is None or after is None
                else compare_rungs(before, after, claim.metric).show(),
            }
        )
    return rows


def provenance_line(results: Results) -> str:
    prov = results.provenance
    if not prov:
        return "Provenance: not recorded.\n"
    machine, software = prov["machine"], prov["software"]
    packages = ", ".join(f"{k} {v}" for k, v in software.get("packages", {}).items())
    pins = ", ".join(f"{label}: CPU {p['target_cpus']}" for label, p in prov.get("pinning", {}).items())
    return (
        f"Machine: {machine['cpu_model']}, {machine['cores']} cores, {machine['memory_gb']} GB, kernel "
        f"{machine['kernel']}. Software: Python {software['python']}; {packages}; {software.get('k6') or 'k6 ?'}; "
        f"git {software.get('git_sha', '')[:12] or '?'}{' (dirty)' if software.get('git_dirty') else ''}. "
        f"Target pinned to: {pins}.\n"
    )


def _reset_line(results: Results) -> str:
    """What was reset before the rungs; a reset only some rungs had is named with those rungs."""
    rungs = results.rungs
    seen: dict[str, list[str]] = {}
    for rung in rungs:
        for reset in rung.reset:
            seen.setdefault(reset, []).append(rung.label)
    if not seen:
        return ""
    parts = [text if len(labels) == len(rungs) else f"{text} ({', '.join(labels)})" for text, labels in seen.items()]
    return f"State between rungs: {'; '.join(parts)}.\n"


def md_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(none)\n"
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row[h].replace("|", "/") for h in head) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def markdown(results: Results) -> str:
    parts = [
        f"# {results.ladder}\n",
        f"{results.description}\n",
        f"Created {results.created}; took {_or_unknown(results.elapsed_s)}s (bound stated up front: "
        f"{_or_unknown(results.time_bound_s)}s). Source: `{results.source}`.\n",
        "## Verdict\n",
        "\n".join(verdict_lines(results)) + "\n",
        provenance_line(results),
        _reset_line(results),
    ]
    if results.merged_from:
        parts.append(f"Merged from {len(results.merged_from)} generator segments. {results.merge_note}\n")
    parts += [
        "## Rungs\n",
        md_table(rung_rows(results)),
        "\nCPU and RSS are the target's process tree (mean cores busy, peak RSS), sampled every second; "
        "CPU ms/req is CPU time per completed request. `neighbour cores` is how busy the target's CPUs were "
        "with other processes: above 0.15 the rung is marked contended. "
        "`gen CPU` is the load generator's share of its own cores; above 80 %, or with dropped iterations, "
        "a run is generator-bound and not a server figure. Latencies are from the open-loop (k6) run "
        "(for capacity rungs: the highest passing step).\n",
        "\n## Claims\n",
        "Measured ratio: to/from for rps and capacity; from/to for p99_ms, errors and cpu_ms (times lower).\n\n",
        md_table(claim_rows(results)),
    ]
    searched = [(rung.label, search) for rung in results.rungs if (search := rung.capacity) is not None]
    steps = [(label, step) for label, search in searched for step in search.steps]
    if steps:
        parts.append("\n## Capacity search steps\n")
        for label, search in searched:
            parts.append(f"\n**{label}**: {search.plan}\n\n")
        rows = [
            {
                "rung": label,
                "offered": f"{step.rate:g}",
                "achieved": f"{step.figures.rps:,.0f}",
                "p50 ms": f"{step.figures.p50_ms:.1f}",
                "p99 ms": f"{step.figures.p99_ms:.1f}",
                "errors": f"{step.figures.error_rate:.2%}",
                "dropped": str(step.figures.dropped),
                "gen CPU": f"{step.figures.generator_util:.0%}",
                "target CPU": f"{step.server.cpu_cores_mean or 0:.2f}",
                "neighbours": f"{step.server.neighbour_cores_mean or 0:.2f}",
                "result": "pass" if step.passed else "fail: " + "; ".join(step.reasons),
            }
            for label, step in steps
        ]
        parts.append(md_table(rows))
    return "\n".join(parts)


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
    values = [metric_value(rung, _headline_metric(rung)) for rung in rungs]
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


def _cpu_cell(rung: RungResult) -> str:
    """The target's CPU ms per request: the median of the repeats with its 95 % interval."""
    est = rung.cpu_ms_estimate
    if est is not None and len(est.values) > 1:
        return est.show(3)
    return _fmt_float(cpu_ms_per_request(rung))


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
<p>Created {html.escape(results.created)}; took {_or_unknown(results.elapsed_s)}s.
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


def _or_unknown(seconds: float | None) -> str:
    """A duration as the file has it, "?" for a file that did not record it."""
    return "?" if seconds is None else f"{seconds:g}"


def write_reports(results: Results, out: Path) -> None:
    (out / "report.md").write_text(markdown(results))
    (out / "report.html").write_text(html_report(results))
