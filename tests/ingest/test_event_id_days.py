"""An event id names the day partition that holds its event, or the event is listed in events_elsewhere:
so finding an id (the writer's duplicate check, GET /events/{id}) reads one or two partitions and one
index, however many day partitions there are, and an id reused on another day is still a conflict."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from tenk.ingest import codec, partitions, queries
from tenk.ingest.writer import PostgresWriter
from tenk.stack.migrate import migrate
from tests.support.stack import Stack, fresh_database

PARTITIONS = 400
ROWS = 200
TODAY = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)


@pytest.fixture
async def dsn(stack: Stack) -> str:
    url = await fresh_database(stack, "tenk_event_id_days")
    await migrate(url)
    return url


def _entry(event_id: str, ts: datetime, payload: bytes = b'{"v": 1}') -> bytes:
    return b"\t".join([event_id.encode(), b"days", ts.isoformat().encode(), b"1", payload])


def _ids_of_every_kind(ts: datetime) -> dict[str, str]:
    ms = (ts - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    return {
        "generated from its ts": codec.uuid7(ms),
        "a v7 of another day": codec.uuid7(ms - 3 * 86_400_000),
        "a client's v4": str(uuid.uuid4()),
        "an idempotency key's v8": codec.keyed_id(b"key", 0, b"days", ts.isoformat().encode(), b"{}"),
    }


@pytest.mark.parametrize("mode", ["copy", "insert"])
async def test_an_id_reused_on_another_day_is_a_conflict_whatever_kind_of_id_it_is(dsn: str, mode: str) -> None:
    writer = PostgresWriter(dsn, mode, "days")  # type: ignore[arg-type]
    other_day = TODAY - timedelta(days=40)
    try:
        for kind, event_id in _ids_of_every_kind(TODAY).items():
            written, conflicts = await writer.write([(b"1-0", _entry(event_id, TODAY))])
            assert (written, conflicts) == (1, set()), kind
            # The same event again is no conflict; the same id on another day is, in either order of days.
            written, conflicts = await writer.write(
                [(b"2-0", _entry(event_id, TODAY)), (b"3-0", _entry(event_id, other_day))]
            )
            assert (written, conflicts) == (0, {"3-0"}), kind
        conn = await asyncpg.connect(dsn)
        try:
            for kind, event_id in _ids_of_every_kind(other_day).items():
                await writer.write([(b"4-0", _entry(event_id, other_day, b'{"v": 2}'))])
                stored = await conn.fetchval(queries.EVENT_BY_ID, uuid.UUID(event_id))
                assert stored is not None, f"{kind}: not found by its id"
                assert '"v": 2' in stored, kind
            assert await conn.fetchval("SELECT count(*) FROM events") == 8
        finally:
            await conn.close()
    finally:
        await writer.close()


async def test_retention_forgets_the_listed_ids_of_the_events_it_drops(dsn: str) -> None:
    writer = PostgresWriter(dsn, "copy", "days")
    old = TODAY - timedelta(days=60)
    try:
        await writer.write([(b"1-0", _entry(str(uuid.uuid4()), old)), (b"2-0", _entry(str(uuid.uuid4()), TODAY))])
    finally:
        await writer.close()
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM events_elsewhere") == 2
        await partitions.maintain(conn, retention_days=30)
        assert await conn.fetchval("SELECT count(*) FROM events_elsewhere") == 1
    finally:
        await conn.close()


async def _staged(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _shared_hits(plan: list[str]) -> int:
    match = re.search(r"shared hit=(\d+)", plan[next(i for i, line in enumerate(plan) if "Buffers" in line)])
    assert match is not None, plan
    return int(match.group(1))


async def test_at_400_day_partitions_a_flush_and_a_read_by_id_read_one_partition(dsn: str) -> None:
    conn = await asyncpg.connect(dsn, server_settings={"timezone": "UTC"})
    try:
        await conn.execute(
            "SELECT tenk_event_partition((now() AT TIME ZONE 'UTC')::date - d) FROM generate_series(2, $1) AS d",
            PARTITIONS,
        )
        ids = [codec.uuid7(int(TODAY.timestamp() * 1000) + n) for n in range(ROWS)]
        lines = b"".join(codec.copy_line(b"%d-0" % n, _entry(event_id, TODAY)) for n, event_id in enumerate(ids))
        async with conn.transaction():
            await conn.execute(queries.CREATE_STAGING)
            await conn.copy_to_table(queries.STAGING_TABLE, source=_staged(lines), columns=queries.STAGING_COLUMNS)
            day = await conn.fetchval(queries.STAGING_DAY)
            assert day == TODAY.replace(hour=0)
            one_day = [row[0] for row in await conn.fetch("EXPLAIN " + queries.INSERT_FROM_STAGING_ONE_DAY, day)]
            plan = [row[0] for row in await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + queries.INSERT_FROM_STAGING)]
        # A batch of one day reads that day's partition alone: the planner leaves out the other 400.
        probed = {match for line in one_day for match in re.findall(r" on (events_(?:\d+|default))\b", line)}
        assert probed == {f"events_{TODAY:%Y%m%d}"}, "\n".join(one_day)
        # Probing every partition's index costs a page or more per partition per row: 400+ a row.
        assert _shared_hits(plan) / ROWS < 40, "\n".join(plan)
        read = [
            row[0] for row in await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + queries.EVENT_BY_ID, uuid.UUID(ids[0]))
        ]
        assert _shared_hits(read) < 40, "\n".join(read)
    finally:
        await conn.close()
