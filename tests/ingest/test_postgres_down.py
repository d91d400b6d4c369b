"""With Postgres down, POSTs keep answering 202 until the backlog cap, then 503 with Retry-After;
once Postgres is back the worker drains everything that was accepted."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx

from harness.clients import AUTH
from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.settings import Settings
from tests.ingest.streams import count_rows, event, post_until_refused
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker

CAP = 2_000
BATCH = 100


async def test_accepts_until_the_backlog_cap_then_drains_when_postgres_returns(
    private_stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
) -> None:
    spawn_worker(private_stack, "pg-down", TENK_INGEST_FLUSH_MS="20")
    private_stack.pg.stop()

    async with app_client_factory(private_stack.settings(ingest={"max_backlog": CAP, "backlog_poll_ms": 20})) as client:
        await _fill_then_drain(client, private_stack)


async def _fill_then_drain(client: httpx.AsyncClient, stack: Stack) -> None:
    accepted, _ = await post_until_refused(
        client, lambda: [event("pg-down", str(uuid.uuid4())) for _ in range(BATCH)], CAP // BATCH * 3
    )
    # The append script checks the cap itself: every batch that fits is in, and not one past it.
    assert accepted == CAP
    assert (await client.post("/events", json=event("pg-down"), headers=AUTH)).status_code == 503

    stack.pg.start()

    async def drained() -> bool:
        rows = await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = 'pg-down'")
        return rows == accepted

    await eventually(drained, deadline_s(), f"{accepted} rows after Postgres came back")

    async def accepting() -> bool:
        response = await client.post("/events", json=event("pg-down-after"), headers=AUTH)
        return response.status_code == 202

    await eventually(accepting, deadline_s(), "POST /events to accept again")
    stats = (await client.get("/ingest/stats", headers=AUTH)).json()
    assert stats["dead_letters"] == 0
