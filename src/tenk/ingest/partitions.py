"""Keeping the day partitions of `events` (migration 0006): made ahead of time, dropped past retention.

Every worker runs `maintain` at start and every `MAINTAIN_EVERY_S`; a transaction-scoped advisory
lock makes concurrent workers take turns (it lives in the transaction, so it works through a
transaction-mode pooler too). Events of a day without a partition are never refused: they wait in
`events_default` and move into their partition when it is made.

Retention is whole days: a day goes once all of it is older than TENK_INGEST_RETENTION_DAYS, so up to
one more day than that is kept. Dropping needs a short exclusive lock on `events`; with `lock_timeout`
it gives way to long readers instead of queueing inserts behind them for long, and retries a minute later.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import date, timedelta

import asyncpg

logger = logging.getLogger("tenk.ingest.partitions")

MAINTAIN_EVERY_S = 3600.0
# After a failed round (Postgres away, a lock not granted in time).
RETRY_AFTER_S = 60.0
# Partitions made ahead of today, so that a worker down for a while does not send today's events to
# the default partition.
AHEAD_DAYS = 3
_LOCK_KEY = 0x7E4C  # any constant; tenk.stack.migrate uses 0x7E4B
_LOCK_TIMEOUT = "2s"
_DAY_PARTITION = re.compile(r"^events_(\d{8})$")

_TODAY = "SELECT (now() AT TIME ZONE 'UTC')::date"
_PARTITIONS = """
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'events'::regclass
"""


@dataclass(frozen=True)
class Maintenance:
    created: list[str]
    dropped: list[str]
    expired_from_default: int


def day_partitions(names: list[str]) -> dict[date, str]:
    found = {}
    for name in names:
        match = _DAY_PARTITION.match(name)
        if match:
            digits = match.group(1)
            found[date(int(digits[:4]), int(digits[4:6]), int(digits[6:]))] = name
    return found


async def maintain(conn: asyncpg.Connection, retention_days: int) -> Maintenance:
    """Make the partitions from yesterday to AHEAD_DAYS ahead; with retention_days > 0, drop the days
    wholly older than that, and delete such rows from the default partition."""
    async with conn.transaction():
        await conn.execute(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'")
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
        today: date = await conn.fetchval(_TODAY)
        created = []
        for offset in range(-1, AHEAD_DAYS + 1):
            day = today + timedelta(days=offset)
            if await conn.fetchval("SELECT tenk_event_partition($1)", day):
                created.append(f"events_{day:%Y%m%d}")
        dropped: list[str] = []
        expired = 0
        if retention_days > 0:
            # Rows before this instant are past retention; a day goes once its end is before it.
            cutoff = today - timedelta(days=retention_days)
            for day, name in sorted(day_partitions([r[0] for r in await conn.fetch(_PARTITIONS)]).items()):
                if day + timedelta(days=1) <= cutoff:
                    await conn.execute(f'DROP TABLE "{name}"')
                    dropped.append(name)
            status: str = await conn.execute(
                "DELETE FROM events_default WHERE ts < $1::date::timestamp AT TIME ZONE 'UTC'", cutoff
            )
            expired = int(status.rsplit(" ", 1)[1])
            # What listed the dropped and deleted events (migration 0009) goes with them.
            await conn.execute("DELETE FROM events_elsewhere WHERE ts < $1::date::timestamp AT TIME ZONE 'UTC'", cutoff)
    if created or dropped or expired:
        logger.info("event partitions: made %s, dropped %s, %d expired rows deleted", created, dropped, expired)
    return Maintenance(created, dropped, expired)
