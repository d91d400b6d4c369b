"""Real `tenk worker` processes, and small helpers to wait on what they write."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from redis.asyncio import Redis

from tenk.ingest import keys
from tenk.stack import Spawned, spawn_logged
from tenk.stack.redis_cluster import LocalRedisCluster
from tests.support.clients import AUTH
from tests.support.stack import VENV_BIN, Stack

# Ingest on the local Redis Cluster (the `cluster` tests) is split into this many stream shards.
CLUSTER_SHARDS = 3

# A worker is a child with a log like any other; tests kill or terminate it and read its log.
WorkerProcess = Spawned
SpawnWorker = Callable[..., WorkerProcess]


@pytest.fixture
def spawn_worker(tmp_path: Path) -> Iterator[SpawnWorker]:
    """Start `tenk worker --name NAME` processes against a stack; every one is stopped after the test."""
    started: list[WorkerProcess] = []

    def spawn(stack: Stack, name: str, **env: str) -> WorkerProcess:
        log = tmp_path / f"worker-{name}-{len(started)}.log"
        argv = [str(VENV_BIN / "tenk"), "worker", "--name", name]
        started.append(spawn_logged(name, argv, log, env=stack.env(TENK_LOG_LEVEL="INFO", **env)))
        return started[-1]

    yield spawn
    for worker in started:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
    for worker in started:
        worker.stop(timeout=20)


@pytest.fixture
def cluster_env(redis_cluster: LocalRedisCluster) -> dict[str, str]:
    """An empty cluster, and the environment that points tenk processes at it, in CLUSTER_SHARDS shards."""
    redis_cluster.flush()
    shards = str(CLUSTER_SHARDS)
    return {"TENK_REDIS_URL": redis_cluster.url, "TENK_INGEST_SHARDS": shards, "TENK_INGEST_FLUSH_MS": "20"}


async def eventually(check: Callable[[], Awaitable[Any]], within: float, what: str, every: float = 0.1) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` after `within` seconds."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(every)
    raise AssertionError(f"timed out after {within}s waiting for {what} (last: {last!r})")


async def count_rows(dsn: str, sql: str, *args: object) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(sql, *args))
    finally:
        await conn.close()


async def backlog_of(redis_url: str) -> int:
    redis = Redis.from_url(redis_url)
    try:
        for group in await redis.xinfo_groups(keys.STREAM):
            if group["name"] in (keys.GROUP, keys.GROUP.encode()):
                return int(group["pending"]) + int(group["lag"] or 0)
        return 0
    finally:
        await redis.aclose()


# No cap: these tests add entries as a producer that skipped the API would.
UNCAPPED = 2**53


async def add_entries(redis: Redis, *entries: bytes) -> None:
    """XADD entries exactly as the API does (counted in the backlog), whatever they hold."""
    await redis.eval(keys.XADD_MANY, 2, keys.STREAM, keys.STATS, UNCAPPED, UNCAPPED, *entries)


async def post_until_refused(
    client: httpx.AsyncClient, make_batch: Callable[[], list[dict[str, object]]], most: int
) -> tuple[int, httpx.Response]:
    """POST batches until the API answers 503 (at most `most` of them); returns the events accepted
    before that and the refusal, after checking it is a backlog_full with Retry-After."""
    accepted = 0
    for _ in range(most):
        batch = make_batch()
        response = await client.post("/events/batch", json=batch, headers=AUTH)
        if response.status_code == 503:
            assert response.json()["error"]["code"] == "backlog_full"
            assert int(response.headers["retry-after"]) >= 1
            return accepted, response
        assert response.status_code == 202, response.text
        accepted += len(batch)
    raise AssertionError(f"still accepting after {accepted} events")


def event(source: str, event_id: str | None = None, **payload: object) -> dict[str, object]:
    body: dict[str, object] = {"source": source, "ts": "2026-01-02T03:04:05.123456Z", "payload": payload or {"n": 1}}
    if event_id is not None:
        body["event_id"] = event_id
    return body
