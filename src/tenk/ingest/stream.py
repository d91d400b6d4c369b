"""Stream bookkeeping shared by the API and the workers: the group, the backlog, and safe trimming."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from tenk.ingest.keys import GROUP, STATS, STREAM

logger = logging.getLogger("tenk.ingest.stream")


async def ensure_group(redis: Redis) -> None:
    """Create the writers' group from the stream's first entry, so nothing added before it is skipped."""
    try:
        await redis.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


@dataclass(frozen=True)
class Backlog:
    lag: int
    pending: int
    stream_length: int
    consumers: int

    @property
    def total(self) -> int:
        return self.lag + self.pending


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def read_backlog(redis: Redis) -> Backlog:
    """The writers' group: undelivered (lag) and unacknowledged (pending) entries. One round trip.

    Added minus acknowledged (see `keys.STATS`) is the backlog; XINFO's own `lag` needs Redis 7.
    """
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hmget(STATS, ["added", "acked"])
        pipe.xlen(STREAM)
        pipe.xinfo_groups(STREAM)
        results = await pipe.execute(raise_on_error=False)
    (added, acked), length, groups = results
    backlog = max(0, int(added or 0) - int(acked or 0))
    if isinstance(groups, ResponseError):
        if "no such key" not in str(groups):
            raise groups
        groups = []
    for group in groups:
        if _text(group["name"]) == GROUP:
            pending = int(group["pending"])
            return Backlog(max(0, backlog - pending), pending, int(length), int(group["consumers"]))
    return Backlog(backlog, 0, int(length), 0)


def _parse_id(stream_id: Any) -> tuple[int, int]:
    ms, _, seq = _text(stream_id).partition("-")
    return int(ms), int(seq or 0)


async def trim_acknowledged(redis: Redis) -> int:
    """Drop the entries that every consumer group has both received and acknowledged; returns how many.

    For each group the first entry still needed is its oldest pending one or, with nothing pending, its
    last delivered one. Entries before the earliest of those are done everywhere.
    """
    try:
        groups = await redis.xinfo_groups(STREAM)
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
            summary = await redis.xpending(STREAM, _text(group["name"]))
            oldest = summary.get("min")
            if oldest is not None:
                needed = min(needed, _parse_id(oldest))
        keep_from = needed if keep_from is None else min(keep_from, needed)
    assert keep_from is not None
    # MINID removes entries with ids lower than it; exact (not `~`), so what stays is what is needed.
    trimmed = await redis.xtrim(STREAM, minid=f"{keep_from[0]}-{keep_from[1]}", approximate=False)
    return int(trimmed)
