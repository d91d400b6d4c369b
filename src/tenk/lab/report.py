"""report.md and report.html from a results.json document (also used after `tenk lab merge`)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

# For rates, "x" is to/from; for latency and errors, lower is better, so it is from/to.
HIGHER_IS_BETTER = {"rps": True, "capacity": True, "p99_ms": False, "errors": False, "cpu_ms": False}


def cpu_ms_per_request(rung: dict[str, Any]) -> float | None:
    """The target's CPU time per completed request, in ms; None when the target was not sampled.

    On a shared machine this is the steadiest figure: the kernel counts CPU time whether or not a
    neighbour delayed the process, while p99 and capacity move with the neighbours.
    """
    cores = (rung.get("server") or {}).get("cpu_cores_mean")
    rps = rung["figures"].get("rps")
    return float(cores * 1000 / rps) if cores and rps else None


def metric_value(rung: dict[str, Any], metric: str) -> float:
    figures = rung["figures"]
    if metric == "cpu_ms":
        return cpu_ms_per_request(rung) or 0.0
    if metric == "capacity":
        return float(rung["value"]) if rung["mode"] == "capacity" else 0.0
    if metric == "rps":
        return float(figures["rps"]) if rung["mode"] == "rate" else float(rung["value"])
    if metric == "p99_ms":
        return float(figures["p99_ms"])
    return float(figures["error_rate"])


def ratio(before: float, after: float, metric: str) -> float | None:
    if HIGHER_IS_BETTER[metric]:
        return after / before if before else None
    return before / after if after else None


def _headline_metric(rung: dict[str, Any]) -> str:
    return "capacity" if rung["mode"] == "capacity" else "rps"


def _fmt_float(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def rung_rows(results: dict[str, Any]) -> list[dict[str, str]]:
    rows = []
    rungs = results["rungs"]
    for i, rung in enumerate(rungs):
        figures = rung["figures"]
        server = rung.get("server") or {}
        metric = _headline_metric(rung)
        value = metric_value(rung, metric)
        previous = metric_value(rungs[i - 1], metric) if i else None
        first = metric_value(rungs[0], metric)
        delta = "-" if not previous else f"{(value - previous) / previous:+.1%}"
        times_first = "-" if not first else f"{value / first:.2f}x"
        marks = []
        if rung.get("multi_variable"):
            marks.append("MULTI-VARIABLE")
        marks += rung["verdict"]["notes"]
        prefix = ">= " if rung.get("capacity") and rung["capacity"].get("generator_limited") else ""
        rows.append(
            {
                "#": str(i + 1),
                "rung": rung["label"],
                "changed": rung["changed"],
                "measure": "capacity req/s" if metric == "capacity" else "RPS",
                "value": f"{prefix}{value:,.0f}",
                "p50 ms": f"{figures['p50_ms']:.1f}",
                "p95 ms": f"{figures['p95_ms']:.1f}",
                "p99 ms": f"{figures['p99_ms']:.1f}",
                "errors": f"{figures['error_rate']:.2%}",
                "CPU cores": f"{server['cpu_cores_mean']:.2f}" if server.get("cpu_cores_mean") is not None else "-",
                "CPU ms/req": _fmt_float(cpu_ms_per_request(rung)),
                "RSS MB": f"{server['rss_mb_max']:.0f}" if server.get("rss_mb_max") is not None else "-",
                "neighbour cores": f"{server['neighbour_cores_mean']:.2f}" if "neighbour_cores_mean" in server else "-",
                "gen CPU": f"{figures['generator_util']:.0%}",
                "delta vs prev": delta,
                "x vs first": times_first,
                "notes": "; ".join(marks),
            }
        )
    return rows


def claim_rows(results: dict[str, Any]) -> list[dict[str, str]]:
    by_label = {rung["label"]: rung for rung in results["rungs"]}
    rows = []
    for claim in results.get("claims", []):
        before, after = by_label.get(claim["from_rung"]), by_label.get(claim["to_rung"])
        measured = None
        if before is not None and after is not None:
            measured = ratio(
                metric_value(before, claim["metric"]), metric_value(after, claim["metric"]), claim["metric"]
            )
        rows.append(
            {
                "claim": claim["text"],
                "source": claim["source"],
                "rungs": f"{claim['from_rung']} -> {claim['to_rung']}",
                "metric": claim["metric"],
                "claimed": f"{claim['claimed_ratio']:.2f}x",
                "measured": _fmt_ratio(measured),
                "measured / claimed": "-" if measured is None else f"{measured / claim['claimed_ratio']:.2f}",
            }
        )
    return rows


def md_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(none)\n"
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row[h].replace("|", "/") for h in head) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def markdown(results: dict[str, Any]) -> str:
    parts = [
        f"# {results['ladder']}\n",
        f"{results.get('description', '')}\n",
        f"Created {results['created']}; took {results.get('elapsed_s', '?')}s (bound stated up front: "
        f"{results.get('time_bound_s', '?')}s). Source: `{results.get('source', '')}`.\n",
    ]
    if results.get("merged_from"):
        parts.append(f"Merged from {len(results['merged_from'])} generator segments. {results.get('merge_note', '')}\n")
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
    steps = [
        (rung["label"], step) for rung in results["rungs"] if rung.get("capacity") for step in rung["capacity"]["steps"]
    ]
    if steps:
        parts.append("\n## Capacity search steps\n")
        for rung in results["rungs"]:
            if rung.get("capacity"):
                parts.append(f"\n**{rung['label']}**: {rung['capacity']['plan']}\n\n")
        rows = [
            {
                "rung": label,
                "offered": f"{step['rate']:g}",
                "achieved": f"{step['figures']['rps']:,.0f}",
                "p50 ms": f"{step['figures']['p50_ms']:.1f}",
                "p99 ms": f"{step['figures']['p99_ms']:.1f}",
                "errors": f"{step['figures']['error_rate']:.2%}",
                "dropped": str(step["figures"]["dropped"]),
                "gen CPU": f"{step['figures']['generator_util']:.0%}",
                "target CPU": f"{step['server'].get('cpu_cores_mean', 0):.2f}",
                "neighbours": f"{step['server'].get('neighbour_cores_mean', 0):.2f}",
                "result": "pass" if step["passed"] else "fail: " + "; ".join(step["reasons"]),
            }
            for label, step in steps
        ]
        parts.append(md_table(rows))
    return "\n".join(parts)


def _figure_html(figure: go.Figure, div_id: str) -> str:
    figure.update_layout(template="plotly_white", height=380, margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return str(figure.to_html(full_html=False, include_plotlyjs=False, div_id=div_id))


def charts(results: dict[str, Any]) -> list[tuple[str, go.Figure]]:
    rungs = results["rungs"]
    labels = [rung["label"] for rung in rungs]
    values = [metric_value(rung, _headline_metric(rung)) for rung in rungs]
    headline = go.Figure(go.Bar(x=labels, y=values, text=[f"{v:,.0f}" for v in values], textposition="auto"))
    headline.update_layout(
        title="Capacity (req/s within SLO) or achieved RPS, per rung", yaxis_title="req/s", xaxis_title="rung"
    )
    latency = go.Figure()
    for key, name in (("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99")):
        latency.add_bar(x=labels, y=[rung["figures"][key] for rung in rungs], name=name)
    latency.update_layout(title="Latency percentiles per rung", yaxis_title="ms", barmode="group")
    curve = go.Figure()
    for rung in rungs:
        if rung.get("capacity"):
            steps = sorted(rung["capacity"]["steps"], key=lambda s: s["rate"])
            xs = [s["rate"] for s in steps]
            curve.add_scatter(
                x=xs, y=[s["figures"]["p99_ms"] for s in steps], mode="lines+markers", name=f"{rung['label']} p99"
            )
            curve.add_scatter(
                x=xs, y=[s["figures"]["p50_ms"] for s in steps], mode="lines+markers", name=f"{rung['label']} p50",
                line={"dash": "dot"},
            )  # fmt: skip
        else:
            figures = rung["figures"]
            offered = figures["offered_rps"] or figures["rps"]
            curve.add_scatter(x=[offered], y=[figures["p99_ms"]], mode="markers", name=f"{rung['label']} p99")
    slo = rungs[0]["config"]["slo_p99_ms"] if rungs else 100
    curve.add_hline(y=slo, line_dash="dash", annotation_text=f"SLO p99 {slo:g} ms")
    curve.update_layout(
        title="Latency against offered load", xaxis_title="offered req/s", yaxis_title="ms (log)", yaxis_type="log"
    )
    return [("chart-capacity", headline), ("chart-latency", latency), ("chart-load", curve)]


def _html_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "<p>(none)</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row.values()) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_report(results: dict[str, Any]) -> str:
    from plotly.offline import get_plotlyjs

    divs = "\n".join(f'<section class="chart">{_figure_html(fig, div_id)}</section>' for div_id, fig in charts(results))
    title = html.escape(results["ladder"])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tenk lab: {title}</title>
<script type="text/javascript">{get_plotlyjs()}</script>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.85rem; margin: 1rem 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: right; }}
th {{ background: #f4f4f4; }} td:nth-child(2), td:nth-child(3), td:last-child {{ text-align: left; }}
.chart {{ max-width: 1100px; }}
</style></head><body>
<h1>{title}</h1>
<p>{html.escape(results.get("description", ""))}</p>
<p>Created {html.escape(results["created"])}; took {results.get("elapsed_s", "?")}s.
{html.escape(results.get("merge_note", ""))}</p>
<h2>Rungs</h2>
{_html_table(rung_rows(results))}
<h2>Claims</h2>
{_html_table(claim_rows(results))}
<h2>Charts</h2>
{divs}
</body></html>
"""


def write_reports(results: dict[str, Any], out: Path) -> None:
    (out / "report.md").write_text(markdown(results))
    (out / "report.html").write_text(html_report(results))
