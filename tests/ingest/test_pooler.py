"""`tenk worker` and the ingest API through a real PgBouncer in transaction mode: every event lands once."""

from __future__ import annotations

import uuid

import httpx
import psutil
import pytest

from harness.clients import AUTH
from harness.stack import Stack
from tenk.stack.pgbouncer import LocalPgBouncer
from tests.ingest.streams import count_rows, event
from tests.stack.pgbouncer import pooled_env_over_tcp
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker

pytestmark = pytest.mark.cluster

EVENTS = 3_000
BATCH = 500


def _talks_only_to_the_pooler(pid: int, bouncer: LocalPgBouncer, stack: Stack) -> bool:
    ports = {c.raddr.port for c in psutil.Process(pid).net_connections(kind="tcp") if c.raddr}
    return bouncer.port in ports and stack.pg.port not in ports


async def test_events_through_the_pooler_land_exactly_once(
    stack: Stack, bouncer: LocalPgBouncer, pooled_client: httpx.AsyncClient, spawn_worker: SpawnWorker
) -> None:
    # Small flushes on both writer connections, so that many transactions interleave on the pooler's
    # few server connections: a staging table kept per connection, or a named prepared statement,
    # would be missing on the next one.
    worker = spawn_worker(stack, "w-pooled", TENK_INGEST_BATCH="100", **pooled_env_over_tcp(stack, bouncer))
    source = f"pooled-{uuid.uuid4().hex[:8]}"
    ids = [str(uuid.uuid4()) for _ in range(EVENTS)]
    client = pooled_client
    for start in range(0, EVENTS, BATCH):
        batch = [event(source, event_id, i=i) for i, event_id in enumerate(ids[start : start + BATCH], start)]
        response = await client.post("/events/batch", json=batch, headers=AUTH)
        assert response.status_code == 202, response.text
    # A redelivered batch (the same events again) must not add a row.
    again = [event(source, event_id, i=i) for i, event_id in enumerate(ids[:BATCH])]
    assert (await client.post("/events/batch", json=again, headers=AUTH)).status_code == 202

    async def all_written() -> bool:
        stats = (await client.get("/ingest/stats", headers=AUTH)).json()
        return bool(stats["backlog"] == 0) and await _rows(stack, source) >= EVENTS

    await eventually(all_written, 120, f"{EVENTS} events written through pgbouncer")
    read_back = await client.get(f"/events/{ids[7]}", headers=AUTH)
    assert read_back.status_code == 200, read_back.text
    assert read_back.json()["payload"] == {"i": 7}
    assert await _rows(stack, source) == EVENTS
    distinct = "SELECT count(DISTINCT event_id) FROM events WHERE source = $1"
    assert await count_rows(stack.pg.url, distinct, source) == EVENTS
    assert await count_rows(stack.pg.url, "SELECT count(*) FROM ingest_dead_letters WHERE event_id = ANY($1)", ids) == 0
    assert _talks_only_to_the_pooler(worker.process.pid, bouncer, stack), worker.log_tail()
    # No flush failed over session state: a missing staging table or prepared statement.
    assert "does not exist" not in worker.log.read_text(), worker.log_tail()


async def _rows(stack: Stack, source: str) -> int:
    return await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = $1", source)
