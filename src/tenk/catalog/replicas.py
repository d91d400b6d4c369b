"""Catalog reads from read replicas (TENK_DATABASE_REPLICA_URLS), never filling the cache with a row
older than a committed write.

A replica replays the primary's WAL some time after the primary committed it. A miss that read a
lagging replica right after a write, and cached what it read, would put the old row back after the
write's invalidation. So every invalidation records the primary's WAL position after the write
(`keys.written_lsn_key`, see `tenk.catalog.invalidation`), a miss reads it along with the generation,
and a replica serves the miss only once `pg_last_wal_replay_lsn()` has reached it; otherwise the
primary does. Products with no recorded write (none within `keys.GENERATION_TTL_S`) read the replica
directly. When the position is unknown (Redis down or not used) the primary answers.

Replicas are taken in turn; one that fails over is skipped for that read, which the primary answers.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator

import asyncpg

from tenk.catalog import metrics, queries
from tenk.connections import create_pg_pool
from tenk.outages import POSTGRES_ERRORS, postgres_is_down
from tenk.settings import Settings

logger = logging.getLogger("tenk.catalog.replicas")

# The position a miss must see: None when unknown (read the primary), 0 when no write is recorded.
WrittenLsn = int | None


class Replicas:
    def __init__(self, pools: list[asyncpg.Pool]) -> None:
        self.pools = pools
        self._turns: Iterator[asyncpg.Pool] = itertools.cycle(pools)

    @classmethod
    async def open(cls, settings: Settings) -> Replicas:
        return cls([await create_pg_pool(settings, dsn=url) for url in settings.database.replica_urls])

    def __bool__(self) -> bool:
        return bool(self.pools)

    def next(self) -> asyncpg.Pool:
        return next(self._turns)

    async def product_json(self, product_id: int, written_lsn: WrittenLsn) -> tuple[bool, str | None]:
        """(answered, row): answered False when no replica may serve this read, or it failed."""
        if not self.pools or written_lsn is None:
            return False, None
        pool = self.next()
        try:
            if written_lsn and not await pool.fetchval(queries.REPLAYED_PAST, written_lsn):
                metrics.REPLICA_BEHIND.inc()
                return False, None
            row: str | None = await pool.fetchval(queries.PRODUCT_BY_ID, product_id)
        except POSTGRES_ERRORS as exc:
            if not postgres_is_down(exc):
                raise
            logger.debug("replica read failed (%s); the primary answers", exc)
            return False, None
        metrics.DB_READ_REPLICA.inc()
        return True, row

    async def close(self) -> None:
        for pool in self.pools:
            await pool.close()
