"""The API's ingest state: the stream producer, the backlog that backpressure reads, and Redis set-up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from fastapi import FastAPI
from redis.asyncio import Redis

from tenk.background import cancel_and_wait
from tenk.connections import REDIS_DOWN, create_redis
from tenk.ingest.producer import StreamProducer
from tenk.ingest.settings import IngestSettings
from tenk.ingest.stream import Backlog, ensure_group, read_backlog
from tenk.ops.metrics import live_gauges
from tenk.settings import Settings

logger = logging.getLogger("tenk.ingest.service")


class IngestService:
    def __init__(self, pg: asyncpg.Pool, redis: Redis, settings: IngestSettings) -> None:
        self.pg = pg
        self.redis = redis
        self.settings = settings
        self.producer = StreamProducer(redis)
        self.backlog: Backlog | None = None
        # Read on every POST; refreshed in the background so that a POST costs no extra round trip.
        self.over_capacity = False

    async def refresh_backlog(self) -> Backlog:
        backlog = await read_backlog(self.redis)
        self.backlog = backlog
        self.over_capacity = backlog.total > self.settings.max_backlog
        return backlog

    async def watch_backlog(self) -> None:
        interval = self.settings.backlog_poll_ms / 1000
        while True:
            try:
                await self.refresh_backlog()
            except REDIS_DOWN as exc:
                # The XADDs fail too while Redis is away; they answer 503 on their own.
                logger.debug("backlog unreadable: %s", exc)
            await asyncio.sleep(interval)

    def gauges(self) -> list[tuple[dict[str, str], float]]:
        if self.backlog is None:
            return []
        return [
            ({"kind": "lag"}, float(self.backlog.lag)),
            ({"kind": "pending"}, float(self.backlog.pending)),
        ]


async def prepare_redis(redis: Redis, settings: IngestSettings) -> None:
    """Make sure the group exists and the AOF fsync policy is the one TENK_INGEST_DURABILITY asks for."""
    await ensure_group(redis)
    config: dict[Any, Any] = await redis.config_get("appendonly")
    if config.get(b"appendonly", config.get("appendonly")) not in (b"yes", "yes"):
        logger.warning("redis runs without the AOF: accepted events are lost if it restarts")
    current: dict[Any, Any] = await redis.config_get("appendfsync")
    if current.get(b"appendfsync", current.get("appendfsync")) not in (
        settings.durability,
        settings.durability.encode(),
    ):
        await redis.config_set("appendfsync", settings.durability)
        logger.info("redis appendfsync set to %s", settings.durability)


@asynccontextmanager
async def ingest_lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    ingest = IngestSettings()
    # Its own client: a fsync-per-write Redis needs a longer timeout than the cache's fail-fast one.
    redis = create_redis(settings.model_copy(update={"redis_timeout_s": ingest.redis_timeout_s}), max_connections=16)
    service = IngestService(app.state.pg, redis, ingest)
    app.state.ingest = service
    try:
        await prepare_redis(redis, ingest)
    except REDIS_DOWN as exc:
        logger.warning("redis not ready for ingestion at start-up (%s); POST /events answers 503 until it is", exc)
    service.producer.start()
    watcher = asyncio.create_task(service.watch_backlog(), name="ingest-backlog")
    live_gauges.add("tenk_ingest_backlog", "Events accepted and not yet written, by kind.", service.gauges)
    try:
        yield
    finally:
        live_gauges.remove("tenk_ingest_backlog", service.gauges)
        await cancel_and_wait(watcher)
        await service.producer.stop()
        await redis.aclose()
