"""The worker's Postgres side: one connection, a staging table made once for it, and one transaction
per flush. Data errors are isolated by bisection; connection trouble is retried, never dead-lettered."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import asyncpg

from tenk.ingest import codec, metrics, queries
from tenk.ingest.settings import WriteMode

logger = logging.getLogger("tenk.ingest.writer")

T = TypeVar("T")


class BadEntry(Exception):
    """An entry that cannot be turned into parameters (INSERT mode only; COPY leaves this to Postgres)."""


# What one event's content can provoke. Anything else (connection lost, server shutting down, no
# such table) says nothing about the events, so their flush is retried rather than dead-lettered.
DATA_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.DataError,
    asyncpg.IntegrityConstraintViolationError,
    asyncpg.ProgramLimitExceededError,
    BadEntry,
)
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)


class GiveUp(Exception):
    """Postgres stayed unreachable past the shutdown deadline; the entries stay pending in Redis."""


@dataclass(frozen=True)
class DeadLetter:
    stream_id: str
    entry: bytes
    reason: str
    deliveries: int


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


class PostgresWriter:
    def __init__(self, dsn: str, mode: WriteMode, consumer: str) -> None:
        self.dsn = dsn
        self.mode = mode
        self.consumer = consumer
        self.give_up_at: float | None = None
        self._conn: asyncpg.Connection | None = None

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            conn = await asyncpg.connect(
                self.dsn,
                timeout=5,
                command_timeout=60,
                server_settings={"application_name": f"tenk-worker:{self.consumer}", "timezone": "UTC"},
            )
            await conn.execute(queries.CREATE_STAGING)
            self._conn = conn
        return self._conn

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                await asyncio.wait_for(conn.close(), 2)
            except Exception:
                conn.terminate()

    async def _retrying(self, op: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        backoff = 0.05
        while True:
            try:
                return await op(await self._connection())
            except DATA_ERRORS:
                raise
            except TRANSIENT_ERRORS as exc:
                metrics.FLUSH_RETRIES.inc()
                logger.warning("postgres write failed (%s: %s); retrying", exc.__class__.__name__, exc)
                if self._conn is not None:
                    self._conn.terminate()
                    self._conn = None
                if self.give_up_at is not None and time.monotonic() > self.give_up_at:
                    raise GiveUp from exc
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    async def write(self, entries: list[bytes]) -> int:
        """Write the entries in one transaction; returns the rows inserted (repeated ids are skipped)."""
        if self.mode == "copy":
            return await self._retrying(lambda conn: self._copy(conn, entries))
        return await self._retrying(lambda conn: self._insert_each(conn, entries))

    async def _copy(self, conn: asyncpg.Connection, entries: list[bytes]) -> int:
        data = b"".join([codec.copy_line(entry) for entry in entries])
        async with conn.transaction():
            await conn.copy_to_table(queries.STAGING_TABLE, source=_once(data), columns=queries.STAGING_COLUMNS)
            status: str = await conn.execute(queries.INSERT_FROM_STAGING)
        return int(status.rsplit(" ", 1)[1])

    async def _insert_each(self, conn: asyncpg.Connection, entries: list[bytes]) -> int:
        rows = []
        for entry in entries:
            try:
                rows.append([field.decode() for field in entry.split(b"\t", codec.ENTRY_FIELDS - 1)])
            except UnicodeDecodeError as exc:
                raise BadEntry(f"not UTF-8: {exc}") from None
        written = 0
        async with conn.transaction():
            for event_id, source, ts, accepted_us, payload in rows:
                status: str = await conn.execute(queries.INSERT_ONE, event_id, source, ts, payload, accepted_us)
                written += int(status.rsplit(" ", 1)[1])
        return written

    async def write_isolating(self, items: list[tuple[bytes, bytes, int]]) -> tuple[int, list[DeadLetter]]:
        """Write (stream_id, entry, deliveries) items; an entry Postgres refuses is returned as a dead
        letter and everything else still lands. One bad entry in n costs about 2*log2(n) extra flushes."""
        if not items:
            return 0, []
        try:
            return await self.write([entry for _, entry, _ in items]), []
        except DATA_ERRORS as exc:
            if len(items) == 1:
                stream_id, entry, deliveries = items[0]
                reason = f"{exc.__class__.__name__}: {exc}"[:1000]
                return 0, [DeadLetter(stream_id.decode(), entry, reason, deliveries)]
        middle = len(items) // 2
        left_rows, left_dead = await self.write_isolating(items[:middle])
        right_rows, right_dead = await self.write_isolating(items[middle:])
        return left_rows + right_rows, left_dead + right_dead

    async def dead_letter(self, letters: list[DeadLetter]) -> None:
        rows = [(d.stream_id, codec.entry_event_id(d.entry), d.reason, d.entry, d.deliveries) for d in letters]

        async def insert(conn: asyncpg.Connection) -> None:
            await conn.executemany(queries.INSERT_DEAD_LETTER, rows)

        await self._retrying(insert)
