"""A cached read by id, declared once (`ReadThrough`) and run by each app that serves it (`ReadCache`).

Read: process LRU -> Redis -> Postgres. Concurrent misses on one id share one load (single-flight),
and the loads of one event-loop turn go out together (`_reads.py`), so a burst of N misses costs one
query per process. Ids past the highest one stored are a 404 at once (`_ceiling.py`), and ids found
missing are remembered in an LRU of their own: a flood of made-up ids costs no read each and never
evicts the items people read. When Redis is down (its breaker open), reads go to Postgres through a
small bulkhead, so a Redis outage cannot turn into a Postgres stampede.

Each dependency has its own breaker, and each breaker judges only the calls to its dependency: a
Redis lookup, the Postgres read and the Redis fill are separate guarded calls, so Postgres failing
never opens (or wedges half-open) the Redis breaker, and a miss runs its read exactly once.

Write: commit in Postgres (the outbox trigger records the invalidation in the same transaction), then
`invalidate`: drop the cached copies everywhere; see `_invalidation.py` for why no invalidation can be
lost.

The caches hold whole replies, their headers made once: a hit is a dict lookup that hands back a
ready `Reply`, with no coroutine and no new object (`cached`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import asyncpg
from fastapi import FastAPI
from redis.asyncio import Redis

from tenk.cache_settings import CacheSettings
from tenk.platform.background import cancel_and_wait
from tenk.platform.errors import error_body
from tenk.platform.local_cache import TtlCache
from tenk.platform.metrics import live_gauges
from tenk.platform.outages import POSTGRES_ERRORS, REDIS_DOWN, postgres_is_down, redis_is_down
from tenk.platform.readthrough._ceiling import IdCeiling
from tenk.platform.readthrough._changes import Changes
from tenk.platform.readthrough._invalidation import Invalidator
from tenk.platform.readthrough._keys import FILL_IF_UNCHANGED, KeySpace
from tenk.platform.readthrough._metrics import CacheMetrics, cache_metrics
from tenk.platform.readthrough._reads import LoadMany, LoadOne, Lookup, Row, batched_lookups, batched_rows
from tenk.platform.readthrough._replicas import Replicas, WrittenLsn
from tenk.platform.readthrough._sql import IDENTIFIER, REPLAYED_PAST, OutboxSql, highest_id
from tenk.platform.reply import Header, Reply
from tenk.platform.resilience import Backoff, Bulkhead, CircuitBreaker, CircuitOpenError, SingleFlight
from tenk.platform.turn_batch import TurnBatch

if TYPE_CHECKING:
    from tenk.settings import Settings

logger = logging.getLogger("tenk.platform.readthrough")

# What Redis holds for an id with no item, and what a read returns for it.
MISSING = b""
_HIT: Header = (b"x-cache", b"HIT")
_MISS: Header = (b"x-cache", b"MISS")
_LISTEN_TIMEOUT_S = 1.0
_START_WAIT_S = 2.0


# eq=False: a declaration is itself, not its fields (its settings, a pydantic model, cannot be hashed).
@dataclass(frozen=True, kw_only=True, eq=False)
class ReadThrough:
    """What to cache and how: rows of `table` by their bigint `key`, read by `load_one` (and `load_many`).

    `name` is the cache's namespace: its Redis keys (`tenk:<name>:<item>:{<id>}`), its channel, its
    metrics (`tenk_<name>_*`), its outbox (`<name>_invalidations`) and where its lifespan puts the
    running cache (`app.state.<name>`). `item` names one row: the 404 says "no such <item>" at
    `path.<item>_id` (or give `not_found`), and lookups count as `tenk_cache_lookups_total{cache=<item>}`.
    `load_one(pool, id)` answers the item's JSON (bytes, or text as Postgres renders it) or None;
    `load_many(pool, ids)`, when given, those of several ids at once, by id, for the reads of one
    event-loop turn. `settings` is a `CacheSettings`, or where to find it in the settings tree.
    `outbox`: writes are recorded by the table's trigger (`outbox_sql`) and replayed until delivered.
    `x_cache`: every 200 carries `X-Cache: HIT` (from a cache) or `MISS` (read from Postgres).
    """

    name: str
    item: str
    table: str
    key: str = "id"
    load_one: LoadOne
    load_many: LoadMany | None = None
    settings: CacheSettings | Callable[[Settings], CacheSettings] = field(default_factory=CacheSettings)
    outbox: bool = True
    x_cache: bool = False
    not_found: Reply | None = None
    keys: KeySpace = field(init=False, repr=False)
    metrics: CacheMetrics = field(init=False, repr=False)
    sql: OutboxSql = field(init=False, repr=False)
    highest_id: str = field(init=False, repr=False)
    # The 404 of an id with no item: `not_found`, or one made from `item`.
    absent: Reply = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for what in ("name", "item", "table", "key"):
            value = getattr(self, what)
            if not IDENTIFIER.match(value):
                raise ValueError(f"ReadThrough {what}={value!r}: use lower-case letters, digits and _ (at most 40)")
        set_field = functools.partial(object.__setattr__, self)
        set_field("keys", KeySpace(self.name, self.item))
        set_field("metrics", cache_metrics(self.name, self.item))
        set_field("sql", OutboxSql(self.name, self.table, self.key, self.item))
        set_field("highest_id", highest_id(self.table, self.key))
        absent = self.not_found
        if absent is None:
            missing = f"no such {self.item}"
            absent = Reply(
                404, error_body("not_found", missing, [{"field": f"path.{self.item}_id", "message": missing}])
            )
        set_field("absent", absent)

    def outbox_sql(self) -> str:
        """The migration that makes the outbox: its table, and the trigger on `table` that fills it."""
        return self.sql.migration()

    def open(
        self,
        pg: asyncpg.Pool,
        redis: Redis | None,
        settings: CacheSettings | None = None,
        *,
        replicas: Replicas | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> ReadCache:
        """A cache over these pools (with `settings`, else the declaration's own); start its listener and
        replay with `running()`. `lifespan` does both, over the app's pools. `replicas`: read replicas a
        miss may read, once they have replayed the item's last write (the catalog's lifespan opens them)."""
        if settings is None:
            if not isinstance(self.settings, CacheSettings):
                raise TypeError(f"ReadThrough {self.name!r} reads its settings from the tree: pass them to open()")
            settings = self.settings
        return ReadCache(self, pg, redis, settings, replicas=replicas, clock=clock)

    @asynccontextmanager
    async def serving(
        self,
        app: FastAPI,
        pg: asyncpg.Pool,
        redis: Redis | None,
        settings: CacheSettings | None = None,
        *,
        replicas: Replicas | None = None,
    ) -> AsyncIterator[ReadCache]:
        """Open the cache over `pg` and `redis` (None: no Redis) as `app.state.<name>`, and run it while
        the block runs: a lifespan of one's own calls this with what it opened, and needs nothing else
        in `app.state`. `settings`: as `open`'s."""
        if hasattr(app.state, self.name):
            raise ValueError(f"app.state.{self.name} is taken: name the ReadThrough otherwise")
        cache = self.open(pg, redis, settings, replicas=replicas)
        setattr(app.state, self.name, cache)
        try:
            async with cache.running():
                yield cache
        finally:
            delattr(app.state, self.name)

    @asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        """`Domain(router, X.lifespan)` in tenk's `create_app`: `serving` over the app's pools
        (`app.state.pg`, `app.state.redis`), with the declaration's settings, or its branch of the tree
        (`app.state.settings`) when it names one."""
        settings = self.settings if isinstance(self.settings, CacheSettings) else self.settings(app.state.settings)
        async with self.serving(app, app.state.pg, app.state.redis, settings):
            yield


def _with_header(reply: Reply, header: Header) -> Reply:
    reply.headers = (*reply.headers, header)
    return reply


class ReadCache:
    """One app's cache of a `ReadThrough`: `cached(id)` at once, else `await load(id)`; after a committed
    write, `await invalidate(id)`."""

    def __init__(
        self,
        spec: ReadThrough,
        pg: asyncpg.Pool,
        redis: Redis | None,
        settings: CacheSettings,
        *,
        replicas: Replicas | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.pg = pg
        self.settings = settings
        self.redis = redis
        # The Redis this cache uses: none when it is local only.
        self._shared = None if settings.local_only else redis
        self.metrics = spec.metrics
        # Bound here: a hit reads one attribute to count itself, as a module's counter would cost.
        self._local_hit = spec.metrics.local_hit
        self._local_miss = spec.metrics.local_miss
        self.not_found = spec.absent
        self.local: TtlCache[int, Reply] = TtlCache(settings.local_max_items, settings.local_ttl_s, clock)
        self.missing: TtlCache[int, Reply] = TtlCache(settings.local_max_items, settings.negative_ttl_s, clock)
        self.ceiling = IdCeiling(self._highest_id, settings.negative_ttl_s, clock)
        self.replicas = replicas or Replicas([])
        # Inline: a lone miss costs no task; a reader cancelled before its fill leaves none (see SingleFlight).
        self.loads: SingleFlight[int, Reply] = SingleFlight(own_task=False)
        self.rows: TurnBatch[int, Row] = batched_rows(
            pg, spec.load_one, spec.load_many, self.metrics.db_batch_size.observe
        )
        self.lookups: TurnBatch[int, Lookup] | None = None
        self._through_redis = self._shared is not None and settings.redis_cache
        if self._shared is not None:
            self.lookups = batched_lookups(self._shared, spec.keys, self.metrics.redis_batch_size.observe)
            self._fill_script = self._shared.register_script(FILL_IF_UNCHANGED)
        self.redis_breaker = CircuitBreaker("redis", failure_ratio=0.5, window_s=5, min_calls=5, open_s=2)
        self.pg_breaker = CircuitBreaker("postgres", failure_ratio=0.5, window_s=5, min_calls=10, open_s=2)
        self.fallback = Bulkhead("postgres-fallback", settings.fallback_max_inflight, settings.fallback_max_wait_s)
        self.invalidator = Invalidator(
            pg,
            self._shared,
            spec.keys,
            spec.sql if spec.outbox else None,
            self.metrics,
            self._forget,
            track_lsn=bool(self.replicas),
            ack_timeout_s=settings.invalidation_ack_timeout_s,
        )
        # With neither Redis nor an outbox, a write has no one else to tell: `_forget` was all of it.
        self._tells_others = self.invalidator.broadcast is not None or self.invalidator.outbox is not None
        # For caches of answers that draw on many items (search pages): fed by the listener below.
        self.changes = Changes(clock)

    async def reply(self, item_id: int) -> Reply:
        """The item's answer: 200 with its JSON, or 404."""
        cached = self.cached(item_id)
        return await self.load(item_id) if cached is None else cached

    def cached(self, item_id: int) -> Reply | None:
        """The item's answer from this process's caches; None when they don't hold it (then `load`).

        Not a coroutine, and the caches hold whole replies: a hit is found without a coroutine or a new
        object, so a hot handler answers it at once (`tenk.platform.lane.declare`)."""
        if not self.settings.local_cache:
            return None
        cached = self.local.get(item_id)
        if cached is None:
            cached = self.missing.get(item_id)
            if cached is None:
                self._local_miss.inc()
                return None
        self._local_hit.inc()
        return cached

    async def load(self, item_id: int) -> Reply:
        """The item's answer past this process's caches (`cached`), which keep it."""
        # An id within the ceiling needs no coroutine to say so.
        if item_id > self.ceiling.highest and await self.ceiling.beyond(item_id):
            self.metrics.past_ceiling.inc()
            return self.not_found
        return await self.loads.do(item_id, lambda: self._load(item_id))

    async def _highest_id(self) -> int:
        highest: int = await self.pg.fetchval(self.spec.highest_id)
        return highest

    async def _load(self, item_id: int) -> Reply:
        epoch, missing_epoch = self.local.epoch, self.missing.epoch
        if self._through_redis:
            value, from_redis = await self._load_through_redis(item_id)
        else:
            self.metrics.db_read_normal.inc()
            value, from_redis = await self._select(item_id), False
        if value == MISSING:
            if self.settings.local_cache:
                self.missing.put(item_id, self.not_found, epoch=missing_epoch)
            return self.not_found
        kept = reply = Reply(200, value)
        if self.spec.x_cache:
            kept = _with_header(reply, _HIT)
            reply = kept if from_redis else _with_header(Reply(200, value), _MISS)
        if self.settings.local_cache:
            self.local.put(item_id, kept, epoch=epoch, ttl_s=self._jitter(self.settings.local_ttl_s))
        return reply

    async def _load_through_redis(self, item_id: int) -> tuple[bytes, bool]:
        """(the value, whether Redis held it)."""
        looked_up = await self._redis_lookup(item_id)
        if looked_up is None:
            async with self.fallback.slot():
                self.metrics.db_read_fallback.inc()
                return await self._select(item_id), False
        cached, generation, written_lsn = looked_up
        if cached is not None:
            self.metrics.redis_hit.inc()
            return cached, True
        self.metrics.redis_miss.inc()
        self.metrics.db_read_normal.inc()
        value = await self._select(item_id, int(written_lsn) if written_lsn else 0)
        ttl_s = self.settings.negative_ttl_s if value == MISSING else self._jitter(self.settings.redis_ttl_s)
        await self._fill(item_id, generation, value, ttl_s)
        return value, False

    async def _redis_lookup(self, item_id: int) -> Lookup | None:
        """[cached value, generation, written LSN], or None when Redis cannot be asked (breaker open, or
        it failed, or there is no Redis)."""
        lookups = self.lookups
        call = self.redis_breaker.call(redis_is_down)
        if call is None or lookups is None:
            return None
        try:
            with call:
                return await lookups.get(item_id)
        except REDIS_DOWN as exc:
            self.metrics.redis_error.inc()
            logger.debug("redis read of %s %s failed: %s", self.spec.item, item_id, exc)
            return None

    async def _fill(self, item_id: int, generation: bytes | None, value: bytes, ttl_s: float) -> None:
        """Cache what was read, unless the item was written since the lookup. Best effort: the caller
        already has its answer, so a refused or failed fill is counted, never raised."""
        call = self.redis_breaker.call(redis_is_down)
        if call is None or self._shared is None:
            return
        keys = self.spec.keys
        try:
            with call:
                await self._fill_script(
                    keys=[keys.value_key(item_id), keys.generation_key(item_id)],
                    args=[generation.decode() if generation is not None else "", value, int(ttl_s * 1000)],
                )
        except REDIS_DOWN as exc:
            # A full Redis answers OOM here: it is up, so the breaker was not told otherwise.
            self.metrics.fills_failed.inc()
            logger.debug("redis fill of %s %s failed: %s", self.spec.item, item_id, exc)

    async def _select(self, item_id: int, written_lsn: WrittenLsn = None) -> bytes:
        """The row from a replica that has replayed `written_lsn` (see `_replicas.py`), or from the
        primary."""
        call = self.pg_breaker.call(postgres_is_down)
        if call is None:
            raise CircuitOpenError("postgres", self.pg_breaker.retry_after_s())
        with call:
            answered, row = False, None
            if written_lsn is not None and self.replicas:
                answered, row = await self._on_replica(item_id, written_lsn)
            if not answered:
                row = await self.rows.get(item_id)
        if row is None:
            return MISSING
        return row.encode() if isinstance(row, str) else row

    async def _on_replica(self, item_id: int, written_lsn: int) -> tuple[bool, Row]:
        """(answered, row): answered False when the replica has not replayed `written_lsn`, or failed."""
        pool = self.replicas.next()
        try:
            if written_lsn and not await pool.fetchval(REPLAYED_PAST, written_lsn):
                self.metrics.replica_behind.inc()
                return False, None
            row = await self.spec.load_one(pool, item_id)
        except POSTGRES_ERRORS as exc:
            if not postgres_is_down(exc):
                raise
            logger.debug("replica read failed (%s); the primary answers", exc)
            return False, None
        self.metrics.db_read_replica.inc()
        return True, row

    def read_pool(self) -> asyncpg.Pool:
        """For reads that are not cached and may lag (listings): a replica when there is one."""
        return self.replicas.next() if self.replicas else self.pg

    def _jitter(self, ttl: float) -> float:
        spread = self.settings.ttl_jitter
        return ttl * (1 + random.uniform(-spread, spread)) if spread else ttl

    async def invalidate(self, item_id: int) -> None:
        """After a committed write: drop every cached copy, here and in every other process; returns once
        every process has confirmed, or after `invalidation_ack_timeout_s`."""
        self._forget(item_id)
        self.changes.changed()
        self.metrics.invalidated_by_write.inc()
        if self._tells_others:
            await self.invalidator.after_write(item_id)

    def _forget(self, item_id: int) -> None:
        """Drop what this process holds on an item just written: created, it may be past the ceiling.
        A load already in flight may have read the old row: later reads start a load of their own."""
        self.loads.forget(item_id)
        self.local.invalidate(item_id)
        self.missing.invalidate(item_id)
        self.ceiling.raise_to(item_id)

    def _apply_invalidation(self, data: bytes) -> None:
        # Whatever it names, a message says that some item changed.
        self.changes.changed()
        with suppress(ValueError):
            self._forget(int(data))
            self.metrics.invalidated_by_message.inc()

    async def listen_for_invalidations(self, ready: asyncio.Event) -> None:
        """Apply (and confirm) every process's invalidations, this one's too; reconnect with backoff when
        Redis goes away."""
        broadcast = self.invalidator.broadcast
        if broadcast is None:
            raise RuntimeError(f"cache {self.spec.name!r} has no Redis to hear invalidations from")
        backoff = Backoff(0.1, 2.0)
        while True:
            try:
                async with broadcast.subscription() as subscription:
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
                logger.warning(
                    "%s invalidation listener lost redis (%s); retrying in %.1fs", self.spec.name, exc, delay
                )
                await asyncio.sleep(delay)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The cache's background work while the block runs: its invalidation listener (with Redis) and
        its outbox replay (with an outbox); nothing reads items ahead of requests."""
        name = self.spec.name
        listener: asyncio.Task[None] | None = None
        replayer: asyncio.Task[None] | None = None
        if self.invalidator.broadcast is not None:
            ready = asyncio.Event()
            listener = asyncio.create_task(self.listen_for_invalidations(ready), name=f"{name}-invalidations")
            # Wait briefly so that a process is subscribed before it serves; don't hang start-up if Redis is down.
            with suppress(TimeoutError):
                await asyncio.wait_for(ready.wait(), _START_WAIT_S)
        if self.invalidator.outbox is not None:
            # Invalidations left undelivered (by a writer that died, or while Redis was down) go out before
            # this process serves; don't hang start-up if Postgres or Redis is down.
            with suppress(TimeoutError, *POSTGRES_ERRORS, *REDIS_DOWN):
                await asyncio.wait_for(self.invalidator.replay(), _START_WAIT_S)
            replayer = asyncio.create_task(self.invalidator.replay_forever(), name=f"{name}-invalidation-replay")
        live_gauges.add("tenk_breaker_state", "Circuit breaker state: 0 closed, 1 open, 2 half-open.", self.gauges)
        try:
            yield
        finally:
            live_gauges.remove("tenk_breaker_state", self.gauges)
            await cancel_and_wait(replayer)
            await cancel_and_wait(listener)

    def gauges(self) -> list[tuple[dict[str, str], float]]:
        name = self.spec.name
        return [
            ({"breaker": f"{name}-redis"}, float(self.redis_breaker.state)),
            ({"breaker": f"{name}-postgres"}, float(self.pg_breaker.state)),
        ]
