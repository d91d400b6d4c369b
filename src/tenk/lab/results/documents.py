"""The shapes of the lab's JSON documents: `results.json`, and each rung, step and server sample in it.

The runner writes these, `report`, `compare` and `merge` read them; all of them are typed by
these definitions (mypy checks every key), and `load_results` validates a file against them
with pydantic before anything reads it, so a damaged or foreign file fails with the field named
instead of a KeyError deep in a report. The figures inside are `LoadFigures.to_json()`.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

# pydantic validates TypedDicts only from typing_extensions before Python 3.12.
from pydantic import TypeAdapter
from typing_extensions import TypedDict

from tenk.lab.results.figures import LoadFigures


class EstimateDoc(TypedDict):
    median: float
    low: float
    high: float
    values: list[float]


class BottleneckDoc(TypedDict):
    kind: str
    name: str
    cpus: list[int]
    detail: str


class VerdictDoc(TypedDict):
    server_figure: bool
    generator_bound: bool
    slo_met: bool
    notes: list[str]
    ceiling: NotRequired[str]


class EndpointDoc(TypedDict):
    requests: int
    share: float
    expected_share: float
    p50_ms: float
    p99_ms: float
    error_rate: float


class FiguresDoc(TypedDict):
    engine: str
    offered_rps: float
    duration_s: float
    requests: int
    rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    errors: int
    error_rate: float
    dropped: int
    generator_cpu_s: float
    generator_cores_used: float
    generator_util: float
    generator_cores: int
    generator_bound: bool
    generator_reasons: list[str]
    endpoints: dict[str, EndpointDoc]
    segment: str
    errors_by_reason: NotRequired[dict[str, int]]
    latency_hdr: NotRequired[str]
    seconds: NotRequired[list[dict[str, float]]]
    # After a merge: how the percentiles were obtained, and the segments' extremes.
    percentiles: NotRequired[str]
    p50_bounds_ms: NotRequired[list[float]]
    p95_bounds_ms: NotRequired[list[float]]
    p99_bounds_ms: NotRequired[list[float]]


class ServerDoc(TypedDict, total=False):
    cpu_cores_mean: float
    cpu_cores_max: float
    rss_mb_max: float
    rss_mb_last: float
    processes: int
    neighbour_cores_mean: float
    target_cpus: list[int]
    roles_cores_mean: dict[str, float]
    role_cpus: dict[str, list[int]]
    core_busy_mean: dict[str, float]
    series: list[dict[str, float]]
    upstream: dict[str, Any]
    ingest: dict[str, Any]
    gauges: dict[str, Any]


class StepDoc(TypedDict):
    rate: float
    passed: bool
    reasons: list[str]
    figures: FiguresDoc
    server: ServerDoc


class CapacityDoc(TypedDict):
    capacity: float
    converged: bool
    limited_by: list[str]
    generator_limited: bool
    plan: str
    elapsed_s: float
    steps: list[StepDoc]


class MetricsDoc(TypedDict):
    scraped: bool
    delta: dict[str, float]
    gauges: NotRequired[dict[str, float]]


class RungDoc(TypedDict):
    index: int
    label: str
    changed: str
    changes: list[str]
    multi_variable: bool
    allow_multi: NotRequired[bool]
    config: dict[str, Any]
    mode: Literal["capacity", "rate"]
    value: float
    figures: FiguresDoc
    server: ServerDoc
    capacity: CapacityDoc | None
    metrics: NotRequired[MetricsDoc]
    k6_summary: NotRequired[dict[str, Any]]
    verdict: VerdictDoc
    elapsed_s: NotRequired[float]
    bottleneck: NotRequired[BottleneckDoc]
    cpu_ms: NotRequired[dict[str, float]]
    projected_rps_per_core: NotRequired[float | None]
    # One repeat's document carries its number and what was reset before it;
    repeat: NotRequired[int]
    reset: NotRequired[list[str]]
    # a rung's summary carries every repeat and the median with its interval.
    repeats: NotRequired[list[RungDoc]]
    estimate: NotRequired[EstimateDoc]
    cpu_ms_estimate: NotRequired[EstimateDoc | None]
    bottlenecks: NotRequired[list[str]]


class ClaimDoc(TypedDict):
    text: str
    source: str
    from_rung: str
    to_rung: str
    metric: str
    claimed_ratio: float | None
    expect: NotRequired[list[str]]


class ResultsDoc(TypedDict):
    ladder: str
    description: NotRequired[str]
    source: NotRequired[str]
    created: str
    segment: NotRequired[str]
    repeats: NotRequired[int]
    elapsed_s: NotRequired[float]
    time_bound_s: NotRequired[float]
    provenance: NotRequired[dict[str, Any]]
    claims: list[ClaimDoc]
    rungs: list[RungDoc]
    merged_from: NotRequired[list[str]]
    merge_note: NotRequired[str]


_FIGURES = TypeAdapter(FiguresDoc)
_RUNG = TypeAdapter(RungDoc)
_RESULTS = TypeAdapter(ResultsDoc)


def figures_doc(figures: LoadFigures) -> FiguresDoc:
    return _FIGURES.validate_python(figures.to_json())


def rung_doc(data: dict[str, Any]) -> RungDoc:
    """A rung document checked against `RungDoc` as it is made: what is written is what is read."""
    return _RUNG.validate_python(data)


def results_doc(data: dict[str, Any]) -> ResultsDoc:
    return _RESULTS.validate_python(data)


def results_from_json(text: bytes) -> ResultsDoc:
    return _RESULTS.validate_json(text)
