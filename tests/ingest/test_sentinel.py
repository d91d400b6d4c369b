"""The API and a worker on Redis Sentinel: TENK_REDIS_URL=redis+sentinel://..., and nothing else changed."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from harness.clients import AUTH
from harness.deadlines import deadline_s
from harness.redis_sentinel import LocalRedisSentinel
from harness.stack import Stack
from tenk.ingest import keys
from tenk.settings import Settings
from tests.catalog import keys as catalog_keys
from tests.ingest.streams import event
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker

AppClients = Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]


def _on_sentinel(stack: Stack, group: LocalRedisSentinel) -> Settings:
    return stack.settings(redis={"url": group.url}, ingest={"flush_ms": 20})


def _server(group: LocalRedisSentinel, port: int) -> Redis:
    """One server of the group, asked directly rather than through the sentinels."""
    return Redis(port=port, password=group.password)


def _answers(
    client: httpx.AsyncClient, method: str, path: str, status: int, **kwargs: Any
) -> Callable[[], Awaitable[bool]]:
    async def call() -> bool:
        return (await client.request(method, path, **kwargs)).status_code == status

    return call


async def test_products_and_events_are_read_and_written_through_a_sentinel_url(
    stack: Stack, redis_sentinel: LocalRedisSentinel, app_client_factory: AppClients, spawn_worker: SpawnWorker
) -> None:
    event_id = str(uuid.uuid4())
    master = _server(redis_sentinel, redis_sentinel.ports[0])
    try:
        async with app_client_factory(_on_sentinel(stack, redis_sentinel)) as client:
            product = await client.get("/products/7")
            assert product.status_code == 200, product.text
            # Cached in the master the sentinels name.
            await eventually(
                lambda: master.exists(catalog_keys.product_key(7)), deadline_s(), "product 7 cached in the master"
            )
            patched = await client.patch("/products/7", json={"stock": product.json()["stock"] + 1}, headers=AUTH)
            assert patched.status_code == 200, patched.text
            assert (await client.get("/products/7")).json()["stock"] == product.json()["stock"] + 1

            accepted = await client.post("/events", json=event(f"sen-{event_id[:8]}", event_id), headers=AUTH)
            assert accepted.status_code == 202, accepted.text
            assert await master.xlen(keys.STREAM) == 1
            # The worker reaches the stream through the sentinels too.
            spawn_worker(stack, f"sen-{event_id[:8]}", TENK_REDIS_URL=redis_sentinel.url, TENK_INGEST_FLUSH_MS="20")
            await eventually(
                _answers(client, "GET", f"/events/{event_id}", 200, headers=AUTH), 60, "the event written to Postgres"
            )
    finally:
        await master.aclose()


@pytest.mark.cluster  # a failover takes over 10 s: the old master is demoted only after 8 s of reporting itself one
async def test_after_a_failover_the_api_serves_again_and_writes_go_to_the_new_master(
    stack: Stack, redis_sentinel: LocalRedisSentinel, app_client_factory: AppClients
) -> None:
    run = f"sf-{uuid.uuid4().hex[:8]}"
    async with app_client_factory(_on_sentinel(stack, redis_sentinel)) as client:
        before = (await client.get("/products/8")).json()
        assert (await client.post("/events", json=event(f"{run}-before"), headers=AUTH)).status_code == 202

        new_port = redis_sentinel.failover()

        # Pooled connections to the old master meet READONLY once (a 503); the next ones ask the sentinels.
        after = event(f"{run}-after")
        await eventually(
            _answers(client, "POST", "/events", 202, json=after, headers=AUTH), deadline_s(), "a 202 after failover"
        )
        stock = before["stock"] + 5
        await eventually(
            _answers(client, "PATCH", "/products/8", 200, json={"stock": stock}, headers=AUTH), 30, "a PATCH"
        )
        assert (await client.get("/products/8")).json()["stock"] == stock

        new_master = _server(redis_sentinel, new_port)
        try:
            # redis-py leaves execute_command unannotated.
            assert (await new_master.execute_command("ROLE"))[0] == b"master"  # type: ignore[no-untyped-call]
            entries = await new_master.xrange(keys.STREAM)
            assert entries is not None
            assert any(fields is not None and f"{run}-after".encode() in fields[keys.FIELD] for _, fields in entries)
            # The invalidation reached the new master: no copy from before the write is left there.
            cached = await new_master.get(catalog_keys.product_key(8))
            assert cached is None or b'"stock":%d' % stock in cached
        finally:
            await new_master.aclose()


async def test_with_every_sentinel_down_a_write_that_needs_redis_is_503_with_retry_after(
    stack: Stack, redis_sentinel: LocalRedisSentinel, app_client_factory: AppClients
) -> None:
    redis_sentinel.stop_sentinels()
    async with app_client_factory(_on_sentinel(stack, redis_sentinel)) as client:
        refused = await client.post("/events", json=event("sen-down"), headers=AUTH)
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["retry-after"]) >= 1
        # Reads fall back to Postgres, as with one Redis down.
        assert (await client.get("/products/9")).status_code == 200
