"""Dead letters expire: the workers delete those older than TENK_INGEST_DEAD_LETTER_RETENTION_DAYS.

A writer key can send events that fail (conflicts, say) as fast as it can send at all; without an end
the table would grow for ever. Deleted in batches of EXPIRE_BATCH, each its own transaction, so a long
backlog of expired letters never holds a lock for long. The count /ingest/stats reports follows, kept by
triggers (migration 0008).
"""

from __future__ import annotations

import logging

import asyncpg

from tenk.ingest import queries

logger = logging.getLogger("tenk.ingest.dead_letters")

EXPIRE_BATCH = 10_000


async def expire(conn: asyncpg.Connection, retention_days: int) -> int:
    """Delete the dead letters older than `retention_days` (none with 0); returns how many went."""
    if retention_days <= 0:
        return 0
    deleted = 0
    while True:
        status: str = await conn.execute(queries.EXPIRE_DEAD_LETTERS, retention_days, EXPIRE_BATCH)
        batch = int(status.rsplit(" ", 1)[1])
        deleted += batch
        if batch < EXPIRE_BATCH:
            break
    if deleted:
        logger.info("%d dead letters older than %d days deleted", deleted, retention_days)
    return deleted
