"""Postgres failing is never a Redis failure: it must not open or wedge the catalog's Redis breaker.

The Redis breaker judges Redis calls only. A Postgres error inside the half-open Redis probe (its miss
runs the SELECT) used to skip the release, so the probe slot leaked and every read bypassed Redis, through
the 8-slot fallback, for the rest of the process's life. And a Postgres timeout or socket error under a
Redis miss counted as a Redis failure, so the miss ran its SELECT a second time through the fallback.
"""

from __future__ import annotations

import asyncio
import os
import signal

import asyncpg
from prometheus_client import REGISTRY

from harness.stack import Stack
from tenk.app import create_app
from tenk.catalog.service import CatalogService
from tenk.platform.resilience import BreakerState
from tests.support.inprocess import app_in_process
from tests.support.waiting import eventually

DEADLINE_S = 30.0


async def test_redis_hits_resume_after_postgres_fails_under_the_half_open_redis_probe(
    private_stack: Stack,
) -> None:
    app = create_app(private_stack.settings(catalog={"local_cache": False}))  # every read asks Redis
    async with app_in_process(app) as http:
        catalog: CatalogService = app.state.catalog
        # The ids below are past the catalogue, which is a 404 at once (the id ceiling): as if they were in
        # range, so that each is a miss that asks Redis and Postgres.
        catalog.ceiling.raise_to(2**63 - 1)
        assert (await http.get("/products/1")).status_code == 200  # now in Redis

        # Redis goes away: its breaker opens, and reads fall back to Postgres.
        private_stack.redis.stop()
        next_id = iter(range(1_000_000, 2_000_000))

        async def redis_breaker_open() -> bool:
            await http.get(f"/products/{next(next_id)}")
            return catalog.redis_breaker.state is BreakerState.OPEN

        await eventually(redis_breaker_open, DEADLINE_S, "the Redis breaker to open while Redis is down", every=0.05)
        private_stack.redis.start()

        # Postgres now refuses new connections with a server error ("the database system is shutting
        # down": a smart shutdown, held open by our session), and the pool's connections are gone.
        holder = await asyncpg.connect(private_stack.pg.url)
        postmaster = private_stack.pg.pid()
        assert postmaster is not None
        os.kill(postmaster, signal.SIGTERM)
        await holder.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tenk'")

        async def probe_has_run() -> bool:
            # A Redis miss: the half-open probe's SELECT meets the Postgres error.
            response = await http.get(f"/products/{next(next_id)}")
            assert response.status_code == 503, response.text
            return catalog.redis_breaker.state is not BreakerState.OPEN

        await eventually(probe_has_run, DEADLINE_S, "the Redis breaker to half-open", every=0.05)
        await holder.close()
        await asyncio.to_thread(private_stack.pg.stop)
        await asyncio.to_thread(private_stack.pg.start)

        async def back_on_redis() -> bool:
            assert (await http.get("/products/1")).status_code in (200, 503)
            return catalog.redis_breaker.state is BreakerState.CLOSED

        await eventually(back_on_redis, DEADLINE_S, "the Redis breaker to close after Postgres came back", every=0.05)
        hits = catalog_redis_hits()
        assert (await http.get("/products/1")).status_code == 200
        assert catalog_redis_hits() == hits + 1


def catalog_redis_hits() -> float:
    value = REGISTRY.get_sample_value(
        "tenk_cache_lookups_total", {"cache": "product", "layer": "redis", "result": "hit"}
    )
    return value or 0.0


def _db_reads(path: str) -> float:
    return REGISTRY.get_sample_value("tenk_catalog_db_reads_total", {"path": path}) or 0.0


async def test_postgres_down_under_a_redis_miss_is_not_a_redis_failure_and_selects_once(
    private_stack: Stack,
) -> None:
    app = create_app(private_stack.settings(catalog={"local_cache": False}))
    async with app_in_process(app) as http:
        catalog: CatalogService = app.state.catalog
        # The ids below are past the catalogue, which is a 404 at once (the id ceiling): as if they were in
        # range, so that each is a miss that asks Redis and Postgres.
        catalog.ceiling.raise_to(2**63 - 1)
        assert (await http.get("/products/1")).status_code == 200
        await asyncio.to_thread(private_stack.pg.stop)
        normal, fallback = _db_reads("normal"), _db_reads("redis_down")
        misses = 30
        for product_id in range(3_000_000, 3_000_000 + misses):
            response = await http.get(f"/products/{product_id}")
            assert response.status_code == 503, response.text
        # Redis answered every lookup: its breaker stays closed, and no miss went round again
        # through the Redis-down fallback for a second SELECT.
        assert catalog.redis_breaker.state is BreakerState.CLOSED
        assert _db_reads("redis_down") == fallback
        assert _db_reads("normal") - normal == misses
        await asyncio.to_thread(private_stack.pg.start)
