"""What one load run measured, in the engine-independent shape every report and merge reads."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class EndpointFigures:
    requests: int
    share: float
    expected_share: float
    p50_ms: float
    p99_ms: float
    error_rate: float


@dataclass
class LoadFigures:
    engine: str  # "k6" (open loop) or "wrk" (closed loop)
    offered_rps: float  # the arrival rate asked for; 0 for closed-loop runs
    duration_s: float
    requests: int
    rps: float  # goodput: only requests answered with an expected status count
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
    generator_reasons: list[str] = field(default_factory=list)
    endpoints: dict[str, EndpointFigures] = field(default_factory=dict)
    segment: str = ""
    # Failed requests by reason: "status_503", "timeout", "refused", "reset", "network", ...
    errors_by_reason: dict[str, int] = field(default_factory=dict)
    # Every request's latency as an encoded HdrHistogram (fixed-rate runs; see tenk.lab.results.latency).
    latency_hdr: str = ""
    # Fixed-rate runs: each second's offered rate, goodput, errors and p99 (the live view's figures).
    seconds: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LoadFigures:
        endpoints = {name: EndpointFigures(**figures) for name, figures in data.get("endpoints", {}).items()}
        return cls(**{**data, "endpoints": endpoints})
