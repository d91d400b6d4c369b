"""An event id names the day partition that holds its event, or the event is listed in events_elsewhere:
so finding an id (the writer's duplicate check, GET /events/{id}) reads one or two partitions and one
index, however many day partitions there are, and an id reused on another day is still a conflict."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone

import asyncpg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.stack import Stack, fresh_database
from tenk.ingest import codec, partitions, queries
from tenk.ingest.writer import PostgresWriter
from tenk.stack.migrate import migrate

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
            shared = [row[0] for row in await conn.fetch("EXPLAIN " + queries.INSERT_FROM_STAGING_SHARED_DAY, day)]
            plan = [row[0] for row in await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + queries.INSERT_FROM_STAGING)]
        # A batch of one day reads that day's partition alone: the planner leaves out the other 400.
        for form in (one_day, shared):
            probed = {match for line in form for match in re.findall(r" on (events_(?:\d+|default))\b", line)}
            assert probed == {f"events_{TODAY:%Y%m%d}"}, "\n".join(form)
        # Probing every partition's index costs a page or more per partition per row: 400+ a row.
        assert _shared_hits(plan) / ROWS < 40, "\n".join(plan)
        read = [
            row[0] for row in await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + queries.EVENT_BY_ID, uuid.UUID(ids[0]))
        ]
        assert _shared_hits(read) < 40, "\n".join(read)
    finally:
        await conn.close()


_MS = int(TODAY.timestamp() * 1000)
# One entry of a batch: an id of some kind (a v7 of the ts's day, of the day before, a v4, an uppercase
# v7, a repeat of the batch's first), and a ts written some way Postgres reads (canonical UTC, another
# offset, a leap second and a 24:00 of the day before, which Postgres reads as today, a zero fraction).
_BATCH_ENTRY = st.tuples(
    st.sampled_from(["v7", "v7 day before", "v4", "V7 upper", "repeat", "repeat upper"]),
    st.sampled_from(
        [
            "canonical",
            "canonical at midnight",
            "+01:00",
            "Z",
            "23:59:60",
            "24:00",
            ".000000",
        ]
    ),
    st.integers(0, 86_399_999),
)


def _batch_entry(kind: str, ts_form: str, ms_of_day: int, first_id: str) -> bytes:
    at = TODAY.replace(hour=0) + timedelta(milliseconds=ms_of_day)
    ts = {
        "canonical": at.isoformat(),
        "canonical at midnight": TODAY.replace(hour=0).isoformat(),
        "+01:00": at.astimezone(timezone(timedelta(hours=1))).isoformat(),
        "Z": at.isoformat().replace("+00:00", "Z"),
        "23:59:60": f"{TODAY - timedelta(days=1):%Y-%m-%d}T23:59:60+00:00",
        "24:00": f"{TODAY - timedelta(days=1):%Y-%m-%d}T24:00:00+00:00",
        ".000000": at.replace(microsecond=0).isoformat().replace("+00:00", ".000000+00:00"),
    }[ts_form]
    ms = int(at.timestamp() * 1000)
    event_id = {
        "v7": codec.uuid7(ms),
        "v7 day before": codec.uuid7(ms - 86_400_000),
        "v4": str(uuid.uuid4()),
        "V7 upper": codec.uuid7(ms).upper(),
        "repeat": first_id,
        "repeat upper": first_id.upper(),
    }[kind]
    return b"\t".join([event_id.encode(), b"days", ts.encode(), b"1", b"{}"])


def test_a_shared_day_the_worker_finds_is_the_one_postgres_finds_with_no_id_repeated_or_elsewhere(dsn: str) -> None:
    """`codec.shared_day` lets the writer skip Postgres's STAGING_DAY, DISTINCT ON and the events_elsewhere
    listing: whenever it names a day, Postgres must find that day, and no staged id may repeat or
    name another day than its ts."""
    loop = asyncio.new_event_loop()
    conn = loop.run_until_complete(asyncpg.connect(dsn, server_settings={"timezone": "UTC"}))
    named = 0

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(_BATCH_ENTRY, min_size=1, max_size=6))
    # The common batch, which must be found: every id a v7 of its own ts's day.
    @example([("v7", "canonical", 1_000), ("v7", "canonical", 2_000), ("v7", "canonical at midnight", 0)])
    # Ids the worker could take for another day's, or for distinct ones: each must be refused.
    @example([("v7 day before", "24:00", 1_000)])
    @example([("v7 day before", "23:59:60", 1_000)])
    @example([("repeat", "canonical", 0), ("repeat upper", "canonical", 0)])
    def check(drawn: list[tuple[str, str, int]]) -> None:
        nonlocal named
        first_id = codec.uuid7(_MS)
        drawn_entries = [_batch_entry(kind, ts_form, ms, first_id) for kind, ts_form, ms in drawn]
        # The worker's batches: what `entry_problem` passed (a ts in another form, an uppercase id, is
        # dead-lettered before any flush).
        entries = [entry for entry in drawn_entries if codec.entry_problem(entry) is None]
        if not entries:
            return
        shared = codec.shared_day(entries)

        async def postgres_sees() -> tuple[object, int, int]:
            lines = b"".join(codec.copy_line(b"%d-0" % n, entry) for n, entry in enumerate(entries))
            async with conn.transaction():
                await conn.execute(queries.CREATE_STAGING)
                await conn.copy_to_table(queries.STAGING_TABLE, source=_staged(lines), columns=queries.STAGING_COLUMNS)
                day = await conn.fetchval(queries.STAGING_DAY)
                distinct = await conn.fetchval("SELECT count(DISTINCT event_id) FROM ingest_staging")
                elsewhere = await conn.fetchval(
                    "SELECT count(*) FROM ingest_staging"
                    " WHERE tenk_id_day_start(event_id) IS DISTINCT FROM tenk_day_start(ts)"
                )
            return day, distinct, elsewhere

        if shared is None:
            return
        named += 1
        day, distinct, elsewhere = loop.run_until_complete(postgres_sees())
        assert (day, distinct, elsewhere) == (shared, len(entries), 0), entries

    try:
        check()
    finally:
        loop.run_until_complete(conn.close())
        loop.close()
    assert named > 0
