"""Ingest rungs are judged on what lands, and start from a clean Redis.

A capacity search with `pass_if_backlog_stable` fails a step whose backlog grew, even though the API
accepted every POST within the SLO; each step records rows landed per second, the accept-to-visible
lag and the backlog at both ends. With a Redis the lab owns, every rung repeat starts flushed.

Real tenk, real workers, real k6, on the session's Postgres and a private Redis (it is flushed).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from harness.clients import TEST_API_KEY
from harness.stack import Stack
from tenk.lab.definition.ladder import load_ladder
from tenk.lab.measuring.options import RunOptions
from tenk.lab.measuring.state import REDIS_FLUSHED
from tenk.lab.results.record import run_ladder
from tenk.stack import EmbeddedRedis
from tenk.stack._ports import start_on_free_port
from tests.lab.test_capacity import REPO

pytestmark = pytest.mark.slow
TARGET_CPU = sorted(os.sched_getaffinity(0))[0]
SENTINEL = "lab-test:left-by-an-earlier-rung"


@pytest.fixture(scope="module")
def private_redis() -> Iterator[EmbeddedRedis]:
    root = Path(tempfile.mkdtemp(prefix="tenk-r-", dir="/tmp"))
    server = start_on_free_port(lambda port: EmbeddedRedis(root / "redis", port))
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def run(
    stack: Stack, private_redis: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], Path]:
    root = tmp_path_factory.mktemp("lab")
    ladder = root / "ingest.toml"
    # 300 POSTs in a one-second step: with no worker the backlog grows by all of them, far beyond
    # the slack a stable step may keep (10 % + 10); with a worker they land within the step.
    ladder.write_text(f"""
name = "ingest-state"
repeats = 1
[defaults]
target = "tenk"
server = "uvicorn"
cpus = "{TARGET_CPU}"
mix = "ingest"
ingest_workers = 0
capacity = true
pass_if_backlog_stable = true
start_rate = 300
max_rate = 300
step_s = 1
capacity_budget_s = 5
slo_p99_ms = 5000
warmup_s = 0
[[rung]]
label = "no worker"
[[rung]]
label = "one worker"
ingest_workers = 1
[[rung]]
label = "direct INSERT"
target = "baseline:naive_async"
""")
    with redis.Redis.from_url(private_redis.url) as client:
        client.set(SENTINEL, "1")
    env = stack.env(TENK_LAB_API_KEY=TEST_API_KEY, PYTHONPATH=str(REPO), TENK_REDIS_URL=private_redis.url)
    out = run_ladder(load_ladder(ladder), RunOptions(results_root=root, base_env=env, flush_redis=True))
    return json.loads((out / "results.json").read_text()), out


def test_a_step_whose_backlog_grows_fails_though_the_api_accepted_everything(
    run: tuple[dict[str, Any], Path],
) -> None:
    rung = run[0]["rungs"][0]
    steps = rung["capacity"]["steps"]
    assert steps
    assert not any(step["passed"] for step in steps)
    for step in steps:
        ingest = step["server"]["ingest"]
        assert any(reason.startswith("backlog grew") for reason in step["reasons"]), step["reasons"]
        assert ingest["rows_landed"] == 0
        assert ingest["backlog_end"] > ingest["backlog_start"]
    assert rung["value"] == 0
    # Two steps cannot bracket a capacity, so no bottleneck is named (issue 49: an unconverged search is
    # never given a limit); what it says is why its steps failed: the backlog.
    assert rung["bottleneck"]["kind"] == "unconverged", rung["bottleneck"]
    assert "backlog grew" in rung["bottleneck"]["detail"], rung["bottleneck"]


def test_a_step_that_lands_what_it_accepts_passes_the_backlog_rule_and_records_rows_lag_and_backlog(
    run: tuple[dict[str, Any], Path],
) -> None:
    steps = run[0]["rungs"][1]["capacity"]["steps"]
    # A busy machine may fail a step on the generator (dropped iterations), or leave the backlog unread
    # (its stats call timing out); the backlog never grows.
    for step in steps:
        assert not any(reason.startswith("backlog grew") for reason in step["reasons"]), step["reasons"]
        assert not step["server"]["ingest"].get("backlog_grew")
    assert any({"backlog_start", "backlog_end"} <= set(step["server"]["ingest"]) for step in steps)
    landed = [step["server"]["ingest"] for step in steps if step["server"]["ingest"]["rows_landed"] > 0]
    assert landed, "the worker landed rows during a step"
    for ingest in landed:
        assert ingest["rows_landed_per_s"] > 0
        assert 0 <= ingest["lag_p50_ms"] <= ingest["lag_p99_ms"]


def test_a_target_that_lands_each_event_before_it_answers_is_not_asked_for_a_backlog(
    run: tuple[dict[str, Any], Path],
) -> None:
    # The direct-INSERT baseline has no /ingest/stats and nothing to hold back: its steps are judged on
    # the SLO alone (before, "backlog unknown" failed every one and its capacity read 0).
    rung = run[0]["rungs"][2]
    steps = rung["capacity"]["steps"]
    assert steps
    for step in steps:
        assert not any(reason.startswith("backlog") for reason in step["reasons"]), step["reasons"]
        assert "backlog_start" not in step["server"]["ingest"]
    assert any(step["server"]["ingest"]["rows_landed"] > 0 for step in steps), "what it accepted landed"
    assert "backlog" not in rung["capacity"]["plan"]


def test_every_rung_starts_from_a_flushed_redis_and_the_report_says_so(
    run: tuple[dict[str, Any], Path], private_redis: EmbeddedRedis
) -> None:
    results, out = run
    with redis.Redis.from_url(private_redis.url) as client:
        assert not client.exists(SENTINEL)
    for rung in results["rungs"]:
        assert REDIS_FLUSHED in rung["reset"]
    report = (out / "report.md").read_text()
    assert "Redis flushed" in report
    assert "rows landed/s" in report
