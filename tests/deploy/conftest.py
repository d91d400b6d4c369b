"""The deploy checks run real `tenk serve` and `tenk worker` processes (the ingest suite's worker fixture is
reused), and plan from result folders written here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tenk.lab.definition.mixes import load_mix
from tests.ingest.conftest import spawn_worker

__all__ = ["REALISTIC", "results", "spawn_worker"]

REALISTIC = load_mix("realistic")


def _rung(index: int, mix: str, rps: float, cores: float, p99_ms: float, rss_mb: float = 300.0) -> dict[str, Any]:
    endpoints = {
        e.name: {
            "requests": 1000,
            "share": e.share,
            "expected_share": e.share,
            "p50_ms": 2.0,
            "p99_ms": 20.0 if e.kind in ("db", "write", "search") else 5.0,
            "error_rate": 0.0,
        }
        for e in REALISTIC.endpoints
    }
    return {
        "index": index,
        "label": f"rung{index}",
        "config": {"mix": mix, "workers": 1},
        "figures": {"rps": rps, "p99_ms": p99_ms, "endpoints": endpoints},
        "server": {"cpu_cores_mean": cores, "rss_mb_max": rss_mb},
        "verdict": {"server_figure": True},
    }


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
    (run / "results.json").write_text(json.dumps({"ladder": "t", "rungs": rungs}))
    return run.parent
