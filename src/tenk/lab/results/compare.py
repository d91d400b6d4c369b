"""`tenk lab compare` (per-rung ratios between two result folders) and `tenk lab merge` (segments
run on several generator machines, folded into one result)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tenk.lab.definition.mixes import Mix
from tenk.lab.driving.k6 import figures_from_summary
from tenk.lab.errors import LabError
from tenk.lab.results import latency
from tenk.lab.results.documents import (
    EndpointDoc,
    FiguresDoc,
    MetricsDoc,
    ResultsDoc,
    RungDoc,
    ServerDoc,
    VerdictDoc,
    figures_doc,
    results_from_json,
)
from tenk.lab.results.provenance import differences
from tenk.lab.results.report import HIGHER_IS_BETTER, compare_rungs, cpu_ms_per_request, metric_value, write_reports
from tenk.lab.results.stats import supports_regression
from tenk.lab.results.summary import summarise_rung

MERGE_NOTE = (
    "Exact after merging: request, error and dropped-iteration counts, goodput, error rate, per-endpoint "
    "shares, max latency and generator CPU seconds. p50/p95/p99 are read off the sum of the segments' latency "
    "histograms (HdrHistogram, exact within 0.1 %) when every segment kept one; otherwise they are approximate: "
    "the request-weighted mean of the segments' percentiles (percentiles do not add), with the segments' lowest "
    "and highest kept as *_bounds_ms."
)


def load_results(folder: Path) -> ResultsDoc:
    """A results.json, checked against its documented shape before anything reads it."""
    path = folder / "results.json" if folder.is_dir() else folder
    try:
        return results_from_json(path.read_bytes())
    except OSError as exc:
        raise LabError(f"{path}: not a lab results.json ({exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise LabError(f"{path}: not a lab results.json: {where}: {first['msg']}") from None


def _metric(rung: RungDoc) -> str:
    return "capacity" if rung["mode"] == "capacity" else "rps"


def _step(value: float | None, previous: float | None) -> float | None:
    return value / previous if value is not None and previous else None


def _fmt(value: float | None, digits: int = 3, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def compare_rows(a: ResultsDoc, b: ResultsDoc) -> list[dict[str, str]]:
    """Rungs matched by label: each side's headline figure, B/A, and each side's rung-to-rung ratio,
    for the headline (capacity or RPS) and for the target's CPU per request."""
    b_by_label = {rung["label"]: rung for rung in b["rungs"]}
    rows = []
    previous: tuple[RungDoc, RungDoc] | None = None
    for rung_a in a["rungs"]:
        rung_b = b_by_label.get(rung_a["label"])
        if rung_b is None:
            continue
        metric = _metric(rung_a)
        va, vb = metric_value(rung_a, metric), metric_value(rung_b, metric)
        row = {
            "rung": rung_a["label"],
            "metric": metric,
            "A": f"{va:,.0f}",
            "B": f"{vb:,.0f}",
            "B/A": f"{vb / va:.3f}" if va else "-",
            "B vs A": compare_rungs(rung_a, rung_b, metric).show(),
            "B vs A cpu ms/req": compare_rungs(rung_a, rung_b, "cpu_ms").show(),
            "A p99 ms": f"{rung_a['figures']['p99_ms']:.1f}",
            "B p99 ms": f"{rung_b['figures']['p99_ms']:.1f}",
            "A step": "-",
            "B step": "-",
            "step diff": "-",
            "A cpu ms/req": _fmt(cpu_ms_per_request(rung_a)),
            "B cpu ms/req": _fmt(cpu_ms_per_request(rung_b)),
            "A cpu step": "-",
            "B cpu step": "-",
            "cpu step diff": "-",
        }
        if previous is not None:
            pa, pb = metric_value(previous[0], metric), metric_value(previous[1], metric)
            if pa and pb:
                ra, rb = va / pa, vb / pb
                row["A step"] = f"{ra:.3f}x"
                row["B step"] = f"{rb:.3f}x"
                row["step diff"] = f"{(rb - ra) / ra:+.1%}" if ra else "-"
            ca = _step(cpu_ms_per_request(rung_a), cpu_ms_per_request(previous[0]))
            cb = _step(cpu_ms_per_request(rung_b), cpu_ms_per_request(previous[1]))
            row["A cpu step"] = _fmt(ca, suffix="x")
            row["B cpu step"] = _fmt(cb, suffix="x")
            row["cpu step diff"] = f"{(cb - ca) / ca:+.1%}" if ca and cb else "-"
        rows.append(row)
        previous = (rung_a, rung_b)
    return rows


def regressions(a: ResultsDoc, b: ResultsDoc, threshold: float) -> list[str]:
    """Rungs where B is worse than A by at least `threshold` (0.05 = 5 %), with statistical support.

    Only the headline (capacity or goodput) gates: a comparison that is invalid (a ceiling that is
    not the target's) or undecided never fails a build.
    """
    b_by_label = {rung["label"]: rung for rung in b["rungs"]}
    found = []
    for rung_a in a["rungs"]:
        rung_b = b_by_label.get(rung_a["label"])
        if rung_b is None:
            continue
        metric = _metric(rung_a)
        comparison = compare_rungs(rung_a, rung_b, metric)
        if supports_regression(comparison, threshold, HIGHER_IS_BETTER[metric]):
            found.append(f"{rung_a['label']}: {metric} {comparison.show()}")
    return found


def provenance_warnings(a: ResultsDoc, b: ResultsDoc) -> list[str]:
    return differences(a.get("provenance") or {}, b.get("provenance") or {})


def merge_results(parts: list[ResultsDoc]) -> ResultsDoc:
    if not parts:
        raise LabError("nothing to merge")
    names = {part["ladder"] for part in parts}
    if len(names) != 1:
        raise LabError(f"these results come from different ladders: {', '.join(sorted(names))}")
    counts = {len(part["rungs"]) for part in parts}
    if len(counts) != 1:
        raise LabError("the segments ran different numbers of rungs")
    merged = copy.deepcopy(parts[0])
    merged["merged_from"] = [part.get("segment") or part["created"] for part in parts]
    merged["merge_note"] = MERGE_NOTE
    merged["segment"] = ""
    for index, rung in enumerate(merged["rungs"]):
        pieces = [part["rungs"][index] for part in parts]
        if any(piece["mode"] == "capacity" for piece in pieces):
            raise LabError(f"rung {rung['label']!r} is a capacity search; only fixed-rate rungs can be merged")
        repeat_counts = {len(piece.get("repeats") or []) for piece in pieces}
        if len(repeat_counts) == 1 and 0 not in repeat_counts:
            # Repeat k of every segment ran at the same time: merge those, then take the median again.
            merged["rungs"][index] = _merge_repeats(pieces)
            continue
        rung["figures"] = _merge_figures([piece["figures"] for piece in pieces])
        rung["value"] = rung["figures"]["rps"]
        rung["server"] = next((piece["server"] for piece in pieces if piece.get("server")), ServerDoc())
        rung["k6_summary"] = {}
        rung["verdict"] = copy.deepcopy(rung["verdict"])
        rung["verdict"]["generator_bound"] = rung["figures"]["generator_bound"]
        rung["verdict"]["server_figure"] = not rung["figures"]["generator_bound"]
        rung["verdict"]["notes"] = [*rung["verdict"]["notes"], f"merged from {len(pieces)} segments"]
    return merged


def _merge_repeats(pieces: list[RungDoc]) -> RungDoc:
    repeats: list[RungDoc] = []
    for k in range(len(pieces[0].get("repeats", []))):
        same = [piece.get("repeats", [])[k] for piece in pieces]
        repeat = copy.deepcopy(same[0])
        repeat["figures"] = _merge_figures([r["figures"] for r in same])
        repeat["value"] = repeat["figures"]["rps"]
        repeat["server"] = next((r["server"] for r in same if r.get("server")), ServerDoc())
        verdict = repeat["verdict"]
        verdict["generator_bound"] = repeat["figures"]["generator_bound"]
        verdict["server_figure"] = verdict["server_figure"] and not repeat["figures"]["generator_bound"]
        verdict["notes"] = [*verdict["notes"], f"merged from {len(pieces)} segments"]
        repeats.append(repeat)
    return summarise_rung(repeats)


def _merge_figures(figures: list[FiguresDoc]) -> FiguresDoc:
    requests = sum(f["requests"] for f in figures)
    errors = sum(f["errors"] for f in figures)
    out = copy.deepcopy(figures[0])
    out["requests"] = requests
    out["errors"] = errors
    out["error_rate"] = round(errors / requests, 6) if requests else 0.0
    out["rps"] = round(sum(f["rps"] for f in figures), 2)
    out["dropped"] = sum(f["dropped"] for f in figures)
    out["max_ms"] = max(f["max_ms"] for f in figures)
    out["generator_cpu_s"] = round(sum(f["generator_cpu_s"] for f in figures), 3)
    out["generator_cores_used"] = round(sum(f["generator_cores_used"] for f in figures), 3)
    out["generator_util"] = max(f["generator_util"] for f in figures)
    out["generator_cores"] = sum(f["generator_cores"] for f in figures)
    out["generator_bound"] = any(f["generator_bound"] for f in figures)
    out["generator_reasons"] = [r for f in figures for r in f["generator_reasons"]]
    out["segment"] = "merged"
    reasons: dict[str, int] = {}
    for f in figures:
        for reason, count in f.get("errors_by_reason", {}).items():
            reasons[reason] = reasons.get(reason, 0) + count
    out["errors_by_reason"] = reasons

    def weighted(values: list[float]) -> float:
        return (
            round(sum(v * f["requests"] for v, f in zip(values, figures, strict=True)) / requests, 3)
            if requests
            else 0.0
        )

    p50s, p95s, p99s = [f["p50_ms"] for f in figures], [f["p95_ms"] for f in figures], [f["p99_ms"] for f in figures]
    out["p50_ms"], out["p95_ms"], out["p99_ms"] = weighted(p50s), weighted(p95s), weighted(p99s)
    out["p50_bounds_ms"], out["p95_bounds_ms"] = [min(p50s), max(p50s)], [min(p95s), max(p95s)]
    out["p99_bounds_ms"] = [min(p99s), max(p99s)]
    if figures and all(f.get("latency_hdr") for f in figures):
        histogram = latency.merge([f.get("latency_hdr", "") for f in figures])
        out["p50_ms"] = latency.percentile_ms(histogram, 50)
        out["p95_ms"] = latency.percentile_ms(histogram, 95)
        out["p99_ms"] = latency.percentile_ms(histogram, 99)
        out["max_ms"] = latency.max_ms(histogram)
        out["latency_hdr"] = latency.encode(histogram)
        out["percentiles"] = "exact (merged HdrHistograms)"
    else:
        out["latency_hdr"] = ""
        out["percentiles"] = "approximate (request-weighted mean of the segments' percentiles)"
    endpoints: dict[str, EndpointDoc] = {}
    for name in figures[0]["endpoints"]:
        pieces = [f["endpoints"][name] for f in figures if name in f["endpoints"]]
        count = sum(p["requests"] for p in pieces)
        endpoints[name] = EndpointDoc(
            requests=count,
            share=round(count / requests, 5) if requests else 0.0,
            expected_share=pieces[0]["expected_share"],
            p50_ms=round(sum(p["p50_ms"] * p["requests"] for p in pieces) / count, 3) if count else 0.0,
            p99_ms=round(sum(p["p99_ms"] * p["requests"] for p in pieces) / count, 3) if count else 0.0,
            error_rate=round(sum(p["error_rate"] * p["requests"] for p in pieces) / count, 6) if count else 0.0,
        )
    out["endpoints"] = endpoints
    return out


def write_merged(parts: list[ResultsDoc], out: Path) -> ResultsDoc:
    merged = merge_results(parts)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(merged, indent=2))
    write_reports(merged, out)
    return merged


def result_from_summary(summary: dict[str, Any], mix: Mix, rate: float, duration_s: float) -> ResultsDoc:
    """A one-rung result from a raw k6 summary, such as a k6-operator runner pod prints to stdout.

    The generator's cost is unknown there (it ran elsewhere), so it reads as zero.
    """
    figures = figures_from_summary(summary, mix, rate, duration_s)
    rung = RungDoc(
        index=0, label=mix.name, changed="baseline", changes=[], multi_variable=False, allow_multi=False,
        config={"mix": mix.name, "rate": rate, "duration_s": duration_s, "slo_p99_ms": 100},
        mode="rate", value=figures.rps, figures=figures_doc(figures), server=ServerDoc(), capacity=None,
        metrics=MetricsDoc(scraped=False, delta={}), k6_summary=summary,
        verdict=VerdictDoc(server_figure=True, generator_bound=figures.dropped > 0, slo_met=True, notes=[]),
    )  # fmt: skip
    created = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return ResultsDoc(ladder=f"{mix.name}-k6", description="k6 summaries", created=created, claims=[], rungs=[rung])


def load_summary(path: Path) -> dict[str, Any]:
    """A k6 summary JSON file, or a runner's log whose last JSON line is the summary."""
    text = path.read_text()
    for candidate in [text, *reversed(text.splitlines())]:
        candidate = candidate.strip()
        if candidate.startswith("{") and '"metrics"' in candidate:
            try:
                data: dict[str, Any] = json.loads(candidate)
                return data
            except ValueError:
                continue
    raise LabError(f"{path}: no k6 summary JSON in it")
