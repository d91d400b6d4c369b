"""The catalog on a Redis Cluster: fills, writes and invalidations touch one slot each, and every
process hears every invalidation through sharded pub/sub, and confirms it before the write answers."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from harness.clients import AUTH
from harness.stack import Stack
from tenk.platform.connections import redis_from_url
from tenk.settings import Settings
from tenk.stack.redis_cluster import LocalRedisCluster
from tests.catalog import keys
from tests.catalog.test_invalidation import ack_timeouts
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually_blocking

pytestmark = pytest.mark.cluster


async def _ack_timeouts(client: httpx.AsyncClient) -> float:
    # Process-wide: both apps of the test share this process's registry.
    for line in (await client.get("/metrics")).text.splitlines():
        if line.startswith("tenk_catalog_invalidation_ack_timeouts_total "):
            return float(line.split()[1])
    raise AssertionError("tenk_catalog_invalidation_ack_timeouts_total is not exported")


def _node_of(redis: Redis, key: str) -> str:
    """The cluster node that holds `key`: redis_from_url types its cluster client as a Redis."""
    assert isinstance(redis, RedisCluster)
    node = redis.get_node_from_key(key)
    assert node is not None
    return node.name


async def test_a_write_through_one_process_is_never_served_stale_by_another_on_a_cluster(
    stack: Stack,
    redis_cluster: LocalRedisCluster,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
) -> None:
    # A local TTL far longer than the test: seeing the new value can only come from the invalidation.
    # A generous ack timeout: with both processes healthy no write may reach it.
    settings = stack.settings(
        redis={"url": redis_cluster.url}, catalog={"local_ttl_s": 300, "invalidation_ack_timeout_s": 5}
    )
    product_ids = [7, 8, 9, 10, 11, 12]
    redis = redis_from_url(redis_cluster.url)
    try:
        async with app_client_factory(settings) as writer, app_client_factory(settings) as reader:
            timeouts_before = await _ack_timeouts(writer)
            originals = {}
            for product_id in product_ids:
                first = await reader.get(f"/products/{product_id}")
                assert first.status_code == 200, first.text
                originals[product_id] = first.json()
                # Filled through the script on the product's own slot: no CROSSSLOT.
                assert await redis.get(keys.product_key(product_id)) is not None
            assert len({_node_of(redis, keys.product_key(pid)) for pid in product_ids}) > 1

            for product_id in product_ids:
                new_stock = originals[product_id]["stock"] + 11
                written = await writer.patch(f"/products/{product_id}", json={"stock": new_stock}, headers=AUTH)
                assert written.status_code == 200, written.text
                # At once: the write answered once the reader had confirmed (SPUBLISH counted it).
                assert (await reader.get(f"/products/{product_id}")).json()["stock"] == new_stock
                assert await redis.get(keys.generation_key(product_id)) is not None
            assert await _ack_timeouts(writer) == timeouts_before, "a write gave up waiting for a healthy process"
    finally:
        await redis.aclose()


def test_on_a_cluster_spublish_counts_every_process_so_a_write_waits_for_a_stopped_one(
    stack: Stack, redis_cluster: LocalRedisCluster, spawn_api: Callable[..., ServerProcess]
) -> None:
    ack_timeout_s = 0.2
    settings = {
        "TENK_REDIS_URL": redis_cluster.url,
        "TENK_CATALOG_LOCAL_TTL_S": "300",
        "TENK_CATALOG_INVALIDATION_ACK_TIMEOUT_S": str(ack_timeout_s),
    }
    writer = spawn_api(stack, **settings)
    stopped = spawn_api(stack, **settings)
    product_url = "/products/655"
    with httpx.Client(timeout=10) as http:
        original = http.get(stopped.base_url + product_url).json()
        assert http.get(stopped.base_url + product_url).json() == original
        timeouts_before = ack_timeouts(http, writer)
        new_stock = original["stock"] + 5

        os.kill(stopped.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            written = http.patch(writer.base_url + product_url, json={"stock": new_stock}, headers=AUTH)
            took_s = time.monotonic() - started
        finally:
            os.kill(stopped.pid, signal.SIGCONT)

        assert written.status_code == 200, written.text
        # Had SPUBLISH's count missed the stopped process, the writer's own confirmation would have ended the wait.
        assert took_s >= ack_timeout_s, f"the write answered after {took_s:.3f}s, before the ack timeout"
        assert ack_timeouts(http, writer) == timeouts_before + 1
        eventually_blocking(
            lambda: http.get(stopped.base_url + product_url).json()["stock"] == new_stock,
            10,
            "the thawed process to serve the new row",
            every=0.01,
        )
