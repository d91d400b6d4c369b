"""What both reports show, as text: the verdict that opens them, the rung and claim tables as rows of
strings, and the lines on provenance and reset state. The markdown and HTML pages lay these out."""

from __future__ import annotations

from dataclasses import dataclass

from tenk.lab.documents import GENERATORS, IngestFigures, Results, RungResult, ServerSample
from tenk.lab.results.derivations import (
    ceiling,
    check_expectations,
    cpu_ms_per_request,
    headline_metric,
    judged,
    metric_value,
    not_the_targets,
    target_in_flight_max,
)
from tenk.lab.results.stats import TEST_NAME
from tenk.lab.results.verdict import comparison_lines, labelled, oriented, times


def verdict_lines(results: Results) -> list[str]:
    """The report's opening: one line per comparison (see `verdict`); why each rung stopped is in
    the rung table."""
    rungs = results.rungs
    repeats = results.repeats or max((len(r.repeats) for r in rungs), default=1) or 1
    lines = [f"Each rung measured {repeats} time(s), interleaved; effects are medians [95 % interval]."]
    lines += [f"- {line}" for line in comparison_lines(results)] or ["- One rung: nothing to compare."]
    lines.append(
        f"\nTest behind each label: {TEST_NAME}. *better* or *worse* needs both; *no detectable change*, a rank "
        "test that could have told and did not; *inconclusive*, too few repeats for it to tell, or figures that "
        "are not the target's."
    )
    return lines


def rung_rows(results: Results) -> list[dict[str, str]]:
    rows = []
    rungs = results.rungs
    steps = {j.new: j for j in judged(results) if not j.claim}
    for i, rung in enumerate(rungs):
        figures, server = rung.figures, rung.server
        metric = headline_metric(rung)
        value = metric_value(rung, metric)
        step = steps.get(rung.label)
        delta = labelled(step.comparison) if i and step is not None else "-"
        marks = []
        if rung.multi_variable:
            marks.append("MULTI-VARIABLE")
        marks += rung.verdict.notes
        prefix = "≥ " if rung.mode == "capacity" and not_the_targets(rung) else ""
        est = rung.estimate
        interval = f" [{est.low:,.0f}–{est.high:,.0f}]" if est is not None and len(est.values) > 1 else ""
        deps = ", ".join(f"{role} {ms:.3f}" for role, ms in rung.cpu_ms.items() if role not in _NOT_DEPENDENCIES)
        reasons = figures.errors_by_reason
        projected = rung.projected_rps_per_core
        rows.append(
            {
                "#": str(i + 1),
                "rung": rung.label,
                "changed": rung.changed,
                "measure": "capacity req/s" if metric == "capacity" else "RPS",
                "value": f"{prefix}{value:,.0f}{interval}",
                "search": _search_cell(rung),
                "limited by, and why": _bottleneck_cell(rung),
                _BUDGET: _budget_cell(rung),
                _THROTTLED: _throttled_cell(server),
                _AT_BUDGET: _at_budget_cell(rung, value),
                "p50 ms": f"{figures.p50_ms:.1f}",
                "p95 ms": f"{figures.p95_ms:.1f}",
                "p99 ms": f"{figures.p99_ms:.1f}",
                _MEAN: _fmt(figures.mean_ms, ".1f"),
                _THROUGHPUT: _fmt(figures.bytes_per_s / 1e6 if figures.bytes_per_s else None, ".2f"),
                "errors": f"{figures.error_rate:.2%}",
                "errors by reason": ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "-",
                "CPU cores": _fmt(server.cpu_cores_mean, ".2f"),
                "CPU ms/req": cpu_cell(rung),
                _NODES: ", ".join(f"{node} {ms:.3f}" for node, ms in sorted(rung.cpu_ms_per_node.items())) or "-",
                "dependency CPU ms/req": deps or "-",
                "projected req/s per core": f"{projected:,.0f} (projection)" if projected else "-",
                "RSS MB": _fmt(server.rss_mb_max, ".0f"),
                "neighbour cores": _fmt(server.neighbour_cores_mean, ".2f"),
                "gen CPU": f"{figures.generator_util:.0%}",
                _GEN_RSS: _fmt(figures.generator_peak_rss_mb or None, ",.0f"),
                _PARKED: _parked_cell(server),
                _INGEST: _ingest_cell(server.ingest),
                "delta vs prev": delta,
                "notes": "; ".join(marks),
            }
        )
    # Columns no rung measured (no upstream, no ingest) are left out; the ingest one sits beside the
    # accept rate it qualifies.
    for optional in (_NODES, _GEN_RSS, _PARKED, _INGEST, _BUDGET, _THROTTLED, _AT_BUDGET, _MEAN, _THROUGHPUT):
        if rows and all(row[optional] == "-" for row in rows):
            for row in rows:
                del row[optional]
    return [_beside_value(row) for row in rows]


_NODES = "CPU ms/req per API node"
# The generator's CPU a request is its own column's ("gen CPU"): not something the target depends on.
_NOT_DEPENDENCIES = ("target", *GENERATORS)
_BUDGET = "CPU budget"
_GEN_RSS = "gen RSS MB"
_MEAN = "mean ms"
_THROUGHPUT = "MB/s received"
_THROTTLED = "throttled: periods, s"
_AT_BUDGET = "projected at budget (measured/projected)"


def _bottleneck_cell(rung: RungResult) -> str:
    """What stopped the rung and the evidence, said once here; the verdict lines only name it."""
    limit = ceiling(rung) or "-"
    named = rung.bottleneck
    return f"{limit}: {named.detail}" if named is not None and named.detail else limit


def _budget_cell(rung: RungResult) -> str:
    budget = rung.cpu_budget
    if budget is None:
        return "-"
    if budget.millicores is None:
        return f"{budget.asked}, not enforced: {budget.missing}"
    return f"{budget.millicores}m ({budget.period_us and budget.period_us // 1000} ms period)"


def _throttled_cell(server: ServerSample) -> str:
    throttling = server.throttling
    if not throttling or not throttling.get("periods"):
        return "-"
    return f"{throttling['throttled'] / throttling['periods']:.0%}, {throttling['throttled_s']:.1f}"


def _at_budget_cell(rung: RungResult, value: float) -> str:
    """What the budget buys by the light-rate arithmetic (budget / CPU per request), beside the capacity
    measured: the agreement check of a budgeted capacity with its projection."""
    budget, target_ms = rung.cpu_budget, rung.cpu_ms.get("target")
    if budget is None or budget.millicores is None or not target_ms:
        return "-"
    projected = budget.millicores / target_ms
    ratio = f" ({value / projected:.2f})" if rung.mode == "capacity" and value > 0 else ""
    return f"{projected:,.0f}{ratio}"


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


def _search_cell(rung: RungResult) -> str:
    """Where each repeat's capacity search left it: the precision it reached beside the one it asked for,
    or why it did not converge; "-" for a rung without a search (or from before `reached` was recorded)."""
    searches = [repeat.capacity for repeat in rung.repeats or [rung] if repeat.capacity is not None]
    said = [search.reached if search.converged else f"did not converge: {search.unconverged}" for search in searches]
    if not any(said):
        return "-"
    if len(said) == 1:
        return said[0]
    return "; ".join(f"repeat {k}: {text or '-'}" for k, text in enumerate(said, 1))


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _fmt_float(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def cpu_cell(rung: RungResult) -> str:
    """The target's CPU ms per request: the median of the repeats with its 95 % interval."""
    est = rung.cpu_ms_estimate
    if est is not None and len(est.values) > 1:
        return est.show(3)
    return _fmt_float(cpu_ms_per_request(rung))


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


# The rung table's columns: what decides a rung, at a glance. Each is the `rung_rows` cell of its name but for
# "limited by", which says only what set the ceiling: the why stays in the rung's details, with the rest.
AT_A_GLANCE = ("#", "rung", "changed", "measure", "value", "limited by", "CPU ms/req", "p99 ms")


@dataclass(frozen=True)
class RungTable:
    """The report's rungs: a row of `AT_A_GLANCE` each, then each rung's details (a title, and every other
    figure `rung_rows` has for it, in its order; those it has none of are left out)."""

    rows: list[dict[str, str]]
    details: list[tuple[str, dict[str, str]]]


def rung_table(results: Results) -> RungTable:
    rows, details = [], []
    for rung, full in zip(results.rungs, rung_rows(results), strict=True):
        short = {**full, "limited by": ceiling(rung) or "-"}
        rows.append({name: short[name] for name in AT_A_GLANCE})
        rest = {name: value for name, value in full.items() if name not in AT_A_GLANCE and value not in ("", "-")}
        details.append((f"{full['#']}. {full['rung']}", rest))
    return RungTable(rows, details)


def claim_rows(results: Results) -> list[dict[str, str]]:
    by_label = {rung.label: rung for rung in results.rungs}
    verdicts = {(j.claim, j.base, j.new): j for j in judged(results) if j.claim}
    rows = []
    for claim in results.claims:
        before, after = by_label.get(claim.from_rung), by_label.get(claim.to_rung)
        judgement = verdicts.get((claim.text, claim.from_rung, claim.to_rung))
        measured = judgement.comparison if judgement is not None else None
        claimed = claim.claimed_ratio
        expected = "-"
        if claim.expect:
            held, lines = check_expectations(claim, before, after) if before and after else ("not measured", [])
            expected = f"{held}: " + "; ".join(lines)
        found = oriented(measured, claim.metric) if measured is not None else None
        rows.append(
            {
                "claim": claim.text,
                "source": claim.source,
                "rungs": f"{claim.from_rung} -> {claim.to_rung}",
                "metric": claim.metric,
                "claimed": "qualitative" if claimed is None else f"{claimed:.2f}x",
                "measured": times(measured, claim.metric) if measured is not None else "-",
                "measured / claimed": "-" if found is None or claimed is None else f"{found[0] / claimed:.2f}",
                "expectation": expected,
                "comparison": measured.shown if measured is not None else "-",
                "verdict": judgement.verdict if judgement is not None else "not measured",
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


def reset_line(results: Results) -> str:
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


def or_unknown(seconds: float | None) -> str:
    """A duration as the file has it, "?" for a file that did not record it."""
    return "?" if seconds is None else f"{seconds:g}"
