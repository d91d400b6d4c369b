"""No invalidation is lost: not to a full Redis, not to a process dying with one still undelivered.

Redis runs with maxmemory and `noeviction`: when it is full it refuses writes, and a MULTI is refused
whole. The invalidation must still drop every cached copy, and a read that started before the write
must not put the old row back once Redis has room again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import asyncpg
import httpx
import pytest
import redis as redis_sync
from redis.exceptions import OutOfMemoryError

from harness.clients import AUTH
from harness.stack import Stack
from tenk.app import create_app
from tenk.catalog.service import CatalogService
from tests.catalog import keys
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually_blocking

# A local TTL far longer than the test: seeing the new value can only come from the invalidation.
LONG_LOCAL_TTL = {"TENK_CATALOG_LOCAL_TTL_S": "300"}
FRESH_WITHIN_S = 5.0


FILLER_BYTES = 4 * 1024 * 1024
# How far over its maxmemory the filled Redis is: more than any client buffer Redis may release meanwhile,
# so Redis stays full for the whole test.
OVER_BY_BYTES = 2 * 1024 * 1024
REWRITE_ENDS_WITHIN_S = 60.0


@contextmanager
def redis_full(url: str) -> Iterator[redis_sync.Redis]:
    """Redis over its maxmemory (noeviction): every write that needs memory is refused with OOM.

    Redis leaves its AOF buffers out of the memory it holds against maxmemory, and on a busy disk the
    buffer of writes waiting for an fsync held the fillers themselves: a limit 2 MB under used_memory
    was then still over what Redis counted, and nothing was refused. The limit is taken from the
    counted memory, and no AOF rewrite may run meanwhile (one ending frees buffer blocks larger than
    the part Redis leaves out).
    """
    client = redis_sync.Redis.from_url(url)
    original = str(client.config_get("maxmemory")["maxmemory"])
    original_rewrite = str(client.config_get("auto-aof-rewrite-percentage")["auto-aof-rewrite-percentage"])
    fillers = [f"test:filler:{i}" for i in range(FILLER_BYTES // 65536)]
    try:
        client.config_set("auto-aof-rewrite-percentage", 0)
        eventually_blocking(
            lambda: not client.info("persistence")["aof_rewrite_in_progress"],
            REWRITE_ENDS_WITHIN_S,
            "an AOF rewrite to end",
            every=0.05,
        )
        for key in fillers:
            client.set(key, b"x" * 65536)
        memory = client.info("memory")
        counted = int(memory["used_memory"]) - int(memory["mem_not_counted_for_evict"])
        client.config_set("maxmemory", counted - OVER_BY_BYTES)
        with pytest.raises(OutOfMemoryError):
            client.set("test:probe", b"y")
        yield client
    finally:
        client.delete(*fillers)
        client.config_set("maxmemory", original)
        client.config_set("auto-aof-rewrite-percentage", original_rewrite)
        client.close()


def _stock_seen(http: httpx.Client, server: ServerProcess, product_id: int) -> int:
    response = http.get(f"{server.base_url}/products/{product_id}")
    assert response.status_code == 200, response.text
    stock: int = response.json()["stock"]
    return stock


def _until_fresh(http: httpx.Client, server: ServerProcess, product_id: int, stock: int) -> None:
    eventually_blocking(
        lambda: _stock_seen(http, server, product_id) == stock,
        FRESH_WITHIN_S,
        f"{server.base_url} to serve the new product",
        every=0.01,
    )


def test_a_write_while_redis_is_full_is_seen_by_every_process(
    private_stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    writer = spawn_api(private_stack, **LONG_LOCAL_TTL)
    reader = spawn_api(private_stack, **LONG_LOCAL_TTL)
    product_id = 11
    with httpx.Client(timeout=10) as http:
        for server in (writer, reader, writer, reader):  # cached in Redis and in each process
            old_stock = _stock_seen(http, server, product_id)
        with redis_full(private_stack.redis.url) as redis:
            written = http.patch(
                f"{writer.base_url}/products/{product_id}", json={"stock": old_stock + 5}, headers=AUTH
            )
            assert written.status_code == 200, written.text
            for server in (writer, reader):
                _until_fresh(http, server, product_id, old_stock + 5)
            cached = redis.get(keys.product_key(product_id))
            assert cached is None or b'"stock":%d,' % (old_stock + 5) in cached
            # Reads still answer while Redis is full; they just cannot be cached there.
            for server in (writer, reader):
                assert _stock_seen(http, server, product_id) == old_stock + 5
        for server in (writer, reader):
            assert _stock_seen(http, server, product_id) == old_stock + 5


async def test_a_read_from_before_the_write_cannot_refill_the_old_row_when_redis_has_room_again(
    private_stack: Stack,
) -> None:
    app = create_app(private_stack.settings())
    product_id = 12
    product_key = keys.product_key(product_id)
    async with app.router.lifespan_context(app):
        catalog: CatalogService = app.state.catalog
        # A reader misses in Redis and reads the old row from Postgres...
        await catalog.redis.delete(product_key)
        looked_up = await catalog._redis_lookup(product_id)
        assert looked_up is not None
        assert looked_up[0] is None
        old_row = await catalog._select(product_id)
        # ...meanwhile, with Redis full, the product is written and invalidated...
        with redis_full(private_stack.redis.url):
            conn = await asyncpg.connect(private_stack.pg.url)
            try:
                await conn.execute("UPDATE products SET stock = stock + 1 WHERE id = $1", product_id)
            finally:
                await conn.close()
            await catalog.invalidate(product_id)
        # ...and once Redis has room again, the reader's fill arrives: it must be refused.
        await catalog._fill(product_id, looked_up[1], old_row, 300)
        assert await catalog.redis.get(product_key) is None
        assert (await catalog.product_reply(product_id)).body != old_row


def test_an_invalidation_left_undelivered_by_a_dead_writer_is_delivered_after_restart(
    private_stack: Stack, spawn_api: Callable[..., ServerProcess]
) -> None:
    product_id = 13
    with httpx.Client(timeout=10) as http:
        writer = spawn_api(private_stack)
        old_stock = _stock_seen(http, writer, product_id)  # now cached in Redis
        private_stack.redis.stop()
        written = http.patch(f"{writer.base_url}/products/{product_id}", json={"stock": old_stock + 9}, headers=AUTH)
        assert written.status_code == 200, written.text
        # The writer dies before Redis comes back; Redis restarts from its AOF with the old copy.
        writer.process.kill()
        writer.process.wait(15)
        private_stack.redis.start()
        redis = redis_sync.Redis.from_url(private_stack.redis.url)
        try:
            assert b'"stock":%d' % old_stock in (redis.get(keys.product_key(product_id)) or b"")
        finally:
            redis.close()
        restarted = spawn_api(private_stack)
        assert _stock_seen(http, restarted, product_id) == old_stock + 9
