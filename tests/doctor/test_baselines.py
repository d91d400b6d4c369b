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
    assert {(f.path.name, f.chain[0].function) for f in blocking} == {("blocking_io.py", "_db_on_the_loop")}
    # Its two ways to a connection: the shared sync pool (typed through `Resources.pool`), or a new one.
    assert {callee(f) for f in blocking} == {"psycopg_pool.ConnectionPool().connection", "psycopg.connect"}
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
    # Its routes return the models they build, which pydantic 2 (tenk's lock) does not validate again.
    assert not [f for f in report.findings if f.rule == "double-validation"]
    assert report.versions.packages["pydantic"].source == "uv.lock"


def test_naive_sync_holds_pool_threads_on_its_sync_clients() -> None:
    report = diagnose(f"{BASELINES}.naive_sync:app")
    (note,) = [f for f in report.findings if f.rule == "sync-route"]
    assert all(f"{client} (" in note.message for client in ("psycopg", "httpx.Client", "redis.Redis"))
    assert len(note.related) >= 3


def test_tenk_service_yields_nothing() -> None:
    assert diagnose("tenk.app:create_app").findings == ()


def test_tenk_source_outside_the_baselines_yields_nothing() -> None:
    baselines = SOURCE.joinpath(*BASELINES.split(".")[1:])
    outside = [f for f in diagnose(str(SOURCE)).findings if baselines not in f.path.parents]
    assert outside == []
