"""The lab's naive baselines yield their planted findings; tenk's own service yields none."""

from __future__ import annotations

from pathlib import Path

import tenk
from tenk.doctor import diagnose
from tests.doctor.expectations import BASELINES, callee

SOURCE = Path(tenk.__file__).parent


def test_naive_blocking_blocks_the_loop_in_its_async_dependency_through_the_data_layer() -> None:
    report = diagnose(f"{BASELINES}.naive_blocking:app")
    blocking = [f for f in report.findings if f.rule == "blocking-call"]
    assert [(f.path.name, f.chain[0].function) for f in blocking] == [("blocking_io.py", "_db_on_the_loop")]
    assert "psycopg.connect" in blocking[0].message
    per_request = {callee(f) for f in report.findings if f.rule == "per-request-client"}
    assert per_request == {"psycopg.connect", "redis.Redis.from_url", "httpx.Client"}


def test_naive_async_builds_its_connection_redis_pool_and_vendor_client_per_request() -> None:
    report = diagnose(f"{BASELINES}.naive_async:app")
    per_request = {callee(f) for f in report.findings if f.rule == "per-request-client"}
    assert per_request == {
        "psycopg.AsyncConnection.connect",
        "redis.asyncio.ConnectionPool.from_url",
        "httpx.AsyncClient",
    }
    assert sum(f.rule == "double-validation" for f in report.findings) >= 5


def test_naive_sync_holds_pool_threads_on_its_sync_clients() -> None:
    report = diagnose(f"{BASELINES}.naive_sync:app")
    sync = {callee(f) for f in report.findings if f.rule == "sync-route"}
    assert {"psycopg.connect", "psycopg.Connection().commit", "httpx.Client().get", "redis.Redis().get"} <= sync


def test_tenk_service_yields_nothing() -> None:
    assert diagnose("tenk.app:create_app").findings == ()


def test_tenk_source_outside_the_baselines_yields_nothing() -> None:
    baselines = SOURCE.joinpath(*BASELINES.split(".")[1:])
    outside = [f for f in diagnose(str(SOURCE)).findings if baselines not in f.path.parents]
    assert outside == []
