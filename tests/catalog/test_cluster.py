"""The catalog on a Redis Cluster: fills, writes and invalidations touch one slot each, and every
process hears every invalidation through sharded pub/sub."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tenk.catalog import keys
from tenk.connections import redis_from_url
from tenk.settings import Settings
from tenk.stack.redis_cluster import LocalRedisCluster
from tests.conftest import AUTH, Stack

pytestmark = pytest.mark.cluster


async def test_a_write_through_one_process_is_never_served_stale_by_another_on_a_cluster(
    stack: Stack,
    redis_cluster: LocalRedisCluster,
    app_client_factory: Callable[[Settings], AsyncIterator[httpx.AsyncClient]],
) -> None:
    # A local TTL far longer than the test: seeing the new value can only come from the invalidation.
    settings = stack.settings(redis={"url": redis_cluster.url}, catalog={"local_ttl_s": 300})
    product_ids = [7, 8, 9, 10, 11, 12]
    redis = redis_from_url(redis_cluster.url)
    try:
        async for writer in app_client_factory(settings):
            async for reader in app_client_factory(settings):
                originals = {}
                for product_id in product_ids:
                    first = await reader.get(f"/products/{product_id}")
                    assert first.status_code == 200, first.text
                    originals[product_id] = first.json()
                    # Filled through the script on the product's own slot: no CROSSSLOT.
                    assert await redis.get(keys.product_key(product_id)) is not None
                assert len({redis.get_node_from_key(keys.product_key(pid)).name for pid in product_ids}) > 1

                for product_id in product_ids:
                    new_stock = originals[product_id]["stock"] + 11
                    written = await writer.patch(f"/products/{product_id}", json={"stock": new_stock}, headers=AUTH)
                    assert written.status_code == 200, written.text
                    deadline = time.monotonic() + 5
                    while (await reader.get(f"/products/{product_id}")).json()["stock"] != new_stock:
                        assert time.monotonic() < deadline, "the reader kept serving the old value"
                        await asyncio.sleep(0.01)
                    assert await redis.get(keys.generation_key(product_id)) is not None
    finally:
        await redis.aclose()
