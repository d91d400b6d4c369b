"""The product read path and the write-side invalidation.

Read: process LRU -> Redis -> Postgres. Concurrent misses on one id share one load (single-flight),
so a burst of N misses costs one SELECT per process. When Redis is down (its breaker open), reads go
to Postgres through a small bulkhead, so a Redis outage cannot turn into a Postgres stampede.

Write: commit in Postgres, then in one Redis round trip delete the cached copy, bump the product's
generation and publish the id. Every process drops its local copy when the message arrives.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import cast

import asyncpg
from fastapi import FastAPI
from redis.asyncio import Redis

from tenk.background import cancel_and_wait
from tenk.catalog import keys, metrics, queries
from tenk.catalog.settings import CatalogSettings
from tenk.connections import REDIS_DOWN
from tenk.errors import error_body
from tenk.local_cache import LocalCache
from tenk.ops.metrics import live_gauges
from tenk.resilience import Bulkhead, CircuitBreaker, CircuitOpenError, SingleFlight

logger = logging.getLogger("tenk.catalog.service")

MISSING = b""
NOT_FOUND_BODY = error_body(
    "not_found", "no such product", [{"field": "path.product_id", "message": "no such product"}]
)
_RETRY_INVALIDATION_EVERY_S = 0.5


class CatalogService:
    def __init__(self, pg: asyncpg.Pool, redis: Redis, settings: CatalogSettings) -> None:
        self.pg = pg
        self.redis = redis
        self.settings = settings
        self.local: LocalCache[int] = LocalCache(settings.local_max_items, settings.local_ttl_s)
        self.loads: SingleFlight[int, bytes] = SingleFlight()
        self.redis_breaker = CircuitBreaker("redis", failure_ratio=0.5, window_s=5, min_calls=5, open_s=2)
        self.pg_breaker = CircuitBreaker("postgres", failure_ratio=0.5, window_s=5, min_calls=10, open_s=2)
        self.fallback = Bulkhead("postgres-fallback", settings.fallback_max_inflight, settings.fallback_max_wait_s)
        self._fill_script = redis.register_script(keys.FILL_IF_UNCHANGED)
        # Ids whose Redis invalidation failed (Redis down at write time); retried until it succeeds.
        self._pending_invalidations: set[int] = set()

    async def get_product_json(self, product_id: int) -> bytes:
        """The product's JSON bytes, or MISSING. Hot path: the local hit returns before any await."""
        if self.settings.local_cache:
            cached = self.local.get(product_id)
            if cached is not None:
                metrics.LOCAL_HIT.inc()
                return cached
            metrics.LOCAL_MISS.inc()
        return await self.loads.do(product_id, lambda: self._load(product_id))

    async def _load(self, product_id: int) -> bytes:
        epoch = self.local.epoch
        value: bytes | None = None
        if self.settings.redis_cache and self.redis_breaker.try_acquire():
            try:
                value = await self._load_through_redis(product_id)
            except REDIS_DOWN as exc:
                self.redis_breaker.release(ok=False)
                metrics.REDIS_ERROR.inc()
                logger.debug("redis read failed: %s", exc)
            else:
                self.redis_breaker.release(ok=True)
        if value is None and not self.settings.redis_cache:
            metrics.DB_READ_NORMAL.inc()
            value = await self._select(product_id)
        elif value is None:
            async with self.fallback.slot():
                metrics.DB_READ_FALLBACK.inc()
                value = await self._select(product_id)
        if self.settings.local_cache:
            ttl = self.settings.negative_ttl_s if value == MISSING else self._jitter(self.settings.local_ttl_s)
            self.local.put(product_id, value, epoch, ttl)
        return value

    async def _load_through_redis(self, product_id: int) -> bytes:
        product_key, generation_key = keys.product_key(product_id), keys.generation_key(product_id)
        # The client is built without decode_responses, so values are bytes.
        cached, generation = cast("list[bytes | None]", await self.redis.mget(product_key, generation_key))
        if cached is not None:
            metrics.REDIS_HIT.inc()
            return cached
        metrics.REDIS_MISS.inc()
        metrics.DB_READ_NORMAL.inc()
        value = await self._select(product_id)
        ttl_s = self.settings.negative_ttl_s if value == MISSING else self._jitter(self.settings.redis_ttl_s)
        await self._fill_script(
            keys=[product_key, generation_key],
            args=[generation.decode() if generation is not None else "", value, int(ttl_s * 1000)],
        )
        return value

    async def _select(self, product_id: int) -> bytes:
        if not self.pg_breaker.try_acquire():
            raise CircuitOpenError("postgres", self.pg_breaker.retry_after_s())
        try:
            row: str | None = await self.pg.fetchval(queries.PRODUCT_BY_ID, product_id)
        except (asyncpg.PostgresError, OSError, TimeoutError, asyncpg.InterfaceError):
            self.pg_breaker.release(ok=False)
            raise
        self.pg_breaker.release(ok=True)
        return MISSING if row is None else row.encode()

    def _jitter(self, ttl: float) -> float:
        spread = self.settings.ttl_jitter
        return ttl * (1 + random.uniform(-spread, spread))

    async def invalidate(self, product_id: int) -> None:
        """After a committed write: drop every cached copy, here and in every other process."""
        self.local.invalidate(product_id)
        metrics.INVALIDATIONS.labels("local_write").inc()
        try:
            await self._invalidate_in_redis(product_id)
        except REDIS_DOWN as exc:
            metrics.INVALIDATION_FAILURES.inc()
            logger.warning("redis invalidation of product %s failed (%s); will retry", product_id, exc)
            self._pending_invalidations.add(product_id)

    async def _invalidate_in_redis(self, product_id: int) -> None:
        generation_key = keys.generation_key(product_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(keys.product_key(product_id))
            pipe.incr(generation_key)
            pipe.expire(generation_key, keys.GENERATION_TTL_S)
            # Published after the delete: a process that sees the message and re-reads Redis
            # can only find the new value or nothing.
            pipe.publish(keys.INVALIDATE_CHANNEL, str(product_id))
            await pipe.execute()

    async def listen_for_invalidations(self, ready: asyncio.Event) -> None:
        """Apply other processes' invalidations; reconnect with backoff when Redis goes away."""
        backoff = 0.1
        while True:
            try:
                async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(keys.INVALIDATE_CHANNEL)
                    # Messages published while we were disconnected are lost: start clean.
                    self.local.clear()
                    ready.set()
                    backoff = 0.1
                    while True:
                        await self._retry_pending_invalidations()
                        message = await pubsub.get_message(timeout=_RETRY_INVALIDATION_EVERY_S)
                        if message is not None and message["type"] == "message":
                            with suppress(ValueError):
                                self.local.invalidate(int(message["data"]))
                                metrics.INVALIDATIONS.labels("pubsub").inc()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("invalidation listener lost redis (%s); retrying in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def _retry_pending_invalidations(self) -> None:
        while self._pending_invalidations:
            product_id = next(iter(self._pending_invalidations))
            await self._invalidate_in_redis(product_id)
            self._pending_invalidations.discard(product_id)

    def gauges(self) -> list[tuple[dict[str, str], float]]:
        return [
            ({"breaker": "catalog-redis"}, float(self.redis_breaker.state)),
            ({"breaker": "catalog-postgres"}, float(self.pg_breaker.state)),
        ]


@asynccontextmanager
async def catalog_lifespan(app: FastAPI) -> AsyncIterator[None]:
    service = CatalogService(app.state.pg, app.state.redis, CatalogSettings())
    app.state.catalog = service
    ready = asyncio.Event()
    listener = asyncio.create_task(service.listen_for_invalidations(ready), name="catalog-invalidations")
    # Wait briefly so that a process is subscribed before it serves; don't hang start-up if Redis is down.
    with suppress(TimeoutError):
        await asyncio.wait_for(ready.wait(), 2.0)
    live_gauges.add("tenk_breaker_state", "Circuit breaker state: 0 closed, 1 open, 2 half-open.", service.gauges)
    try:
        yield
    finally:
        live_gauges.remove("tenk_breaker_state", service.gauges)
        await cancel_and_wait(listener)
