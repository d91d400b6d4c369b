"""`tenk lab compare` (per-rung ratios between two result folders) and `tenk lab merge` (segments
run on several generator machines, folded into one result)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenk.lab.errors import LabError
from tenk.lab.k6 import figures_from_summary
from tenk.lab.mixes import Mix
from tenk.lab.report import cpu_ms_per_request, metric_value, write_reports

MERGE_NOTE = (
    "Exact after merging: request, error and dropped-iteration counts, achieved RPS, error rate, per-endpoint "
    "shares, max latency and generator CPU seconds. Approximate: p50/p95/p99, merged as the request-weighted mean "
    "of the segments' percentiles (percentiles do not add); the true value lies between the segments' lowest and "
    "highest, kept as *_bounds_ms."
)


def load_results(folder: Path) -> dict[str, Any]:
    path = folder / "results.json" if folder.is_dir() else folder
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise LabError(f"{path}: not a lab results.json ({exc})") from None
    return data


def _metric(rung: dict[str, Any]) -> str:
    return "capacity" if rung["mode"] == "capacity" else "rps"


def _step(value: float | None, previous: float | None) -> float | None:
    return value / previous if value is not None and previous else None


def _fmt(value: float | None, digits: int = 3, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, str]]:
    """Rungs matched by label: each side's headline figure, B/A, and each side's rung-to-rung ratio,
    for the headline (capacity or RPS) and for the target's CPU per request."""
    b_by_label = {rung["label"]: rung for rung in b["rungs"]}
    rows = []
    previous: tuple[dict[str, Any], dict[str, Any]] | None = None
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


def merge_results(parts: list[dict[str, Any]]) -> dict[str, Any]:
    if not parts:
        raise LabError("nothing to merge")
    names = {part["ladder"] for part in parts}
    if len(names) != 1:
        raise LabError(f"these results come from different ladders: {', '.join(sorted(names))}")
    counts = {len(part["rungs"]) for part in parts}
    if len(counts) != 1:
        raise LabError("the segments ran different numbers of rungs")
    merged = copy.deepcopy(parts[0])
    merged["merged_from"] = [part.get("segment") or part.get("created") for part in parts]
    merged["merge_note"] = MERGE_NOTE
    merged["segment"] = ""
    for index, rung in enumerate(merged["rungs"]):
        pieces = [part["rungs"][index] for part in parts]
        if any(piece["mode"] == "capacity" for piece in pieces):
            raise LabError(f"rung {rung['label']!r} is a capacity search; only fixed-rate rungs can be merged")
        rung["figures"] = _merge_figures([piece["figures"] for piece in pieces])
        rung["value"] = rung["figures"]["rps"]
        rung["server"] = next((piece["server"] for piece in pieces if piece.get("server")), {})
        rung["k6_summary"] = {}
        rung["verdict"] = copy.deepcopy(rung["verdict"])
        rung["verdict"]["generator_bound"] = rung["figures"]["generator_bound"]
        rung["verdict"]["server_figure"] = not rung["figures"]["generator_bound"]
        rung["verdict"]["notes"] = [*rung["verdict"]["notes"], f"merged from {len(pieces)} segments"]
    return merged


def _merge_figures(figures: list[dict[str, Any]]) -> dict[str, Any]:
    requests = sum(f["requests"] for f in figures)
    errors = sum(f["errors"] for f in figures)
    out = copy.deepcopy(figures[0])
    out.update(
        requests=requests,
        errors=errors,
        error_rate=round(errors / requests, 6) if requests else 0.0,
        rps=round(sum(f["rps"] for f in figures), 2),
        dropped=sum(f["dropped"] for f in figures),
        max_ms=max(f["max_ms"] for f in figures),
        generator_cpu_s=round(sum(f["generator_cpu_s"] for f in figures), 3),
        generator_cores_used=round(sum(f["generator_cores_used"] for f in figures), 3),
        generator_util=max(f["generator_util"] for f in figures),
        generator_cores=sum(f["generator_cores"] for f in figures),
        generator_bound=any(f["generator_bound"] for f in figures),
        generator_reasons=[r for f in figures for r in f["generator_reasons"]],
        segment="merged",
    )
    for key in ("p50_ms", "p95_ms", "p99_ms"):
        values = [f[key] for f in figures]
        weighted = sum(f[key] * f["requests"] for f in figures) / requests if requests else 0.0
        out[key] = round(weighted, 3)
        out[f"{key.removesuffix('_ms')}_bounds_ms"] = [min(values), max(values)]
    endpoints: dict[str, Any] = {}
    for name in figures[0]["endpoints"]:
        pieces = [f["endpoints"][name] for f in figures if name in f["endpoints"]]
        count = sum(p["requests"] for p in pieces)
        endpoints[name] = {
            "requests": count,
            "share": round(count / requests, 5) if requests else 0.0,
            "expected_share": pieces[0]["expected_share"],
            "p50_ms": round(sum(p["p50_ms"] * p["requests"] for p in pieces) / count, 3) if count else 0.0,
            "p99_ms": round(sum(p["p99_ms"] * p["requests"] for p in pieces) / count, 3) if count else 0.0,
            "error_rate": round(sum(p["error_rate"] * p["requests"] for p in pieces) / count, 6) if count else 0.0,
        }
    out["endpoints"] = endpoints
    return out


def write_merged(parts: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    merged = merge_results(parts)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(merged, indent=2))
    write_reports(merged, out)
    return merged


def result_from_summary(summary: dict[str, Any], mix: Mix, rate: float, duration_s: float) -> dict[str, Any]:
    """A one-rung result from a raw k6 summary, such as a k6-operator runner pod prints to stdout.

    The generator's cost is unknown there (it ran elsewhere), so it reads as zero.
    """
    figures = figures_from_summary(summary, mix, rate, duration_s)
    rung = {
        "index": 0, "label": mix.name, "changed": "baseline", "changes": [], "multi_variable": False,
        "allow_multi": False, "config": {"mix": mix.name, "rate": rate, "duration_s": duration_s, "slo_p99_ms": 100},
        "mode": "rate", "value": figures.rps, "figures": figures.to_json(), "server": {}, "capacity": None,
        "metrics": {"scraped": False, "delta": {}}, "k6_summary": summary,
        "verdict": {"server_figure": True, "generator_bound": figures.dropped > 0, "slo_met": True, "notes": []},
    }  # fmt: skip
    created = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return {
        "ladder": f"{mix.name}-k6",
        "description": "k6 summaries",
        "created": created,
        "claims": [],
        "rungs": [rung],
    }


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
