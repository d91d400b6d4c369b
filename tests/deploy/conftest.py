"""Fixtures of the deploy checks: result folders to plan from (`tenk serve` and `tenk worker` come from
tests.support)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenk.lab.documents import Results
from tests.deploy.rungs import rung_result


@pytest.fixture
def results(tmp_path: Path) -> Path:
    run = tmp_path / "results" / "realistic-20260101T000000Z"
    run.mkdir(parents=True)
    rungs = [
        rung_result(0, "realistic", rps=2000, cores=0.5, p99_ms=30),  # 0.25 CPU ms/req
        rung_result(1, "realistic", rps=2000, cores=0.8, p99_ms=40),  # 0.40 CPU ms/req: the costliest that qualifies
        rung_result(2, "realistic", rps=2000, cores=1.6, p99_ms=90),  # misses a 50 ms p99
        rung_result(3, "product", rps=2000, cores=2.0, p99_ms=10),  # another mix
    ]
    results = Results(ladder="t", created="20260101T000000Z", claims=[], rungs=rungs)
    (run / "results.json").write_text(results.model_dump_json(indent=2))
    return run.parent
