"""A batch of distinct UUIDv7 ids on one day goes by COPY straight into `events`, and is written exactly as
the staged flush would write it: the same rows, no duplicate, and every conflict still caught."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from harness.deadlines import deadline_s
from harness.stack import Stack, fresh_database
from tenk.ingest import codec
from tenk.ingest.writer import PostgresWriter
from tenk.stack.migrate import migrate
from tests.support.waiting import eventually

NOON = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture
async def dsn(stack: Stack) -> str:
    url = await fresh_database(stack, "tenk_straight_flush")
    await migrate(url)
    return url


@pytest.fixture
async def writer(dsn: str) -> AsyncIterator[PostgresWriter]:
    writer = PostgresWriter(dsn, "copy", "straight")
    yield writer
    await writer.close()


def _entry(at: datetime, payload: bytes = b'{"v": 1}', event_id: str | None = None) -> bytes:
    ms = (at - _EPOCH) // timedelta(milliseconds=1)
    accepted = b"%d" % ((at - _EPOCH) // timedelta(microseconds=1) + 1_500)
    return b"\t".join([(event_id or codec.uuid7(ms)).encode(), b"straight", at.isoformat().encode(), accepted, payload])


def _batch(entries: list[bytes], first: int = 0) -> list[tuple[bytes, bytes]]:
    return [(b"%d-0" % (first + n), entry) for n, entry in enumerate(entries)]


def _flushes() -> tuple[float, float]:
    """(straight, staged) flushes so far, as /metrics exports them."""
    straight = REGISTRY.get_sample_value("tenk_ingest_flushes_total", {"way": "straight"})
    staged = REGISTRY.get_sample_value("tenk_ingest_flushes_total", {"way": "staged"})
    return straight or 0.0, staged or 0.0


async def _stored(dsn: str) -> list[tuple[str, datetime, datetime, str]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT event_id::text, ts, accepted_at, payload::text FROM events ORDER BY event_id")
        return [tuple(row) for row in rows]
    finally:
        await conn.close()


async def test_a_batch_of_new_ids_on_one_day_is_copied_straight_with_the_rows_the_staged_way_writes(
    dsn: str, writer: PostgresWriter
) -> None:
    entries = [_entry(NOON + timedelta(seconds=n), b'{"n": %d, "path": "a\\\\b"}' % n) for n in range(50)]
    before = _flushes()
    assert await writer.write(_batch(entries)) == (50, set())
    assert _flushes() == (before[0] + 1, before[1])
    straight = await _stored(dsn)

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("TRUNCATE events")
    finally:
        await conn.close()
    staged_writer = PostgresWriter(dsn, "copy", "staged")
    try:
        conn = await staged_writer._connection()
        assert await staged_writer._copy_staged(conn, _batch(entries), codec.shared_day(entries)) == (50, set())
    finally:
        await staged_writer.close()
    assert straight == await _stored(dsn)
    assert straight[0][3] == '{"n": 0, "path": "a\\\\b"}'


async def test_a_batch_written_again_is_a_no_op_taken_the_staged_way(dsn: str, writer: PostgresWriter) -> None:
    entries = [_entry(NOON + timedelta(milliseconds=n)) for n in range(20)]
    assert await writer.write(_batch(entries)) == (20, set())
    before = _flushes()
    # A redelivery: the question before the COPY finds the ids stored.
    assert await writer.write(_batch(entries, 100)) == (0, set())
    assert _flushes() == (before[0], before[1] + 1)
    assert len(await _stored(dsn)) == 20


async def test_an_id_stored_at_another_time_of_its_day_is_a_conflict_and_the_rest_is_written(
    dsn: str, writer: PostgresWriter
) -> None:
    # The primary key is (event_id, ts): a COPY alone would store this id a second time, at 13:00.
    stored = _entry(NOON)
    assert await writer.write(_batch([stored])) == (1, set())
    event_id = stored[:36].decode()
    impostor = _entry(NOON + timedelta(hours=1), b'{"v": "impostor"}', event_id)
    fresh = [_entry(NOON + timedelta(minutes=n)) for n in range(1, 10)]
    assert await writer.write(_batch([impostor, *fresh], 10)) == (9, {"10-0"})
    assert len(await _stored(dsn)) == 10


async def test_a_duplicate_committed_while_the_copy_waits_sends_the_batch_the_staged_way(
    dsn: str, writer: PostgresWriter
) -> None:
    entries = [_entry(NOON + timedelta(milliseconds=n)) for n in range(10)]
    other = await asyncpg.connect(dsn, server_settings={"application_name": "the other flush"})
    try:
        # Another flush holds the batch's third event, uncommitted: the question before the COPY cannot
        # see it, and the COPY waits on the primary key until that flush commits.
        transaction = other.transaction()
        await transaction.start()
        await other.execute(
            "INSERT INTO events (event_id, source, ts, payload) VALUES ($1::text::uuid, 'straight', $2, '{\"v\": 1}')",
            entries[2][:36].decode(),
            NOON + timedelta(milliseconds=2),
        )
        before = _flushes()
        flush = asyncio.create_task(writer.write(_batch(entries)))
        # Watched from a third connection: a transaction sees pg_stat_activity as it first read it.
        watcher = await asyncpg.connect(dsn)
        try:

            async def copy_waits() -> bool:
                assert not flush.done(), flush.result()
                waiting = await watcher.fetchval(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE application_name = 'tenk-worker:straight' AND wait_event_type = 'Lock'"
                )
                return bool(waiting)

            # The flush's first step is one query on an idle machine; the deadline covers a busy one.
            await eventually(copy_waits, deadline_s(), "the straight COPY to wait on the other flush's row")
        finally:
            await watcher.close()
        await transaction.commit()
        assert await flush == (9, set())
        assert _flushes() == (before[0], before[1] + 1)
    finally:
        await other.close()
    assert len(await _stored(dsn)) == 10


def test_event_rows_write_the_accepted_time_the_staged_flush_computes_from_its_microseconds(dsn: str) -> None:
    loop = asyncio.new_event_loop()
    conn = loop.run_until_complete(asyncpg.connect(dsn, server_settings={"timezone": "UTC"}))

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 10**18 - 1) | st.integers(2**53 - 2_000_000, 2**53 + 1_000_000))
    @example(0)
    @example(999_999)
    @example(2**53 - 1)  # the staged flush's exact limit, in 2255
    @example(2**53)
    def check(accepted_us: int) -> None:
        entry = b"\t".join([codec.uuid7().encode(), b"s", NOON.isoformat().encode(), b"%d" % accepted_us, b"{}"])
        rows = codec.event_rows([entry])
        if rows is None:
            # Left to the staged flush: past what it computes exactly, so both flushes store one time.
            assert accepted_us >= 2**53 - 1_000_000
            return
        accepted_at = rows.split(b"\t")[3].decode()
        assert loop.run_until_complete(
            conn.fetchval(
                "SELECT $1::text::timestamptz = 'epoch'::timestamptz + $2::bigint * interval '1 microsecond'",
                accepted_at,
                accepted_us,
            )
        ), accepted_at

    try:
        check()
    finally:
        loop.run_until_complete(conn.close())
        loop.close()
