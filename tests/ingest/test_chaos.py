"""The chaos run: 50,000 events sent flat out while the worker is killed twice, Postgres restarts and
Redis (AOF `always`) is killed and restarted. Afterwards every event is in Postgres exactly once."""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import Callable, Iterator

import asyncpg
import httpx
import pytest

from harness.clients import AUTH, stored_id
from harness.deadlines import deadline_s
from harness.stack import Stack, _short_tmp, start_stack
from tests.ingest.streams import count_rows
from tests.support.servers import ServerProcess
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker, WorkerProcess

TOTAL = 50_000
BATCH = 250
SENDERS = 4
SEND_DEADLINE_S = 60

CHAOS_ENV = {
    "TENK_INGEST_DURABILITY": "always",
    "TENK_INGEST_FLUSH_MS": "50",
    # A killed consumer's entries are claimed by another after 1.5 s (the default is a minute).
    "TENK_INGEST_CLAIM_IDLE_MS": "1500",
    "TENK_INGEST_CLAIM_EVERY_MS": "300",
}


@pytest.fixture
def always_stack() -> Iterator[Stack]:
    """A stack of this test's own whose Redis fsyncs the AOF before every reply."""
    root = _short_tmp("tenk-chaos-")
    started = start_stack(root, products=1, tasks=1, appendfsync="always")
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _kill_mid_flush(stack: Stack, worker: WorkerProcess) -> bool:
    """SIGKILL the worker, preferably while its flush statement runs; returns whether one was running."""
    conn = await asyncpg.connect(stack.pg.url)
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            active = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'",
                f"tenk-worker:{worker.name}",
            )
            if active:
                worker.kill()
                return True
    finally:
        await conn.close()
    worker.kill()
    return False


class Sender:
    """Sends every batch until it gets a 202 (a 503 or a dropped connection is retried), from a few
    concurrent clients spread over the API processes at `base_urls`. Before taking the batch that
    crosses a fault's threshold, sending waits until that fault has begun, so each fault lands
    mid-run; requests in flight carry on through it."""

    def __init__(self, base_urls: list[str], batches: list[list[dict[str, object]]], thresholds: list[int]) -> None:
        self.base_urls = base_urls
        self.batches = batches
        self.dispatched = 0
        self.accepted = 0
        self.retries = 0
        self.thresholds = thresholds
        self.fault_begun = [asyncio.Event() for _ in thresholds]
        self._reached = [asyncio.Event() for _ in thresholds]
        self._failure: BaseException | None = None

    async def run(self) -> None:
        deadline = time.monotonic() + SEND_DEADLINE_S
        try:
            await asyncio.gather(
                *(self._client(self.base_urls[n % len(self.base_urls)], deadline) for n in range(SENDERS))
            )
        except BaseException as exc:
            # Whoever waits for a threshold learns of it now, not at pytest's timeout minutes later.
            self._failure = exc
            for reached in self._reached:
                reached.set()
            raise

    async def _client(self, base_url: str, deadline: float) -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=5, headers=AUTH) as client:
            while self.batches:
                for threshold, reached, begun in zip(self.thresholds, self._reached, self.fault_begun, strict=True):
                    if self.dispatched >= threshold:
                        reached.set()
                        await begun.wait()
                if not self.batches:
                    return
                batch = self.batches.pop()
                self.dispatched += len(batch)
                await self._send(client, batch, deadline)

    async def _send(self, client: httpx.AsyncClient, batch: list[dict[str, object]], deadline: float) -> None:
        while True:
            assert time.monotonic() < deadline, f"sending took over {SEND_DEADLINE_S}s"
            try:
                response: httpx.Response | None = await client.post("/events/batch", json=batch)
            except httpx.TransportError:
                response = None
            if response is not None and response.status_code == 202:
                self.accepted += len(batch)
                return
            assert response is None or response.status_code == 503, (response.status_code, response.text[:300])
            self.retries += 1
            await asyncio.sleep(0.1)

    async def reached(self, k: int) -> None:
        """Once the k-th threshold is crossed; raises if sending failed first."""
        await self._reached[k].wait()
        if self._failure is not None:
            raise AssertionError(f"sending failed before threshold {k}: {self._failure!r}") from self._failure


async def test_nothing_lost_and_nothing_duplicated_through_crashes_and_restarts(
    always_stack: Stack, spawn_api: Callable[..., ServerProcess], spawn_worker: SpawnWorker
) -> None:
    stack = always_stack
    api = spawn_api(stack, **CHAOS_ENV)
    worker = spawn_worker(stack, "chaos-a", **CHAOS_ENV)
    ids = [str(uuid.uuid4()) for _ in range(TOTAL)]
    batches: list[list[dict[str, object]]] = [
        [{"event_id": i, "source": "chaos", "ts": "2026-01-01T00:00:00Z", "payload": {"n": n}} for i in chunk]
        for n, chunk in enumerate(ids[k : k + BATCH] for k in range(0, TOTAL, BATCH))
    ]
    sender = Sender([api.base_url], batches, thresholds=[8_000, 18_000, 28_000, 38_000])
    sending = asyncio.create_task(sender.run())
    log: list[str] = []

    await sender.reached(0)
    caught = await _kill_mid_flush(stack, worker)
    sender.fault_begun[0].set()
    log.append(f"worker chaos-a killed (mid-flush: {caught})")
    worker = spawn_worker(stack, "chaos-a", **CHAOS_ENV)  # same name: it replays its own pending entries

    await sender.reached(1)
    restart = asyncio.create_task(asyncio.to_thread(_restart_postgres, stack))
    await asyncio.sleep(0.05)
    sender.fault_begun[1].set()
    await restart
    log.append("postgres restarted")

    await sender.reached(2)
    caught = await _kill_mid_flush(stack, worker)
    sender.fault_begun[2].set()
    log.append(f"worker chaos-a killed again (mid-flush: {caught})")
    # A new name: chaos-a's pending entries come back only through XAUTOCLAIM.
    spawn_worker(stack, "chaos-b", **CHAOS_ENV)

    await sender.reached(3)
    await asyncio.to_thread(stack.redis.kill)
    sender.fault_begun[3].set()
    await asyncio.sleep(0.5)
    await asyncio.to_thread(stack.redis.start)
    log.append("redis killed and restarted")

    await asyncio.wait_for(sending, SEND_DEADLINE_S)
    assert sender.accepted == TOTAL
    log.append(f"{sender.retries} sends retried")

    await eventually(lambda: _rows_at_least(stack, TOTAL), 60, f"all {TOTAL} rows after {log}")
    conn = await asyncpg.connect(stack.pg.url)
    try:
        written = {str(r[0]) for r in await conn.fetch("SELECT event_id FROM events WHERE source = 'chaos'")}
        total_rows = await conn.fetchval("SELECT count(*) FROM events")
        dead = await conn.fetchval("SELECT count(*) FROM ingest_dead_letters")
    finally:
        await conn.close()
    assert total_rows == TOTAL
    assert written == {stored_id(i) for i in ids}  # each stored under its writer's scope
    assert dead == 0
    print("chaos:", "; ".join(log))
    async with httpx.AsyncClient(base_url=api.base_url, timeout=5) as client:
        await eventually(lambda: _drained(client), deadline_s(), "the backlog to reach zero")


def _restart_postgres(stack: Stack) -> None:
    stack.pg.stop()
    stack.pg.start()


async def _rows_at_least(stack: Stack, n: int) -> bool:
    try:
        return await count_rows(stack.pg.url, "SELECT count(*) FROM events") >= n
    except (OSError, asyncpg.PostgresError):
        return False


async def _drained(client: httpx.AsyncClient) -> bool:
    # A 503 while Redis or Postgres comes back up is not an answer yet.
    response = await client.get("/ingest/stats", headers=AUTH)
    return response.status_code == 200 and response.json()["backlog"] == 0
