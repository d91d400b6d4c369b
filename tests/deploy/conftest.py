"""The deploy checks run real `tenk serve` and `tenk worker` processes (the ingest suite's worker fixture is
reused), and plan from result folders written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenk.lab.definition.mixes import load_mix
from tenk.lab.documents import EndpointFigures, LoadFigures, Results, RungResult, ServerSample, Verdict
from tests.ingest.conftest import spawn_worker

__all__ = ["REALISTIC", "results", "spawn_worker"]

REALISTIC = load_mix("realistic")


def _rung(index: int, mix: str, rps: float, cores: float, p99_ms: float, rss_mb: float = 300.0) -> RungResult:
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


@pytest.fixture
def results(tmp_path: Path) -> Path:
    run = tmp_path / "results" / "realistic-20260101T000000Z"
    run.mkdir(parents=True)
    rungs = [
        _rung(0, "realistic", rps=2000, cores=0.5, p99_ms=30),  # 0.25 CPU ms/req
        _rung(1, "realistic", rps=2000, cores=0.8, p99_ms=40),  # 0.40 CPU ms/req: the costliest that qualifies
        _rung(2, "realistic", rps=2000, cores=1.6, p99_ms=90),  # misses a 50 ms p99
        _rung(3, "product", rps=2000, cores=2.0, p99_ms=10),  # another mix
    ]
    results = Results(ladder="t", created="20260101T000000Z", claims=[], rungs=rungs)
    (run / "results.json").write_text(results.model_dump_json(indent=2))
    return run.parent
