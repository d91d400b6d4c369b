"""Figures derived from a results document: each rung's headline figure and CPU per request, the
comparison of one rung with another, and the check of a claim's expectations. Numbers, not pages: the
markdown and HTML reports, `tenk lab compare` and `tenk lab plan` all read them from here."""

from __future__ import annotations

from tenk.lab.definition import expectations
from tenk.lab.documents import Claim, RungResult, ServerSample
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


def headline_metric(rung: RungResult) -> str:
    return "capacity" if rung.mode == "capacity" else "rps"


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
