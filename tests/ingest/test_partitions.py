"""The events table by day (migration 0006): existing rows migrate whole, retention drops old days,
and events of a day without a partition are kept until it is made."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta

import asyncpg
import pytest

from harness.stack import Stack
from tenk.ingest import partitions
from tenk.stack.migrate import CREATE_LEDGER, bundled_migrations, migrate
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker

PARTITIONING = 6  # the migration that partitions events


@pytest.fixture(scope="module")
async def unpartitioned(stack: Stack) -> AsyncIterator[str]:
    """A database of its own in the suite's Postgres, migrated up to just before partitioning."""
    name = f"tenk_parts_{uuid.uuid4().hex[:8]}"
    # Creating a database is the superuser's; the app's role owns it, as it owns the application database.
    admin = await asyncpg.connect(stack.pg.superuser_url)
    await admin.execute(f'CREATE DATABASE "{name}" OWNER "{stack.pg.app_role}"')
    dsn = stack.pg.url_for(name)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(CREATE_LEDGER)
        for migration in bundled_migrations():
            if migration.version < PARTITIONING:
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", migration.version, migration.name
                )
    finally:
        await conn.close()
    try:
        yield dsn
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


def _at(day: date, hour: int = 12) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


async def _insert(conn: asyncpg.Connection, ts: datetime) -> str:
    event_id = str(uuid.uuid4())
    await conn.execute(
        "INSERT INTO events (event_id, source, ts, payload) VALUES ($1::text::uuid, 'parts', $2, '{}')", event_id, ts
    )
    return event_id


async def _partition_of(conn: asyncpg.Connection, event_id: str) -> str:
    sql = "SELECT tableoid::regclass::text FROM events WHERE event_id = $1::text::uuid"
    return str(await conn.fetchval(sql, event_id))


async def test_migration_keeps_every_event_and_retention_drops_only_whole_old_days(unpartitioned: str) -> None:
    conn = await asyncpg.connect(unpartitioned)
    try:
        today: date = await conn.fetchval("SELECT (now() AT TIME ZONE 'UTC')::date")
        old_day, recent_day = today - timedelta(days=40), today - timedelta(days=10)
        stored = {
            "old": await _insert(conn, _at(old_day)),
            "recent": await _insert(conn, _at(recent_day)),
            "today": await _insert(conn, _at(today, 0)),
            "ancient": await _insert(conn, datetime(2001, 1, 1, tzinfo=UTC)),
        }
        assert "0006_events_partitioned.sql" in await migrate(unpartitioned)

        assert await conn.fetchval("SELECT count(*) FROM events") == len(stored)
        assert await _partition_of(conn, stored["old"]) == f"events_{old_day:%Y%m%d}"
        assert await _partition_of(conn, stored["recent"]) == f"events_{recent_day:%Y%m%d}"
        assert await _partition_of(conn, stored["today"]) == f"events_{today:%Y%m%d}"
        assert await _partition_of(conn, stored["ancient"]) == "events_default"
        # The key the writer's ON CONFLICT names holds across partitions: the same event again adds nothing.
        again = await conn.execute(
            "INSERT INTO events (event_id, source, ts, payload) SELECT event_id, source, ts, payload FROM events "
            "ON CONFLICT (event_id, ts) DO NOTHING"
        )
        assert again == "INSERT 0 0"

        done = await partitions.maintain(conn, retention_days=30)
        assert done.dropped == [f"events_{old_day:%Y%m%d}"]
        assert done.expired_from_default == 1
        remaining = {row[0] for row in await conn.fetch("SELECT event_id::text FROM events")}
        assert remaining == {stored["recent"], stored["today"]}
        names = {row[0] for row in await conn.fetch(partitions._PARTITIONS)}
        for offset in range(-1, partitions.AHEAD_DAYS + 1):
            assert f"events_{today + timedelta(days=offset):%Y%m%d}" in names
        # Nothing left to do: a second round changes nothing.
        assert await partitions.maintain(conn, retention_days=30) == partitions.Maintenance([], [], 0)
    finally:
        await conn.close()


async def test_an_event_of_a_day_without_a_partition_is_kept_and_moves_in_when_it_is_made(unpartitioned: str) -> None:
    await migrate(unpartitioned)
    conn = await asyncpg.connect(unpartitioned)
    try:
        today: date = await conn.fetchval("SELECT (now() AT TIME ZONE 'UTC')::date")
        far = today + timedelta(days=20)
        event_id = await _insert(conn, _at(far, 23))
        assert await _partition_of(conn, event_id) == "events_default"
        assert await conn.fetchval("SELECT tenk_event_partition($1)", far) is True
        assert await _partition_of(conn, event_id) == f"events_{far:%Y%m%d}"
        assert await conn.fetchval("SELECT count(*) FROM events WHERE event_id = $1::text::uuid", event_id) == 1
    finally:
        await conn.close()


async def test_a_worker_drops_the_days_past_retention_when_it_starts(stack: Stack, spawn_worker: SpawnWorker) -> None:
    conn = await asyncpg.connect(stack.pg.url)
    try:
        today: date = await conn.fetchval("SELECT (now() AT TIME ZONE 'UTC')::date")
        expired, kept = today - timedelta(days=500), today - timedelta(days=300)
        for day in (expired, kept):
            await conn.fetchval("SELECT tenk_event_partition($1)", day)
        expired_id, kept_id = await _insert(conn, _at(expired)), await _insert(conn, _at(kept))
        worker = spawn_worker(stack, "w-retention", TENK_INGEST_RETENTION_DAYS="400")

        async def expired_dropped() -> bool:
            return bool(await conn.fetchval("SELECT to_regclass($1) IS NULL", f"events_{expired:%Y%m%d}"))

        await eventually(expired_dropped, 60, f"the worker to drop events_{expired:%Y%m%d}")
        assert await conn.fetchval("SELECT count(*) FROM events WHERE event_id = $1::text::uuid", expired_id) == 0
        assert await _partition_of(conn, kept_id) == f"events_{kept:%Y%m%d}", worker.log_tail()
    finally:
        await conn.execute("DELETE FROM events WHERE source = 'parts'")
        await conn.execute(f'DROP TABLE IF EXISTS "events_{kept:%Y%m%d}"')
        await conn.close()
