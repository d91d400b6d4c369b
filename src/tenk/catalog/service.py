"""The product read path and the write-side invalidation.

Read: process LRU -> Redis -> Postgres. Concurrent misses on one id share one load (single-flight),
so a burst of N misses costs one SELECT per process. Ids past the highest one stored are a 404 at once
(`tenk.catalog.ceiling`), and ids found missing are remembered in an LRU of their own: a flood of
made-up ids costs no read each and never evicts the products people read. When Redis is down (its
breaker open), reads go to Postgres through a small bulkhead, so a Redis outage cannot turn into a
Postgres stampede.

Each dependency has its own breaker, and each breaker judges only the calls to its dependency: a
Redis lookup, the Postgres SELECT and the Redis fill are separate guarded calls, so Postgres failing
never opens (or wedges half-open) the Redis breaker, and a miss runs its SELECT exactly once.

Write: commit in Postgres (a trigger records the invalidation in the same transaction), then drop the
cached copies everywhere; see `tenk.catalog.invalidation` for why no invalidation can be lost.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import asyncpg
from fastapi import FastAPI
from redis.asyncio import Redis

from tenk.background import cancel_and_wait
from tenk.catalog import keys, metrics, queries
from tenk.catalog.batched_reads import Lookup, batched_lookups, batched_rows
from tenk.catalog.ceiling import IdCeiling
from tenk.catalog.changes import ProductChanges
from tenk.catalog.invalidation import Invalidator
from tenk.catalog.replicas import Replicas, WrittenLsn
from tenk.catalog.settings import CatalogSettings
from tenk.errors import error_body
from tenk.local_cache import TtlCache
from tenk.ops.metrics import live_gauges
from tenk.outages import POSTGRES_ERRORS, REDIS_DOWN, postgres_is_down, redis_is_down
from tenk.reply import Reply
from tenk.resilience import Backoff, Bulkhead, CircuitBreaker, CircuitOpenError, SingleFlight

logger = logging.getLogger("tenk.catalog.service")

# What Redis holds for an id with no product, and what the loaders return for it.
MISSING = b""
NOT_FOUND = Reply(
    404, error_body("not_found", "no such product", [{"field": "path.product_id", "message": "no such product"}])
)
_LISTEN_TIMEOUT_S = 1.0
_START_WAIT_S = 2.0


class CatalogService:
    def __init__(
        self, pg: asyncpg.Pool, redis: Redis, settings: CatalogSettings, replicas: Replicas | None = None
    ) -> None:
        self.pg = pg
        self.redis = redis
        self.settings = settings
        self.local: TtlCache[int, Reply] = TtlCache(settings.local_max_items, settings.local_ttl_s)
        self.missing: TtlCache[int, Reply] = TtlCache(settings.local_max_items, settings.negative_ttl_s)
        self.ceiling = IdCeiling(self._highest_id, settings.negative_ttl_s)
        self.replicas = replicas or Replicas([])
        self.loads: SingleFlight[int, Reply] = SingleFlight()
        self.rows = batched_rows(pg)
        self.lookups = batched_lookups(redis)
        self.redis_breaker = CircuitBreaker("redis", failure_ratio=0.5, window_s=5, min_calls=5, open_s=2)
        self.pg_breaker = CircuitBreaker("postgres", failure_ratio=0.5, window_s=5, min_calls=10, open_s=2)
        self.fallback = Bulkhead("postgres-fallback", settings.fallback_max_inflight, settings.fallback_max_wait_s)
        self.invalidator = Invalidator(
            pg, redis, track_lsn=bool(self.replicas), ack_timeout_s=settings.invalidation_ack_timeout_s
        )
        self._fill_script = redis.register_script(keys.FILL_IF_UNCHANGED)
        # For caches of answers that draw on many products (search pages): fed by the listener below.
        self.changes = ProductChanges()

    async def product_reply(self, product_id: int) -> Reply:
        """The product's answer: 200 with its JSON, or 404."""
        cached = self.cached_reply(product_id)
        return await self.load_reply(product_id) if cached is None else cached

    def cached_reply(self, product_id: int) -> Reply | None:
        """The product's answer from this process's caches; None when they don't hold it.

        Not a coroutine, and the caches hold whole replies: a hit, the hottest answer tenk gives, is
        found without a coroutine or a new object (`routes.get_product`)."""
        if not self.settings.local_cache:
            return None
        cached = self.local.get(product_id)
        if cached is None:
            cached = self.missing.get(product_id)
            if cached is None:
                metrics.LOCAL_MISS.inc()
                return None
        metrics.LOCAL_HIT.inc()
        return cached

    async def load_reply(self, product_id: int) -> Reply:
        """The product's answer past this process's caches (`cached_reply`), which keep it."""
        if await self.ceiling.beyond(product_id):
            metrics.PAST_CEILING.inc()
            return NOT_FOUND
        return await self.loads.do(product_id, lambda: self._load(product_id))

    async def _highest_id(self) -> int:
        highest: int = await self.pg.fetchval(queries.HIGHEST_PRODUCT_ID)
        return highest

    async def _load(self, product_id: int) -> Reply:
        epoch, missing_epoch = self.local.epoch, self.missing.epoch
        if self.settings.redis_cache:
            value = await self._load_through_redis(product_id)
        else:
            metrics.DB_READ_NORMAL.inc()
            value = await self._select(product_id)
        if value == MISSING:
            if self.settings.local_cache:
                self.missing.put(product_id, NOT_FOUND, epoch=missing_epoch)
            return NOT_FOUND
        reply = Reply(200, value)
        if self.settings.local_cache:
            self.local.put(product_id, reply, epoch=epoch, ttl_s=self._jitter(self.settings.local_ttl_s))
        return reply

    async def _load_through_redis(self, product_id: int) -> bytes:
        looked_up = await self._redis_lookup(product_id)
        if looked_up is None:
            async with self.fallback.slot():
                metrics.DB_READ_FALLBACK.inc()
                return await self._select(product_id)
        cached, generation, written_lsn = looked_up
        if cached is not None:
            metrics.REDIS_HIT.inc()
            return cached
        metrics.REDIS_MISS.inc()
        metrics.DB_READ_NORMAL.inc()
        value = await self._select(product_id, int(written_lsn) if written_lsn else 0)
        ttl_s = self.settings.negative_ttl_s if value == MISSING else self._jitter(self.settings.redis_ttl_s)
        await self._fill(product_id, generation, value, ttl_s)
        return value

    async def _redis_lookup(self, product_id: int) -> Lookup | None:
        """[cached value, generation, written LSN], or None when Redis cannot be asked (breaker open, or
        it failed)."""
        call = self.redis_breaker.call(redis_is_down)
        if call is None:
            return None
        try:
            with call:
                return await self.lookups.get(product_id)
        except REDIS_DOWN as exc:
            metrics.REDIS_ERROR.inc()
            logger.debug("redis read failed: %s", exc)
            return None

    async def _fill(self, product_id: int, generation: bytes | None, value: bytes, ttl_s: float) -> None:
        """Cache what was read, unless the product was written since the lookup. Best effort: the
        caller already has its answer, so a refused or failed fill is counted, never raised."""
        call = self.redis_breaker.call(redis_is_down)
        if call is None:
            return
        try:
            with call:
                await self._fill_script(
                    keys=[keys.product_key(product_id), keys.generation_key(product_id)],
                    args=[generation.decode() if generation is not None else "", value, int(ttl_s * 1000)],
                )
        except REDIS_DOWN as exc:
            # A full Redis answers OOM here: it is up, so the breaker was not told otherwise.
            metrics.FILLS_FAILED.inc()
            logger.debug("redis fill failed: %s", exc)

    async def _select(self, product_id: int, written_lsn: WrittenLsn = None) -> bytes:
        """The row from a replica that has replayed `written_lsn` (see `tenk.catalog.replicas`), or
        from the primary."""
        call = self.pg_breaker.call(postgres_is_down)
        if call is None:
            raise CircuitOpenError("postgres", self.pg_breaker.retry_after_s())
        with call:
            answered, row = await self.replicas.product_json(product_id, written_lsn)
            if not answered:
                row = await self.rows.get(product_id)
        return MISSING if row is None else row.encode()

    def read_pool(self) -> asyncpg.Pool:
        """For reads that are not cached and may lag (listings): a replica when there is one."""
        return self.replicas.next() if self.replicas else self.pg

    def _jitter(self, ttl: float) -> float:
        spread = self.settings.ttl_jitter
        return ttl * (1 + random.uniform(-spread, spread))

    async def invalidate(self, product_id: int) -> None:
        """After a committed write: drop every cached copy, here and in every other process; returns once
        every process has confirmed, or after `invalidation_ack_timeout_s`."""
        self._forget(product_id)
        self.changes.changed()
        metrics.INVALIDATIONS.labels("local_write").inc()
        await self.invalidator.after_write(product_id)

    def _forget(self, product_id: int) -> None:
        """Drop what this process holds on a product just written: created, it may be past the ceiling."""
        self.local.invalidate(product_id)
        self.missing.invalidate(product_id)
        self.ceiling.raise_to(product_id)

    def _apply_invalidation(self, data: bytes) -> None:
        # Whatever it names, a message says that some product changed.
        self.changes.changed()
        with suppress(ValueError):
            self._forget(int(data))
            metrics.INVALIDATIONS.labels("pubsub").inc()

    async def listen_for_invalidations(self, ready: asyncio.Event) -> None:
        """Apply (and confirm) every process's invalidations, this one's too; reconnect with backoff when
        Redis goes away."""
        backoff = Backoff(0.1, 2.0)
        while True:
            try:
                async with self.invalidator.broadcast.subscription() as subscription:
                    # Messages published while we were disconnected are lost: start clean.
                    self.local.clear()
                    self.missing.clear()
                    self.ceiling.expire()
                    self.changes.subscribed()
                    ready.set()
                    backoff.reset()
                    while True:
                        await subscription.receive(self._apply_invalidation, _LISTEN_TIMEOUT_S)
            except asyncio.CancelledError:
                self.changes.lost()
                raise
            except Exception as exc:
                self.changes.lost()
                delay = backoff.next_delay()
                logger.warning("invalidation listener lost redis (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)

    def gauges(self) -> list[tuple[dict[str, str], float]]:
        return [
            ({"breaker": "catalog-redis"}, float(self.redis_breaker.state)),
            ({"breaker": "catalog-postgres"}, float(self.pg_breaker.state)),
        ]


@asynccontextmanager
async def catalog_lifespan(app: FastAPI) -> AsyncIterator[None]:
    replicas = await Replicas.open(app.state.settings)
    service = CatalogService(app.state.pg, app.state.redis, app.state.settings.catalog, replicas)
    app.state.catalog = service
    ready = asyncio.Event()
    listener = asyncio.create_task(service.listen_for_invalidations(ready), name="catalog-invalidations")
    # Wait briefly so that a process is subscribed, and invalidations left undelivered (by a writer that
    # died, or while Redis was down) are out, before it serves; don't hang start-up if either is down.
    with suppress(TimeoutError):
        await asyncio.wait_for(ready.wait(), _START_WAIT_S)
    with suppress(TimeoutError, *POSTGRES_ERRORS, *REDIS_DOWN):
        await asyncio.wait_for(service.invalidator.replay(), _START_WAIT_S)
    replayer = asyncio.create_task(service.invalidator.replay_forever(), name="catalog-invalidation-replay")
    live_gauges.add("tenk_breaker_state", "Circuit breaker state: 0 closed, 1 open, 2 half-open.", service.gauges)
    try:
        yield
    finally:
        live_gauges.remove("tenk_breaker_state", service.gauges)
        await cancel_and_wait(replayer)
        await cancel_and_wait(listener)
        await replicas.close()
