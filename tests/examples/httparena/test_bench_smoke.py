"""`make bench-httparena` end to end, for seconds: the crud profile's two entries validated, measured by the
lab in both phases, and the summary stating the issue's crud targets. Its figures are not measurements."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.bench_httparena import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_bench_runs_crud_end_to_end_and_judges_the_targets(tmp_path: Path) -> None:
    out = tmp_path / "out"
    main(["--smoke", "--quiet", "--profiles", "crud", "--entries", "tenk", "fastapi-crud", "--out", str(out)])
    summary = (out / "summary.md").read_text()
    assert "| tenk |" in summary
    assert "| fastapi-crud |" in summary
    assert "crud, tenk: capacity at least 2x the stock FastAPI entry's:" in summary
    assert "crud, tenk: CPU a request at most 0.5x the stock FastAPI entry's:" in summary
    assert len(list(out.glob("httparena-crud-capacity-*/results.json"))) == 1
    assert len(list(out.glob("httparena-crud-cpu-*/report.md"))) == 1
