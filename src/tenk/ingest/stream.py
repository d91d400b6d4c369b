"""Stream bookkeeping shared by the API and the workers: the group, the backlog, and safe trimming."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from tenk.ingest.keys import GROUP, RECONCILE, RECORD_SHARDS, SHARDS_SEEN, stats_key, stream_key
from tenk.platform import reply_text

logger = logging.getLogger("tenk.ingest.stream")


async def ensure_group(redis: Redis, shard: int = 0) -> None:
    """Create the writers' group from the stream's first entry, so nothing added before it is skipped."""
    try:
        await redis.xgroup_create(stream_key(shard), GROUP, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


async def shards_in_use(redis: Redis, configured: int) -> int:
    """Record `configured` as a shard count in use, and return the highest any process has recorded:
    the shards that may hold entries (see `keys.SHARDS_SEEN`)."""
    return int(await redis.eval(RECORD_SHARDS, 1, SHARDS_SEEN, configured))


@dataclass(frozen=True)
class Backlog:
    lag: int
    pending: int
    stream_length: int
    consumers: int
    # The encoded size of the lag and pending entries: what the stream holds that is not yet written.
    bytes: int = 0

    @property
    def total(self) -> int:
        return self.lag + self.pending

    @classmethod
    def summed(cls, shards: list[Backlog]) -> Backlog:
        """The backlog of all shards together (consumers: the most any one shard has)."""
        return cls(
            sum(b.lag for b in shards),
            sum(b.pending for b in shards),
            sum(b.stream_length for b in shards),
            max((b.consumers for b in shards), default=0),
            sum(b.bytes for b in shards),
        )


async def read_backlogs(redis: Redis, shards: int) -> list[Backlog]:
    """Every shard's backlog, read concurrently (on a cluster, each from its own node)."""
    if shards == 1:
        return [await read_backlog(redis)]
    return list(await asyncio.gather(*(read_backlog(redis, shard) for shard in range(shards))))


async def read_backlog(redis: Redis, shard: int = 0) -> Backlog:
    """The writers' group: undelivered (lag) and unacknowledged (pending) entries. One round trip.

    Added minus acknowledged (see `keys.STATS`) is the backlog; XINFO's own `lag` needs Redis 7.
    """
    stream = stream_key(shard)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hmget(stats_key(shard), ["added", "acked", "added_bytes", "acked_bytes"])
        pipe.xlen(stream)
        pipe.xinfo_groups(stream)
        results = await pipe.execute(raise_on_error=False)
    counters, length, groups = results
    if isinstance(groups, ResponseError) and "no such key" in str(groups):
        groups = []  # no stream yet: nothing was ever added to this shard
    # Any other reply may be an error too (a cluster mid-failover answers CLUSTERDOWN): raised as itself, it
    # is the caller's outage to ride out, not a TypeError that ends the worker.
    for reply in (counters, length, groups):
        if isinstance(reply, Exception):
            raise reply
    added, acked, added_bytes, acked_bytes = counters
    backlog = max(0, int(added or 0) - int(acked or 0))
    size = max(0, int(added_bytes or 0) - int(acked_bytes or 0))
    for group in groups:
        if reply_text(group["name"]) == GROUP:
            pending = int(group["pending"])
            return Backlog(max(0, backlog - pending), pending, int(length), int(group["consumers"]), size)
    return Backlog(backlog, 0, int(length), 0, size)


async def summed_counters(redis: Redis, shards: int, fields: list[str]) -> dict[str, int]:
    """Per-shard counters (vanished, reconciled) added up over the shards."""
    replies = await asyncio.gather(*(redis.hmget(stats_key(shard), fields) for shard in range(shards)))
    return {name: sum(int(reply[i] or 0) for reply in replies) for i, name in enumerate(fields)}


@dataclass(frozen=True)
class Correction:
    entries: int
    bytes: int


async def reconcile_backlog(redis: Redis, limit: int, shard: int = 0) -> Correction | None:
    """Reset the backlog counters to what the group's pending list and undelivered entries hold.

    Returns how far they were off (positive: they overcounted), or None when the backlog is larger
    than `limit` entries and counting it would block Redis for too long (see `keys.RECONCILE`).
    """
    reply: Any = await redis.eval(RECONCILE, 2, stream_key(shard), stats_key(shard), GROUP, limit)
    if reply is None:
        return None
    entries, size = (int(value) for value in reply)
    if entries or size:
        logger.warning("backlog counter was off by %d entries and %d bytes; reset from the stream", entries, size)
    return Correction(entries, size)


def _parse_id(stream_id: Any) -> tuple[int, int]:
    ms, _, seq = reply_text(stream_id).partition("-")
    return int(ms), int(seq or 0)


async def trim_acknowledged(redis: Redis, shard: int = 0) -> int:
    """Drop the entries that every consumer group has both received and acknowledged; returns how many.

    For each group the first entry still needed is its oldest pending one or, with nothing pending, its
    last delivered one. Entries before the earliest of those are done everywhere.
    """
    stream = stream_key(shard)
    try:
        groups = await redis.xinfo_groups(stream)
    except ResponseError as exc:
        if "no such key" in str(exc):
            return 0
        raise
    if not groups:
        return 0
    keep_from: tuple[int, int] | None = None
    for group in groups:
        # The last delivered entry itself is kept: one entry, and no id arithmetic to get wrong.
        needed = _parse_id(group["last-delivered-id"])
        if int(group["pending"]) > 0:
            summary = await redis.xpending(stream, reply_text(group["name"]))
            oldest = summary.get("min")
            if oldest is not None:
                needed = min(needed, _parse_id(oldest))
        keep_from = needed if keep_from is None else min(keep_from, needed)
    assert keep_from is not None
    # MINID removes entries with ids lower than it; exact (not `~`), so what stays is what is needed.
    trimmed = await redis.xtrim(stream, minid=f"{keep_from[0]}-{keep_from[1]}", approximate=False)
    return int(trimmed)
