"""Dead letters are counted without reading them all, and expire after their retention."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from harness.stack import Stack, fresh_database
from tenk.ingest import dead_letters, queries
from tenk.stack.migrate import migrate


@pytest.fixture
async def conn(stack: Stack) -> AsyncIterator[asyncpg.Connection]:
    dsn = await fresh_database(stack, "tenk_dead_letters")
    await migrate(dsn)
    connection = await asyncpg.connect(dsn)
    try:
        yield connection
    finally:
        await connection.close()


def _letters(first: int, count: int) -> list[tuple[str, str, str, bytes, int]]:
    return [(f"{n}-0", f"id-{n}", "conflict", b"entry", 1) for n in range(first, first + count)]


async def test_the_kept_count_follows_every_insert_redelivery_expiry_and_truncate(conn: asyncpg.Connection) -> None:
    await conn.executemany(queries.INSERT_DEAD_LETTER, _letters(0, 30))
    # A redelivered batch dead-letters the same entries again: no new rows, no new count.
    await conn.executemany(queries.INSERT_DEAD_LETTER, _letters(20, 20))
    assert (
        await conn.fetchval(queries.DEAD_LETTER_COUNT)
        == 40
        == await conn.fetchval("SELECT count(*) FROM ingest_dead_letters")
    )

    await conn.execute("UPDATE ingest_dead_letters SET dead_at = now() - interval '31 days' WHERE event_id < 'id-2'")
    expired = await conn.fetchval("SELECT count(*) FROM ingest_dead_letters WHERE dead_at < now() - interval '30 days'")
    assert expired > 0
    assert await dead_letters.expire(conn, retention_days=30) == expired
    assert await conn.fetchval(queries.DEAD_LETTER_COUNT) == 40 - expired
    assert await dead_letters.expire(conn, retention_days=0) == 0, "0 keeps every dead letter"

    await conn.execute("TRUNCATE ingest_dead_letters")
    assert await conn.fetchval(queries.DEAD_LETTER_COUNT) == 0


async def test_expiry_deletes_in_batches_until_none_is_left(
    conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dead_letters, "EXPIRE_BATCH", 7)
    await conn.executemany(queries.INSERT_DEAD_LETTER, _letters(0, 50))
    await conn.execute("UPDATE ingest_dead_letters SET dead_at = now() - interval '2 days'")
    assert await dead_letters.expire(conn, retention_days=1) == 50
    assert await conn.fetchval(queries.DEAD_LETTER_COUNT) == 0


async def test_reading_the_count_never_reads_the_dead_letters(conn: asyncpg.Connection) -> None:
    plan = "\n".join(row[0] for row in await conn.fetch("EXPLAIN " + queries.DEAD_LETTER_COUNT))
    assert "ingest_dead_letters " not in plan + " ", plan
