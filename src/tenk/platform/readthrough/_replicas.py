"""Read replicas (TENK_DATABASE_REPLICA_URLS) that a cache's misses may read, taken in turn.

A replica replays the primary's WAL some time after the primary committed it. A miss that read a
lagging replica right after a write, and cached what it read, would put the old row back after the
write's invalidation. So every invalidation records the primary's WAL position after the write
(`KeySpace.written_lsn_key`, see `_invalidation.py`), a miss reads it along with the generation, and a
replica serves the miss only once `pg_last_wal_replay_lsn()` has reached it; otherwise the primary does
(`ReadCache._select`). Items with no recorded write (none within `GENERATION_TTL_S`) read the replica
directly. When the position is unknown (Redis down or not used) the primary answers.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import asyncpg

from tenk.platform.connections import create_pg_pool

# The position a miss must see: None when unknown (read the primary), 0 when no write is recorded.
WrittenLsn = int | None


class Replicas:
    def __init__(self, pools: list[asyncpg.Pool]) -> None:
        self.pools = pools
        self._turns: Iterator[asyncpg.Pool] = itertools.cycle(pools)

    @classmethod
    async def open(cls, urls: Sequence[str], **pool_options: Any) -> Replicas:
        """A pool on each of `urls`, made by `create_pg_pool` with `pool_options`."""
        return cls([await create_pg_pool(url, **pool_options) for url in urls])

    def __bool__(self) -> bool:
        return bool(self.pools)

    def next(self) -> asyncpg.Pool:
        return next(self._turns)

    async def close(self) -> None:
        for pool in self.pools:
            await pool.close()
