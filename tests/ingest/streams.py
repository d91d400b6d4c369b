"""What the ingest tests write and read: events, raw stream entries, rows, the backlog."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
import httpx
from redis.asyncio import Redis

from harness.clients import AUTH
from tenk.ingest import keys

# Ingest on the local Redis Cluster (the `cluster` tests) is split into this many stream shards.
CLUSTER_SHARDS = 3


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
