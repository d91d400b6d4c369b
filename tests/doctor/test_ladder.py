"""The ladder doctor writes loads with the lab's own parser, one variable per rung."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tenk.doctor import diagnose
from tenk.doctor.ladder import LadderError, write_ladder
from tenk.lab.definition.ladder import load_ladder
from tests.doctor.expectations import BASELINES, FIXTURES


def test_baseline_ladder_loads_and_changes_one_variable_per_rung(tmp_path: Path) -> None:
    report = diagnose(f"{BASELINES}.naive_blocking:app")
    ladder = load_ladder(write_ladder(report, tmp_path / "ladder.toml"))
    assert ladder.rungs[0].config.target == "baseline:naive_blocking"
    # Both cores from the first rung: the workers rung has the cores its second worker needs.
    assert ladder.defaults.cpus == "0-1"
    assert all(len(rung.changes) == 1 for rung in ladder.rungs[1:])
    assert [rung.label for rung in ladder.rungs] == ["as it is", "access log off", "2 workers", "granian"]
    assert {claim.source for claim in ladder.claims} == {"003_15a8e742bae16626.txt", "001_1f6846444dcf4a5a.txt"}


def test_a_baseline_ladder_starts_low_and_runs_the_vendor_fast_enough_for_the_slo(tmp_path: Path) -> None:
    report = diagnose(f"{BASELINES}.naive_blocking:app")
    ladder = load_ladder(write_ladder(report, tmp_path / "ladder.toml"))
    first = ladder.rungs[0].config
    # The ladder study's v1 served 1.68 req/s: a search that starts at 200 finds no passing step at all.
    assert first.start_rate <= 10
    # The default vendor's p99 (400 ms) alone would break a 100 ms p99 on every rung.
    assert first.upstream["p99_ms"] < first.slo_p99_ms


def test_configuration_findings_become_rungs_from_the_server_as_configured(tmp_path: Path) -> None:
    app = tmp_path / "server_config"
    shutil.copytree(FIXTURES / "server_config", app)
    out = tmp_path / "ladder.toml"
    report = diagnose("app:app", search_path=[str(app)])
    ladder = load_ladder(write_ladder(report, out, patched="app_fixed:app"))
    first = ladder.rungs[0].config
    assert (first.server, first.http, first.loop, first.access_log, first.workers) == (
        "uvicorn",
        "h11",
        "asyncio",
        True,
        1,
    )
    changed = [rung.changed for rung in ladder.rungs[1:]]
    assert changed == [
        "access_log: True -> False",
        "loop: asyncio -> uvloop",
        "http: h11 -> httptools",
        "workers: 1 -> 4",
        "server: uvicorn -> granian",
        "target: app:app -> app_fixed:app",
    ]
    assert ladder.defaults.cpus == "0-3"
    assert ladder.rungs[0].config.mix == "ladder-mix.toml"
    assert ladder.mixes["ladder-mix.toml"].endpoints[0].path == "/ping"


def test_ladder_needs_module_app_and_a_patched_module_app() -> None:
    report = diagnose(str(FIXTURES / "server_config"))
    with pytest.raises(LadderError, match="module:app"):
        write_ladder(report, Path("unused.toml"))
    baseline = diagnose(f"{BASELINES}.naive_sync:app")
    with pytest.raises(LadderError, match="--patched"):
        write_ladder(baseline, Path("unused.toml"), patched="not a target")
