from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
from redis.asyncio import Redis

from harness.clients import AUTH
from harness.stack import Stack
from tenk.settings import Settings
from tests.catalog import keys
from tests.support.waiting import eventually

INVALIDATED_WITHIN_S = 60.0


async def test_product_reads_stay_200_when_redis_stops(
    private_stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async with app_client_factory(private_stack.settings()) as client:
        for product_id in range(1, 21):
            assert (await client.get(f"/products/{product_id}")).status_code == 200
        private_stack.redis.stop()
        # Cached locally, and not: every read answers, concurrently too.
        responses = await asyncio.gather(*(client.get(f"/products/{i}") for i in range(1, 101)))
        assert [r.status_code for r in responses] == [200] * 100
        assert (await client.get("/products/99999")).status_code == 404
        metrics = (await client.get("/metrics")).text
        assert 'tenk_catalog_db_reads_total{path="redis_down"}' in metrics


async def test_writes_while_redis_is_down_invalidate_once_it_returns(
    private_stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async with app_client_factory(private_stack.settings()) as client:
        before = (await client.get("/products/5")).json()  # now cached in Redis too
        private_stack.redis.stop()
        patched = await client.patch("/products/5", json={"stock": before["stock"] + 3}, headers=AUTH)
        assert patched.status_code == 200
        assert (await client.get("/products/5")).json()["stock"] == before["stock"] + 3
        private_stack.redis.start()
        # The Redis copy from before the write must be gone once the retry has run.
        redis = Redis.from_url(private_stack.redis.url)
        try:
            # The retry runs once the invalidation listener is back: after its reconnect backoff (at most 2 s)
            # and Redis's AOF load, both of which a busy machine stretches. Deadline by the clock, generously.
            async def stale_copy_gone() -> bool:
                cached = await redis.get(keys.product_key(5))
                return cached is None or b'"stock":%d' % (before["stock"] + 3) in cached

            await eventually(stale_copy_gone, INVALIDATED_WITHIN_S, "the stale copy in Redis to be invalidated")
        finally:
            await redis.aclose()
