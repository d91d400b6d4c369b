"""The API's ingest state: the stream producer, the backlog that backpressure reads, and Redis set-up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from fastapi import FastAPI
from redis.asyncio import Redis

from tenk.ingest import keys
from tenk.ingest.durability import DurabilityGuard
from tenk.ingest.producer import StreamProducer
from tenk.ingest.settings import IngestSettings
from tenk.ingest.stream import Backlog, ensure_group, read_backlogs, shards_in_use
from tenk.ops.tracing import tracing_on
from tenk.platform import (
    REDIS_DOWN,
    cancel_and_wait,
    connect_redis,
    create_redis,
    live_gauges,
    raise_if_cancelled,
    redis_options,
)
from tenk.settings import Settings

logger = logging.getLogger("tenk.ingest.service")


class IngestService:
    def __init__(self, pg: asyncpg.Pool, redis: Redis, settings: IngestSettings) -> None:
        self.pg = pg
        self.redis = redis
        self.settings = settings
        replica_wait_ms = settings.replica_wait_ms if settings.durability == "replicated" else None
        self.producer = StreamProducer(
            redis,
            settings.max_backlog,
            settings.max_backlog_bytes,
            settings.shards,
            replica_wait_ms,
            traced=tracing_on(),
        )
        # All shards together; `shard_backlogs` has each one.
        self.backlog: Backlog | None = None
        self.shard_backlogs: list[Backlog] = []
        # Every shard that may hold entries: more than ours after TENK_INGEST_SHARDS was lowered.
        self.shards_seen = settings.shards
        # Read on every POST; refreshed in the background so that a POST costs no extra round trip.
        # Backpressure holds in total and per shard: one hot source cannot fill its shard's share.
        self.over_capacity = False
        self.full_shards: frozenset[int] = frozenset()

    async def refresh_backlog(self) -> Backlog:
        self.shards_seen = await shards_in_use(self.redis, self.settings.shards)
        shards = await read_backlogs(self.redis, self.shards_seen)
        backlog = Backlog.summed(shards)
        self.backlog, self.shard_backlogs = backlog, shards
        self.over_capacity = (
            backlog.total > self.settings.max_backlog or backlog.bytes > self.settings.max_backlog_bytes
        )
        # A share per shard this API adds to; the others only drain.
        count = self.settings.shards
        self.full_shards = frozenset(
            shard
            for shard, one in enumerate(shards[:count])
            if count > 1
            and (one.total > self.settings.max_backlog / count or one.bytes > self.settings.max_backlog_bytes / count)
        )
        return backlog

    def refuses(self, entries: list[bytes]) -> bool:
        """Backpressure for these entries: the total is over its cap, or a shard they go to is over its share."""
        if self.over_capacity:
            return True
        full = self.full_shards
        return bool(full) and any(keys.shard_of(entry, self.settings.shards) in full for entry in entries)

    async def watch_backlog(self) -> None:
        interval = self.settings.backlog_poll_ms / 1000
        while True:
            try:
                await self.refresh_backlog()
            except REDIS_DOWN as exc:
                # The XADDs fail too while Redis is away; they answer 503 on their own.
                logger.debug("backlog unreadable: %s", exc)
            raise_if_cancelled()
            await asyncio.sleep(interval)

    def gauges(self) -> list[tuple[dict[str, str], float]]:
        if self.backlog is None:
            return []
        return [
            ({"kind": "lag"}, float(self.backlog.lag)),
            ({"kind": "pending"}, float(self.backlog.pending)),
        ]


async def prepare_redis(redis: Redis, settings: IngestSettings) -> None:
    """Make sure every shard's group exists. The AOF policy is Redis's own config: `DurabilityGuard` checks it."""
    for shard in range(settings.shards):
        await ensure_group(redis, shard)


@asynccontextmanager
async def ingest_lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    ingest = settings.ingest
    # Its own client: a fsync-per-write Redis needs a longer timeout than the cache's fail-fast one.
    options = {**redis_options(settings), "max_connections": 16, "timeout_s": ingest.redis_timeout_s}
    redis = create_redis(settings.resolved_redis_url, **options)
    service = IngestService(app.state.pg, redis, ingest)
    app.state.ingest = service
    try:
        await connect_redis(redis)
        await prepare_redis(redis, ingest)
    except REDIS_DOWN as exc:
        logger.warning("redis not ready for ingestion at start-up (%s); POST /events answers 503 until it is", exc)
    service.producer.start()
    watcher = asyncio.create_task(service.watch_backlog(), name="ingest-backlog")
    durability = DurabilityGuard(redis, ingest.durability)
    app.state.readiness_probes["redis_durability"] = (durability.verify, False)
    durability_watch = asyncio.create_task(durability.watch(), name="redis-durability")
    live_gauges.add("tenk_ingest_backlog", "Events accepted and not yet written, by kind.", service.gauges)
    try:
        yield
    finally:
        live_gauges.remove("tenk_ingest_backlog", service.gauges)
        await cancel_and_wait(watcher)
        await cancel_and_wait(durability_watch)
        await service.producer.stop()
        await redis.aclose()
