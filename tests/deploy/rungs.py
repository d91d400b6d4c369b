"""Rung results as a ladder run would write them, for the planner's tests."""

from __future__ import annotations

from tenk.lab.definition.mixes import load_mix
from tenk.lab.documents import EndpointFigures, LoadFigures, RungResult, ServerSample, Verdict

REALISTIC = load_mix("realistic")


def rung_result(index: int, mix: str, rps: float, cores: float, p99_ms: float, rss_mb: float = 300.0) -> RungResult:
    endpoints = {
        e.name: EndpointFigures(
            requests=1000, share=e.share, expected_share=e.share, p50_ms=2.0,
            p99_ms=20.0 if e.kind in ("db", "write", "search") else 5.0, error_rate=0.0,
        )
        for e in REALISTIC.endpoints
    }  # fmt: skip
    figures = LoadFigures(
        engine="k6", offered_rps=rps, duration_s=10.0, requests=int(rps * 10), rps=rps, p50_ms=2.0,
        p95_ms=p99_ms / 2, p99_ms=p99_ms, max_ms=p99_ms * 2, errors=0, error_rate=0.0, dropped=0,
        generator_cpu_s=1.0, generator_cores_used=0.1, generator_util=0.1, generator_cores=1, generator_bound=False,
        endpoints=endpoints,
    )  # fmt: skip
    return RungResult(
        index=index, label=f"rung{index}", changed="baseline", changes=[], multi_variable=False,
        config={"mix": mix, "workers": 1}, mode="rate", value=rps, figures=figures,
        server=ServerSample(cpu_cores_mean=cores, rss_mb_max=rss_mb),
        verdict=Verdict(server_figure=True, generator_bound=False, slo_met=True, notes=[]),
    )  # fmt: skip
