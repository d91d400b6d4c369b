"""`tenk lab compare` (per-rung ratios between two result folders) and `tenk lab merge` (segments
run on several generator machines, folded into one result)."""

from __future__ import annotations

from pathlib import Path

from tenk.lab.documents import (
    EndpointFigures,
    LoadFigures,
    Results,
    RungResult,
    ServerSample,
)
from tenk.lab.driving import latency
from tenk.lab.errors import LabError
from tenk.lab.results.derivations import (
    HIGHER_IS_BETTER,
    compare_rungs,
    cpu_ms_per_request,
    metric_value,
    step_judgement,
    with_judgements,
)
from tenk.lab.results.provenance import differences
from tenk.lab.results.stats import describe, supports_regression
from tenk.lab.results.summary import summarise_rung
from tenk.lab.results.verdict import labelled

MERGE_NOTE = (
    "Exact after merging: request, error and dropped-iteration counts, goodput, error rate, per-endpoint "
    "shares, max latency and generator CPU seconds. p50/p95/p99 are read off the sum of the segments' latency "
    "histograms (HdrHistogram, exact within 0.1 %) when every segment kept one; otherwise they are approximate: "
    "the request-weighted mean of the segments' percentiles (percentiles do not add), with the segments' lowest "
    "and highest kept as *_bounds_ms."
)


def _metric(rung: RungResult) -> str:
    return "capacity" if rung.mode == "capacity" else "rps"


def _fmt(value: float | None, digits: int = 3, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def compare_rows(a: Results, b: Results) -> list[dict[str, str]]:
    """Rungs matched by label: each side's headline figure, B against A (labelled), and each side's step
    from the rung before it, with the label its own report gives that step; the same for the target's CPU
    per request."""
    b_by_label = {rung.label: rung for rung in b.rungs}
    rows = []
    for rung_a in a.rungs:
        rung_b = b_by_label.get(rung_a.label)
        if rung_b is None:
            continue
        metric = _metric(rung_a)
        va, vb = metric_value(rung_a, metric), metric_value(rung_b, metric)
        row = {
            "rung": rung_a.label,
            "metric": metric,
            "A": f"{va:,.0f}",
            "B": f"{vb:,.0f}",
            "B vs A": describe(compare_rungs(rung_a, rung_b, metric)),
            "B vs A cpu ms/req": describe(compare_rungs(rung_a, rung_b, "cpu_ms")),
            "A p99 ms": f"{rung_a.figures.p99_ms:.1f}",
            "B p99 ms": f"{rung_b.figures.p99_ms:.1f}",
            "A step": "-",
            "B step": "-",
            "A cpu step": "-",
            "B cpu step": "-",
            "A cpu ms/req": _fmt(cpu_ms_per_request(rung_a)),
            "B cpu ms/req": _fmt(cpu_ms_per_request(rung_b)),
        }
        if rung_a.index > 0:
            for side, results in (("A", a), ("B", b)):
                step = step_judgement(results, rung_a.label)
                if step is not None:
                    row[f"{side} step"] = labelled(step.comparison)
                    row[f"{side} cpu step"] = labelled(step.cpu) if step.cpu is not None else "-"
        rows.append(row)
    return rows


# A gate must sit above the run-to-run spread of a rung's median target CPU ms per request on a 2-core
# machine (the local-cache example three times in a row: docs/results.md#2026-11-25-local-cache) and
# below the regressions worth catching (20 %).
DEFAULT_THRESHOLD = 0.10


def regressions(a: Results, b: Results, threshold: float = DEFAULT_THRESHOLD) -> list[str]:
    """Rungs where B is worse than A by at least `threshold` (0.10 = 10 %), with statistical support.

    Two figures gate: the target's CPU ms per request, valid on a shared runner (the kernel counts CPU
    time whatever the neighbours do), and the headline (capacity or goodput) when both sides are the
    target's. An invalid comparison (a ceiling that is not the target's) or an undecided one never
    fails a build.
    """
    b_by_label = {rung.label: rung for rung in b.rungs}
    found = []
    for rung_a in a.rungs:
        rung_b = b_by_label.get(rung_a.label)
        if rung_b is None:
            continue
        for metric in ("cpu_ms", _metric(rung_a)):
            comparison = compare_rungs(rung_a, rung_b, metric)
            if supports_regression(comparison, threshold, HIGHER_IS_BETTER[metric]):
                name = "target CPU ms/request" if metric == "cpu_ms" else metric
                found.append(f"{rung_a.label}: {name} {describe(comparison)}")
    return found


def provenance_warnings(a: Results, b: Results) -> list[str]:
    return differences(a.provenance, b.provenance)


def merge_results(parts: list[Results]) -> Results:
    if not parts:
        raise LabError("nothing to merge")
    names = {part.ladder for part in parts}
    if len(names) != 1:
        raise LabError(f"these results come from different ladders: {', '.join(sorted(names))}")
    counts = {len(part.rungs) for part in parts}
    if len(counts) != 1:
        raise LabError("the segments ran different numbers of rungs")
    rungs = []
    for index, rung in enumerate(parts[0].rungs):
        pieces = [part.rungs[index] for part in parts]
        if any(piece.mode == "capacity" for piece in pieces):
            raise LabError(f"rung {rung.label!r} is a capacity search; only fixed-rate rungs can be merged")
        repeat_counts = {len(piece.repeats) for piece in pieces}
        if len(repeat_counts) == 1 and 0 not in repeat_counts:
            # Repeat k of every segment ran at the same time: merge those, then take the median again.
            rungs.append(_merge_repeats(pieces))
        else:
            rungs.append(_merge_rung(pieces, keep_server_figure=False).model_copy(update={"k6_summary": {}}))
    merged = parts[0].model_copy(
        deep=True,
        update={
            "merged_from": [part.segment or part.created for part in parts],
            "merge_note": MERGE_NOTE,
            "segment": "",
            "rungs": rungs,
        },
    )
    return with_judgements(merged)


def _merge_rung(pieces: list[RungResult], keep_server_figure: bool) -> RungResult:
    """The first piece with the pieces' figures merged; its verdict says so. `keep_server_figure`:
    whether the first piece's own verdict still counts (a repeat's does; a single rung's is re-decided
    from the merged figures alone)."""
    figures = _merge_figures([piece.figures for piece in pieces])
    verdict = pieces[0].verdict
    return pieces[0].model_copy(
        deep=True,
        update={
            "figures": figures,
            "value": figures.rps,
            "server": next((piece.server for piece in pieces if piece.server.sampled), ServerSample()),
            "verdict": verdict.model_copy(
                update={
                    "generator_bound": figures.generator_bound,
                    "server_figure": (verdict.server_figure or not keep_server_figure) and not figures.generator_bound,
                    "notes": [*verdict.notes, f"merged from {len(pieces)} segments"],
                }
            ),
        },
    )


def _merge_repeats(pieces: list[RungResult]) -> RungResult:
    repeats = [
        _merge_rung([piece.repeats[k] for piece in pieces], keep_server_figure=True)
        for k in range(len(pieces[0].repeats))
    ]
    return summarise_rung(repeats)


def _merge_figures(figures: list[LoadFigures]) -> LoadFigures:
    requests = sum(f.requests for f in figures)
    errors = sum(f.errors for f in figures)
    reasons: dict[str, int] = {}
    for f in figures:
        for reason, count in f.errors_by_reason.items():
            reasons[reason] = reasons.get(reason, 0) + count

    def weighted(values: list[float]) -> float:
        return (
            round(sum(v * f.requests for v, f in zip(values, figures, strict=True)) / requests, 3) if requests else 0.0
        )

    p50s, p95s, p99s = [f.p50_ms for f in figures], [f.p95_ms for f in figures], [f.p99_ms for f in figures]
    percentiles: dict[str, object]
    if figures and all(f.latency_hdr for f in figures):
        histogram = latency.merge([f.latency_hdr for f in figures])
        percentiles = {
            "p50_ms": latency.percentile_ms(histogram, 50),
            "p95_ms": latency.percentile_ms(histogram, 95),
            "p99_ms": latency.percentile_ms(histogram, 99),
            "max_ms": latency.max_ms(histogram),
            "latency_hdr": latency.encode(histogram),
            "percentiles": "exact (merged HdrHistograms)",
        }
    else:
        percentiles = {
            "p50_ms": weighted(p50s),
            "p95_ms": weighted(p95s),
            "p99_ms": weighted(p99s),
            "max_ms": max(f.max_ms for f in figures),
            "latency_hdr": "",
            "percentiles": "approximate (request-weighted mean of the segments' percentiles)",
        }
    endpoints: dict[str, EndpointFigures] = {}
    for name, first in figures[0].endpoints.items():
        pieces = [f.endpoints[name] for f in figures if name in f.endpoints]
        count = sum(p.requests for p in pieces)
        endpoints[name] = EndpointFigures(
            requests=count,
            share=round(count / requests, 5) if requests else 0.0,
            expected_share=first.expected_share,
            p50_ms=round(sum(p.p50_ms * p.requests for p in pieces) / count, 3) if count else 0.0,
            p99_ms=round(sum(p.p99_ms * p.requests for p in pieces) / count, 3) if count else 0.0,
            error_rate=round(sum(p.error_rate * p.requests for p in pieces) / count, 6) if count else 0.0,
            mean_ms=round(sum(p.mean_ms * p.requests for p in pieces) / count, 3) if count else 0.0,
            vu_pool_ms=first.vu_pool_ms,
        )
    generator_reasons = [r for f in figures for r in f.generator_reasons]
    settings = [f.generator_settings for f in figures]
    return figures[0].model_copy(
        deep=True,
        update={
            "requests": requests,
            "errors": errors,
            "error_rate": round(errors / requests, 6) if requests else 0.0,
            "rps": round(sum(f.rps for f in figures), 2),
            "dropped": sum(f.dropped for f in figures),
            "unanswered": sum(f.unanswered for f in figures),
            "generator_cpu_s": round(sum(f.generator_cpu_s for f in figures), 3),
            "generator_cores_used": round(sum(f.generator_cores_used for f in figures), 3),
            "generator_util": max(f.generator_util for f in figures),
            "generator_cores": sum(f.generator_cores for f in figures),
            "generator_bound": any(f.generator_bound for f in figures),
            # Each segment ran on a machine of its own: the largest generator, and its settings if all agree.
            "generator_peak_rss_mb": max(f.generator_peak_rss_mb for f in figures),
            "generator_settings": settings[0] if all(s == settings[0] for s in settings) else {},
            "generator_reasons": generator_reasons,
            "segment": "merged",
            "errors_by_reason": reasons,
            "p50_bounds_ms": [min(p50s), max(p50s)],
            "p95_bounds_ms": [min(p95s), max(p95s)],
            "p99_bounds_ms": [min(p99s), max(p99s)],
            "endpoints": endpoints,
            **percentiles,
        },
    )


def write_merged(parts: list[Results], out: Path) -> Results:
    merged = merge_results(parts)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(merged.model_dump_json(indent=2))
    # Here, not at the top: the HTML report loads plotly, which `tenk lab compare` must not pay for.
    from tenk.lab.results.report import write_reports

    write_reports(merged, out)
    return merged
