"""`python -m benchmarks.flush_cost [--flushes N] [--rounds N]`: Postgres's CPU a row for each way the
worker can flush a batch, and for the floor under them.

One connection to an embedded Postgres of its own, batches of 1,000 events as the API writes them
(v7 ids, `ts` now, one day), each flush a transaction as the worker's: COPY into the staging table,
then the insert. The backend's CPU time (user + system, from /proc) over `--flushes` flushes, per row.
The forms are interleaved in each round, each round starting one form later, and the table grows as they
run, as it does in a drain:

- `copy`: the COPY alone, what every form pays;
- `copy + plain insert`: an INSERT .. ON CONFLICT DO NOTHING with no duplicate check, the floor;
- `copy + day query + one-day insert`: STAGING_DAY, then INSERT_FROM_STAGING_ONE_DAY (the general path
  for a batch on one day);
- `copy + shared-day insert`: INSERT_FROM_STAGING_SHARED_DAY, the staged path for a batch on one day
  with distinct UUIDv7 ids;
- `straight: stored-ids question + COPY into events`: STORED_ON_DAY, then COPY into `events` itself with
  no staging table, the path the worker takes for such a batch while none of its ids is stored.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import psutil

from benchmarks._common import print_medians
from tenk.ingest import codec, partitions, queries
from tenk.stack import EmbeddedPostgres, free_port
from tenk.stack.migrate import migrate

ROWS = 1_000
PAYLOAD = b'{"user":42,"action":"click","path":"/p/7"}'
PLAIN_INSERT = """
INSERT INTO events (event_id, source, ts, payload, accepted_at)
SELECT event_id, source, ts, payload, 'epoch'::timestamptz + accepted_us * interval '1 microsecond'
FROM ingest_staging
ON CONFLICT (event_id, ts) DO NOTHING
"""


def _batch() -> list[bytes]:
    now_ms = int(time.time() * 1000)
    entries = []
    for n in range(ROWS):
        ms = now_ms - 1_000 + n % 500
        ts = datetime.fromtimestamp(ms / 1000, UTC).isoformat().encode()
        entries.append(b"\t".join((codec.uuid7(ms).encode(), b"bench", ts, b"%d" % (ms * 1000), PAYLOAD)))
    return entries


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _staged(conn: asyncpg.Connection, entries: list[bytes], insert: Callable[[], Awaitable[object]]) -> None:
    data = b"".join(codec.copy_line(b"%d-0" % n, entry) for n, entry in enumerate(entries))
    async with conn.transaction():
        await conn.copy_to_table(queries.STAGING_TABLE, source=_once(data), columns=queries.STAGING_COLUMNS)
        await insert()


async def _copy_alone(conn: asyncpg.Connection, entries: list[bytes]) -> None:
    async def nothing() -> None:
        return None

    await _staged(conn, entries, nothing)


async def _plain(conn: asyncpg.Connection, entries: list[bytes]) -> None:
    await _staged(conn, entries, lambda: conn.execute(PLAIN_INSERT))


async def _one_day(conn: asyncpg.Connection, entries: list[bytes]) -> None:
    async def insert() -> None:
        day = await conn.fetchval(queries.STAGING_DAY)
        await conn.fetchval(queries.INSERT_FROM_STAGING_ONE_DAY, day)

    await _staged(conn, entries, insert)


async def _shared_day(conn: asyncpg.Connection, entries: list[bytes]) -> None:
    await _staged(
        conn, entries, lambda: conn.execute(queries.INSERT_FROM_STAGING_SHARED_DAY, codec.shared_day(entries))
    )


async def _straight(conn: asyncpg.Connection, entries: list[bytes]) -> None:
    rows = codec.event_rows(entries)
    ids = (b"{%b}" % b",".join([entry[:36] for entry in entries])).decode()
    async with conn.transaction():
        assert not await conn.fetchval(queries.STORED_ON_DAY, codec.shared_day(entries), ids)
        await conn.copy_to_table("events", source=_once(rows or b""), columns=queries.EVENT_COLUMNS)


Flush = Callable[[asyncpg.Connection, list[bytes]], Awaitable[None]]
FORMS: dict[str, Flush] = {
    "copy": _copy_alone,
    "copy + plain insert": _plain,
    "copy + day query + one-day insert": _one_day,
    "copy + shared-day insert": _shared_day,
    "straight: stored-ids question + COPY into events": _straight,
}


async def _measure(url: str, flushes: int, rounds: int) -> dict[str, list[float]]:
    conn = await asyncpg.connect(url, server_settings={"timezone": "UTC"})
    try:
        await partitions.maintain(conn, 0)
        await conn.execute(queries.CREATE_SESSION_STAGING)
        backend = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()"))
        figures: dict[str, list[float]] = {name: [] for name in FORMS}
        forms = list(FORMS.items())
        for number in range(rounds):
            # The table grows as the forms run: each round starts one form later, so that none is always
            # measured on the largest table.
            for name, flush in forms[number % len(forms) :] + forms[: number % len(forms)]:
                batches = [_batch() for _ in range(flushes)]
                before = backend.cpu_times()
                for entries in batches:
                    await flush(conn, entries)
                after = backend.cpu_times()
                spent = (after.user - before.user) + (after.system - before.system)
                figures[name].append(spent * 1e6 / (flushes * ROWS))
        return figures
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flushes", type=int, default=40, help="flushes of 1,000 rows per form and round")
    parser.add_argument("--rounds", type=int, default=5, help="5: each form goes first once")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="tenk-flush-cost-", dir="/tmp"))
    pg = EmbeddedPostgres(workdir / "postgres", free_port())
    pg.start()
    try:
        asyncio.run(migrate(pg.url))
        figures = asyncio.run(_measure(pg.url, args.flushes, args.rounds))
    finally:
        pg.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print_medians("flush", "Postgres µs CPU a row", figures, 1)


if __name__ == "__main__":
    main()
