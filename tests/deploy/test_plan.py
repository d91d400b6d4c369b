"""`tenk lab plan` on result folders this test writes: each figure's value follows from the measurement
it cites, and the emitted patch fits the Kustomize base."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from tenk.cli import main
from tenk.lab.errors import LabError
from tenk.lab.results.plan import make_plan
from tests.deploy.rungs import REALISTIC


@pytest.fixture
def ingest_file(tmp_path: Path) -> Path:
    path = tmp_path / "ingest.json"
    path.write_text(json.dumps([{"drain": {"rows_per_s": r}} for r in (40_000, 50_000, 60_000)]))
    return path


def test_plan_sizes_api_from_the_costliest_qualifying_rung_and_cites_it(results: Path, ingest_file: Path) -> None:
    plan = make_plan(100_000, "realistic", 50, results, ingest_file)
    by_name = {f.name: f for f in plan.figures}

    cpu = by_name["api_cpu_ms_per_request"]
    assert (cpu.value, cpu.basis) == (0.4, "measured")
    assert cpu.source == "realistic-20260101T000000Z, rung 2 (rung1)"
    assert by_name["api_cores"].value == 40.0
    assert by_name["api_cores"].basis == "projected"
    assert by_name["api_processes"].value == math.ceil(40 / 0.6)
    assert by_name["api_memory_request_mb"].value == 384  # 300 MB x 1.25, rounded up to 64 MiB

    # Little's law: db, write and search endpoints each hold a connection for their p99 (20 ms).
    postgres_share = sum(e.share for e in REALISTIC.endpoints if e.kind in ("db", "write", "search"))
    in_use = by_name["postgres_connections_in_use"].value
    assert in_use == pytest.approx(100_000 * postgres_share * 0.020, abs=0.1)
    pool = by_name["db_pool_max"].value
    assert pool == max(4, math.ceil(in_use / by_name["api_processes"].value) + 2)
    assert by_name["postgres_max_connections"].value == pool * by_name["api_processes"].value

    ingest_share = sum(e.share for e in REALISTIC.endpoints if e.kind == "ingest")
    assert by_name["ingest_events_per_s"].value == pytest.approx(100_000 * ingest_share, abs=0.1)
    assert by_name["worker_rows_per_s"].value == 50_000
    assert by_name["worker_rows_per_s"].source.startswith("ingest.json")
    assert by_name["ingest_workers"].value == math.ceil(by_name["ingest_events_per_s"].value / (50_000 * 0.7))
    assert by_name["redis_backlog_mb"].basis == "projected"
    assert all(f.source and f.how for f in plan.figures)
    assert any("product cache" in item for item in plan.not_measured)


def test_plan_without_a_drain_measurement_gives_no_worker_count(results: Path) -> None:
    plan = make_plan(10_000, "realistic", 50, results)
    assert "ingest_workers" not in {f.name for f in plan.figures}
    assert any("ingest workers" in item for item in plan.not_measured)


def test_plan_refuses_when_no_rung_measured_the_mix_under_the_slo(results: Path) -> None:
    with pytest.raises(LabError, match="no rung of mix 'realistic' with p99 <= 5 ms"):
        make_plan(10_000, "realistic", 5, results)


def test_lab_plan_command_prints_each_figure_with_its_basis(results: Path) -> None:
    out = CliRunner().invoke(main, ["lab", "plan", "--rps", "100000", "--mix", "realistic", "--results", str(results)])
    assert out.exit_code == 0, out.output
    assert "api_processes: 67 processes (1 core each)  [projected: realistic-20260101T000000Z, rung 2" in out.output
    assert "not measured" in out.output


def test_lab_plan_rejects_a_non_positive_rate(results: Path) -> None:
    out = CliRunner().invoke(main, ["lab", "plan", "--rps", "0", "--results", str(results)])
    assert out.exit_code == 2
    assert "--rps" in out.output
