"""The worker's Postgres side: one connection, and one transaction per flush, which COPYs a batch of new
ids on one day straight into `events` and any other batch through a staging table. Data errors are
isolated by bisection; connection trouble is retried, never dead-lettered; a schema that stays missing
stops the worker (see `SchemaMissing`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import asyncpg

from tenk.ingest import codec, metrics, queries
from tenk.ingest.settings import WriteMode
from tenk.platform import Backoff

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


# The dead-letter reason of an event whose id was already stored with other content.
CONFLICT = "conflict"


class GiveUp(Exception):
    """Postgres stayed unreachable past the shutdown deadline; the entries stay pending in Redis."""


class SchemaMissing(Exception):
    """A table or function the flush needs stayed missing (42P01, 42883) for SCHEMA_WAIT_S: the database
    is not migrated, or is the wrong one. Retrying forever would hide that; the worker stops, its entries pending."""


# Long enough for `tenk migrate` running beside a starting worker; short enough to surface the mistake.
SCHEMA_WAIT_S = 30.0


@dataclass(frozen=True)
class DeadLetter:
    stream_id: str
    entry: bytes
    reason: str
    deliveries: int


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


class PostgresWriter:
    def __init__(
        self,
        dsn: str,
        mode: WriteMode,
        consumer: str,
        connect_kwargs: dict[str, Any] | None = None,
        schema_wait_s: float = SCHEMA_WAIT_S,
        through_pooler: bool = False,
    ) -> None:
        self.dsn = dsn
        self.mode = mode
        self.consumer = consumer
        # `tenk.platform.connections.pooler_connect_kwargs`: what a transaction-mode pooler needs.
        self.connect_kwargs = connect_kwargs or {}
        # Through a transaction-mode pooler no session state may outlive a transaction: the staging
        # table is made in each flush instead of once per connection (see `queries.CREATE_STAGING`).
        self.through_pooler = through_pooler
        self.schema_wait_s = schema_wait_s
        self.give_up_at: float | None = None
        self._conn: asyncpg.Connection | None = None

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            conn = await asyncpg.connect(
                self.dsn,
                timeout=5,
                command_timeout=60,
                server_settings={"application_name": f"tenk-worker:{self.consumer}", "timezone": "UTC"},
                **self.connect_kwargs,
            )
            if self.mode == "copy" and not self.through_pooler:
                await conn.execute(queries.CREATE_SESSION_STAGING)
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
        backoff = Backoff(0.05, 1.0)
        schema_missing_since: float | None = None
        while True:
            try:
                return await op(await self._connection())
            except DATA_ERRORS:
                raise
            except (asyncpg.UndefinedTableError, asyncpg.UndefinedFunctionError) as exc:
                # A table or a function of the migrations is missing. Possibly transient (a migration is
                # running), never for long.
                schema_missing_since = schema_missing_since or time.monotonic()
                if time.monotonic() - schema_missing_since > self.schema_wait_s:
                    raise SchemaMissing(f"{exc}; is the database migrated (`tenk migrate`)?") from exc
                metrics.FLUSH_RETRIES.inc()
                logger.warning("postgres write failed (%s); retrying", exc)
                await backoff.sleep()
            except TRANSIENT_ERRORS as exc:
                metrics.FLUSH_RETRIES.inc()
                logger.warning("postgres write failed (%s: %s); retrying", exc.__class__.__name__, exc)
                if self._conn is not None:
                    self._conn.terminate()
                    self._conn = None
                if self.give_up_at is not None and time.monotonic() > self.give_up_at:
                    raise GiveUp from exc
                await backoff.sleep()

    async def write(self, entries: list[tuple[bytes, bytes]]) -> tuple[int, set[str]]:
        """Write (stream_id, entry) pairs in one transaction. Returns the rows inserted, and the stream
        ids of the entries whose event id was already stored with other content (conflicts); a
        repeated identical event is skipped without a trace. Only entries that `codec.entry_problem`
        passed, as the worker's are (`codec.shared_day` relies on it)."""
        if self.mode == "copy":
            return await self._retrying(lambda conn: self._copy(conn, entries))
        return await self._retrying(lambda conn: self._insert_each(conn, entries))

    async def _copy(self, conn: asyncpg.Connection, entries: list[tuple[bytes, bytes]]) -> tuple[int, set[str]]:
        shared_day = codec.shared_day([entry for _, entry in entries])
        if shared_day is not None:
            written = await self._copy_straight(conn, entries, shared_day)
            if written is not None:
                metrics.STRAIGHT_FLUSHES.inc()
                return written, set()
        metrics.STAGED_FLUSHES.inc()
        return await self._copy_staged(conn, entries, shared_day)

    async def _copy_straight(
        self, conn: asyncpg.Connection, entries: list[tuple[bytes, bytes]], day: datetime
    ) -> int | None:
        """COPY a batch of distinct ids on one day straight into `events` (see `queries.STORED_ON_DAY`);
        the rows written, or None when an id is stored already and the staged flush must sort it out."""
        rows = codec.event_rows([entry for _, entry in entries])
        if rows is None:
            return None
        # The ids are the entries' first 36 bytes (`codec.shared_day` checked their form).
        ids = b"{%b}" % b",".join([entry[:36] for _, entry in entries])
        try:
            async with conn.transaction():
                if await conn.fetchval(queries.STORED_ON_DAY, day, ids.decode()):
                    return None
                # "COPY <rows>"
                status = await conn.copy_to_table("events", source=_once(rows), columns=queries.EVENT_COLUMNS)
        except asyncpg.UniqueViolationError:
            # Stored by a concurrent flush after the question: the transaction is rolled back, nothing written.
            return None
        return int(status.split()[-1])

    async def _copy_staged(
        self, conn: asyncpg.Connection, entries: list[tuple[bytes, bytes]], shared_day: datetime | None
    ) -> tuple[int, set[str]]:
        data = b"".join([codec.copy_line(stream_id, entry) for stream_id, entry in entries])
        conflicts: set[str] = set()
        async with conn.transaction():
            if self.through_pooler:
                await conn.execute(queries.CREATE_STAGING)
            await conn.copy_to_table(queries.STAGING_TABLE, source=_once(data), columns=queries.STAGING_COLUMNS)
            if shared_day is not None:
                # "INSERT 0 <rows>"
                written = int((await conn.execute(queries.INSERT_FROM_STAGING_SHARED_DAY, shared_day)).split()[-1])
            elif (day := await conn.fetchval(queries.STAGING_DAY)) is not None:
                written = await conn.fetchval(queries.INSERT_FROM_STAGING_ONE_DAY, day)
            else:
                written = await conn.fetchval(queries.INSERT_FROM_STAGING)
            # Every row inserted: no id was repeated, so there is nothing to compare.
            if written < len(entries):
                conflicts = {row[0] for row in await conn.fetch(queries.CONFLICTS_IN_STAGING)}
        return written, conflicts

    async def _insert_each(self, conn: asyncpg.Connection, entries: list[tuple[bytes, bytes]]) -> tuple[int, set[str]]:
        rows = []
        for stream_id, entry in entries:
            try:
                fields = [field.decode() for field in entry.split(b"\t", codec.ENTRY_FIELDS - 1)]
            except UnicodeDecodeError as exc:
                raise BadEntry(f"not UTF-8: {exc}") from None
            rows.append((stream_id.decode(), fields))
        written = 0
        conflicts: set[str] = set()
        async with conn.transaction():
            for stream_key, (event_id, source, ts, accepted_us, payload) in rows:
                inserted: int = await conn.fetchval(queries.INSERT_ONE, event_id, source, ts, payload, accepted_us)
                written += inserted
                if not inserted and await conn.fetchval(queries.CONFLICT_ONE, event_id, source, ts, payload):
                    conflicts.add(stream_key)
        return written, conflicts

    async def write_isolating(self, items: list[tuple[bytes, bytes, int]]) -> tuple[int, list[DeadLetter]]:
        """Write (stream_id, entry, deliveries) items; an entry Postgres refuses, or one that conflicts
        with a stored event, is returned as a dead letter and everything else still lands. One bad
        entry in n costs about 2*log2(n) extra flushes."""
        if not items:
            return 0, []
        try:
            written, conflicts = await self.write([(stream_id, entry) for stream_id, entry, _ in items])
            letters = [
                DeadLetter(stream_id.decode(), entry, CONFLICT, deliveries)
                for stream_id, entry, deliveries in items
                if conflicts and stream_id.decode() in conflicts
            ]
            return written, letters
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
