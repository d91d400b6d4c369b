"""A flush costs the same however large `events` grows: its duplicate check probes an index, and never
reads the table whole (a NOT EXISTS planned as a hash anti join once made one worker 5x slower)."""

from __future__ import annotations

import asyncpg

from harness.stack import Stack, fresh_database
from tenk.ingest import codec, queries
from tenk.stack.migrate import migrate

STORED = 300_000
BATCH = 1_000


async def _staged(data: bytes) -> object:
    yield data


async def test_the_flush_insert_probes_the_events_index_instead_of_reading_every_stored_event(stack: Stack) -> None:
    dsn = await fresh_database(stack, "tenk_flush_plan")
    await migrate(dsn)
    conn = await asyncpg.connect(dsn, server_settings={"timezone": "UTC"})
    try:
        await conn.execute(
            "INSERT INTO events (event_id, source, ts, payload)"
            " SELECT gen_random_uuid(), 'plan', '2026-01-01', '{}' FROM generate_series(1, $1)",
            STORED,
        )
        lines = b"".join(
            codec.copy_line(
                b"%d-0" % n, b"\t".join([codec.uuid7().encode(), b"plan", b"2026-01-01T00:00:00Z", b"1", b"{}"])
            )
            for n in range(BATCH)
        )
        async with conn.transaction():
            await conn.execute(queries.CREATE_STAGING)
            await conn.copy_to_table(queries.STAGING_TABLE, source=_staged(lines), columns=queries.STAGING_COLUMNS)
            plan = "\n".join(row[0] for row in await conn.fetch("EXPLAIN " + queries.INSERT_FROM_STAGING))
    finally:
        await conn.close()
    # Every stored event is in the default partition (its day has none): probed by its key, per staged row.
    assert "Seq Scan on events_default" not in plan, plan
    assert "Hash" not in plan, plan
    assert "events_default_pkey on events_default" in plan, plan
