"""The local Sentinel group tenk starts itself, and the client a redis+sentinel:// URL builds for it."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from redis.asyncio.sentinel import MasterNotFoundError

from harness.redis_sentinel import LocalRedisSentinel
from tenk.platform.connections import (
    BlockingSentinelConnectionPool,
    StockBlockingSentinelConnectionPool,
    create_redis,
    redis_from_url,
    redis_options,
)
from tenk.platform.fast_paths import FastPath, runs
from tenk.platform.outages import REDIS_DOWN, redis_is_down
from tenk.settings import Settings

WRITE_SCRIPT = "return redis.call('SET', KEYS[1], ARGV[1])"


def test_the_group_has_a_master_a_replica_and_three_sentinels_that_know_them_all(
    redis_sentinel: LocalRedisSentinel,
) -> None:
    master, replica = redis_sentinel.ports[:2]
    assert redis_sentinel.node(master).role() == "master"
    assert redis_sentinel.node(replica).role() == "slave"
    assert [sentinel.master_port_now() for sentinel in redis_sentinel.sentinels] == [master] * 3
    assert [sentinel.sees() for sentinel in redis_sentinel.sentinels] == [(1, 2)] * 3


async def test_a_sentinel_url_gives_the_api_a_client_of_the_master_with_its_pool_size_and_timeouts(
    redis_sentinel: LocalRedisSentinel,
) -> None:
    settings = Settings.model_validate({"redis": {"url": redis_sentinel.url, "pool_max": 7, "timeout_s": 0.5}})
    redis = create_redis(settings.resolved_redis_url, **redis_options(settings))
    try:
        pool = redis.connection_pool
        # The prompt pool's sentinel twin, or redis-py's own blocking pool with the stock switch.
        prompt = runs(FastPath.REDIS_POOL, stock_paths=settings.stock_paths)
        assert type(pool) is (BlockingSentinelConnectionPool if prompt else StockBlockingSentinelConnectionPool)
        assert (pool.max_connections, pool.timeout) == (7, 0.5)
        assert pool.connection_kwargs["socket_timeout"] == 0.5
        await redis.set("tenk:test:sentinel", "written")
        direct = Redis(port=redis_sentinel.ports[0], password=redis_sentinel.password)
        try:
            assert await direct.get("tenk:test:sentinel") == b"written"
        finally:
            await direct.aclose()
    finally:
        await redis.aclose()


def test_no_master_found_is_an_outage_not_a_bug() -> None:
    assert issubclass(MasterNotFoundError, REDIS_DOWN)
    assert redis_is_down(MasterNotFoundError("No master found for 'tenk'"))


@pytest.mark.cluster  # over 10 s: sentinels demote the old master only after it has reported itself one for 8 s
async def test_after_a_failover_a_client_from_before_writes_to_the_new_master(
    redis_sentinel: LocalRedisSentinel,
) -> None:
    old = redis_sentinel.ports[0]
    redis = redis_from_url(redis_sentinel.url)
    try:
        await redis.set("tenk:test:failover", "before")
        new = redis_sentinel.failover()
        assert new == redis_sentinel.ports[1]
        assert redis_sentinel.node(old).role() == "slave"
        assert [sentinel.master_port_now() for sentinel in redis_sentinel.sentinels] == [new] * 3
        # Demoting the old master, the sentinels killed its clients' connections: the pooled one fails (an
        # outage, retried) and the next asks the sentinels. A script, as every ingest append is.
        outage: Exception | None = None
        try:
            await redis.eval(WRITE_SCRIPT, 1, "tenk:test:failover", "after")
        except REDIS_DOWN as exc:
            outage = exc
        if outage is not None:
            assert redis_is_down(outage), f"a demoted master must read as an outage, not a refusal: {outage!r}"
            await redis.eval(WRITE_SCRIPT, 1, "tenk:test:failover", "after")
        direct = Redis(port=new, password=redis_sentinel.password)
        try:
            assert await direct.get("tenk:test:failover") == b"after"
        finally:
            await direct.aclose()
    finally:
        await redis.aclose()
