"""An event id reused for another event is a conflict: dead-lettered with reason `conflict` and counted.
The same event sent again is stored once, without a trace."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from harness.clients import AUTH
from harness.deadlines import deadline_s
from harness.stack import VENV_BIN, Stack
from tenk.stack import Spawned, start_http_server
from tests.ingest.streams import count_rows, event
from tests.support.waiting import eventually


async def _dead_letters(stack: Stack, event_id: str) -> list[tuple[str, bytes]]:
    conn = await asyncpg.connect(stack.pg.url)
    try:
        rows = await conn.fetch("SELECT reason, entry FROM ingest_dead_letters WHERE event_id = $1", event_id)
        return [(row["reason"], bytes(row["entry"])) for row in rows]
    finally:
        await conn.close()


@pytest.fixture
def worker_with_metrics(stack: Stack, tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start a `tenk worker` serving /metrics on a free port (another one if it is taken first); returns
    its metrics URL. Stopped after the test."""
    started: list[Spawned] = []

    def start(name: str, **env: str) -> str:
        worker, base_url = start_http_server(
            f"tenk worker {name}",
            # `env` execs the worker, so the port is in its environment and the pid stays the worker's.
            lambda port: ["env", f"TENK_INGEST_METRICS_PORT={port}", str(VENV_BIN / "tenk"), "worker", "--name", name],
            lambda port: tmp_path / f"worker-{name}-{port}.log",
            health_path="/metrics",
            env=stack.env(TENK_LOG_LEVEL="INFO", **env),
        )
        started.append(worker)
        return base_url + "/metrics"

    yield start
    for worker in started:
        worker.stop(timeout=20)


def _metric(url: str, name: str) -> float:
    for line in httpx.get(url).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


@pytest.mark.parametrize("mode", ["copy", "insert"])
async def test_a_reused_event_id_with_another_payload_is_dead_lettered_as_a_conflict_and_counted(
    client: httpx.AsyncClient, stack: Stack, worker_with_metrics: Callable[..., str], mode: str
) -> None:
    metrics_url = worker_with_metrics(f"w-conflict-{mode}", TENK_INGEST_WRITE_MODE=mode)
    source = f"wk-conflict-{mode}"
    conflicts_before = (await client.get("/ingest/stats", headers=AUTH)).json()["conflicts"]
    first_id, batch_id = str(uuid.uuid4()), str(uuid.uuid4())
    original = event(source, first_id, v="original")
    accepted = await client.post("/events", json=original, headers=AUTH)
    assert accepted.status_code == 202

    async def written() -> bool:
        return await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = $1", source) == 1

    await eventually(written, deadline_s(), "the original event")
    later = [
        original,  # the same event again: a no-op
        event(source, first_id, v="impostor"),  # the same id, other content: a conflict
        event(source, batch_id, v="one"),  # two events with one id in a single batch: one of them conflicts
        event(source, batch_id, v="two"),
    ]
    again = await client.post("/events/batch", json=later, headers=AUTH)
    assert again.status_code == 202
    # Dead letters carry the stored ids (the client's, scoped to its key: `tenk.ingest.writers`).
    stored_first, _, stored_batch, _ = again.json()["ids"]
    assert stored_first == accepted.json()["ids"][0]

    async def settled() -> bool:
        stats = (await client.get("/ingest/stats", headers=AUTH)).json()
        return bool(stats["backlog"] == 0 and stats["conflicts"] == conflicts_before + 2)

    await eventually(settled, deadline_s(), "two conflicts counted")
    [(reason, entry)] = await _dead_letters(stack, stored_first)
    assert reason == "conflict"
    assert b'"impostor"' in entry
    [(reason, _)] = await _dead_letters(stack, stored_batch)
    assert reason == "conflict"
    stored = (await client.get(f"/events/{first_id}", headers=AUTH)).json()
    assert stored["payload"] == {"v": "original"}
    assert await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = $1", source) == 2
    assert _metric(metrics_url, "tenk_ingest_conflicts_total") == 2
