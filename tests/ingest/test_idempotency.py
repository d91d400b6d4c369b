"""A request retried with the same Idempotency-Key gets the same generated ids, so Postgres keeps one row
per event: the safe retry after a 503 whose append may already have run."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest
import redis.asyncio as aioredis
import redis.exceptions

from harness.clients import AUTH
from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.settings import Settings
from tests.ingest.streams import count_rows
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker


def _events(source: str) -> list[dict[str, object]]:
    return [{"source": source, "ts": "2026-01-02T03:04:05Z", "payload": {"i": i}} for i in range(3)]


# access_log on sends the POSTs through FastAPI's routes; off, through the hot lane.
@pytest.mark.parametrize("access_log", [False, True], ids=["hot-lane", "fastapi"])
async def test_a_retry_with_the_same_idempotency_key_gets_the_same_ids_and_one_row_each(
    stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
    access_log: bool,
) -> None:
    spawn_worker(stack, f"w-idem-{access_log}")
    source = f"wk-idem-{access_log}"
    async with app_client_factory(stack.settings(access_log=access_log)) as client:
        await _retry_twice(client, stack, source)


async def _retry_twice(client: httpx.AsyncClient, stack: Stack, source: str) -> None:
    key = {"Idempotency-Key": f"order-{uuid.uuid4()}", **AUTH}
    first = await client.post("/events/batch", json=_events(source), headers=key)
    retry = await client.post("/events/batch", json=_events(source), headers=key)
    assert first.status_code == retry.status_code == 202
    ids = first.json()["ids"]
    assert retry.json()["ids"] == ids
    assert len(set(ids)) == 3

    single = {"source": source, "ts": "2026-01-02T03:04:05Z", "payload": {"one": True}}
    one_key = {"Idempotency-Key": str(uuid.uuid4()), **AUTH}
    one = [(await client.post("/events", json=single, headers=one_key)).json()["ids"][0] for _ in range(2)]
    assert one[0] == one[1]
    # Another key is another request: new ids.
    other_key = {"Idempotency-Key": str(uuid.uuid4()), **AUTH}
    other = await client.post("/events/batch", json=_events(source), headers=other_key)
    assert not set(other.json()["ids"]) & set(ids)

    async def stored() -> bool:
        rows = await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = $1", source)
        return rows == 7 and (await client.get("/ingest/stats", headers=AUTH)).json()["backlog"] == 0

    await eventually(stored, deadline_s(), "7 rows: each retried event once")
    for event_id in [*ids, one[0]]:
        assert await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE event_id = $1", uuid.UUID(event_id))
    dead = await count_rows(stack.pg.url, "SELECT count(*) FROM ingest_dead_letters WHERE event_id = ANY($1)", ids)
    assert dead == 0


async def test_the_same_key_with_other_events_gets_other_ids_not_conflicts(client: httpx.AsyncClient) -> None:
    key = {"Idempotency-Key": "a-key-two-clients-both-chose", **AUTH}
    mine = await client.post("/events/batch", json=_events("idem-mine"), headers=key)
    theirs = await client.post("/events/batch", json=_events("idem-theirs"), headers=key)
    assert not set(mine.json()["ids"]) & set(theirs.json()["ids"])


@pytest.mark.parametrize("key", [b"", b"has space", "é".encode(), b"x" * 256])
async def test_an_invalid_idempotency_key_is_refused_naming_the_header(client: httpx.AsyncClient, key: bytes) -> None:
    body = {"source": "idem-bad", "ts": "2026-01-02T03:04:05Z", "payload": {}}
    headers = [(b"idempotency-key", key), (b"authorization", AUTH["Authorization"].encode())]
    response = await client.post("/events", json=body, headers=headers)
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "header.idempotency-key"


# The API's ingest Redis client gives up after this long, and answers 503; Redis stalls for longer, then
# runs the append the API gave up on (a command already sent is executed: the client's FIN comes after it).
API_REDIS_TIMEOUT_S = 0.2
# Long enough that the 503 (one timeout after the POST) comes while Redis is still stalled, which the test
# asserts rather than assumes. It is Redis's CPU time, which a loaded machine stretches on the wall clock
# past Redis's lua-time-limit (5 s), after which Redis would answer BUSY instead of queueing the append: the
# test lifts that limit to its own deadline while the script runs.
STALL_S = 1.5
# A busy Lua script: Redis is single-threaded, so nothing else runs until it returns. This is what an fsync
# stall, a slow command or a fork does to a real Redis; CLIENT PAUSE would not do, because Redis drops a
# paused command whose client has hung up, so the append would never run.
# Valkey (the embedded server) freezes TIME for the length of a script, and Redis 7.0 has no os.clock: the
# server's CPU time where there is one (never ahead of the wall clock, so the stall lasts at least ARGV[1]
# microseconds), else TIME.
_STALL = """
local has_clock = pcall(function() return os.clock() end)
local function now()
  if has_clock then return os.clock() * 1000000 end
  local time = redis.call('TIME')
  return time[1] * 1000000 + time[2]
end
local started = now()
repeat until now() - started >= tonumber(ARGV[1])
return 1
"""


async def _stalled(probe: aioredis.Redis) -> bool:
    """Whether a PING on `probe`'s open connection times out. Opened before the stall: over a Unix socket
    redis-py reports a handshake that times out as a ConnectionError, which a Redis that is down raises too."""
    try:
        await probe.ping()
        return False
    except redis.exceptions.TimeoutError:
        return True


@pytest.mark.parametrize("retry_by", ["idempotency-key", "own-event-ids"])
async def test_a_retry_after_a_503_whose_append_had_run_stores_every_event_once(
    stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
    retry_by: str,
) -> None:
    spawn_worker(stack, f"w-timeout-{retry_by}")
    source = f"wk-timeout-{retry_by}-{uuid.uuid4().hex[:8]}"
    events = _events(source)
    headers = dict(AUTH)
    if retry_by == "idempotency-key":
        headers["Idempotency-Key"] = f"order-{uuid.uuid4()}"
    else:
        events = [{**event, "event_id": str(uuid.uuid4())} for event in events]
    settings = stack.settings(ingest={"redis_timeout_s": API_REDIS_TIMEOUT_S})
    async with app_client_factory(settings) as client:
        ids = await _timed_out_then_retried(client, stack, events, headers)
    assert await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = $1", source) == 3
    assert await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE event_id::text = ANY($1)", ids) == 3
    dead = "SELECT count(*) FROM ingest_dead_letters WHERE event_id::text = ANY($1)"
    assert await count_rows(stack.pg.url, dead, ids) == 0


async def _timed_out_then_retried(
    client: httpx.AsyncClient, stack: Stack, events: list[dict[str, object]], headers: dict[str, str]
) -> list[str]:
    """The first POST gets 503 although its append runs; the retry gets 202. Returns the retry's ids."""
    source = str(events[0]["source"])
    # The append script is loaded and the connections are open before Redis stalls.
    warm = {"source": f"{source}-warm", "ts": "2026-01-02T03:04:05Z", "payload": {}}
    assert (await client.post("/events", json=warm, headers=AUTH)).status_code == 202

    # No socket timeout (redis-py's default is 5 s): the script stalls Redis for STALL_S of its own CPU, which
    # on a loaded machine takes longer than that on the wall clock.
    admin = aioredis.from_url(stack.redis.url, socket_timeout=None)
    probe = aioredis.from_url(stack.redis.url, socket_timeout=API_REDIS_TIMEOUT_S / 4)
    busy_limit = (await admin.config_get("lua-time-limit"))["lua-time-limit"]
    assert busy_limit is not None
    try:
        await admin.config_set("lua-time-limit", int(deadline_s() * 1000))
        assert await probe.ping()
        stall = asyncio.ensure_future(admin.eval(_STALL, 0, int(STALL_S * 1_000_000)))
        await eventually(lambda: _stalled(probe), deadline_s(), "Redis stalled by the busy script")
        first = await client.post("/events/batch", json=events, headers=headers)
        assert first.status_code == 503, first.text
        assert "Retry-After" in first.headers
        assert not stall.done(), "the 503 must come while Redis is stalled, or the scenario is not the item's"
        await stall
    finally:
        await admin.config_set("lua-time-limit", busy_limit)
        await probe.aclose(close_connection_pool=True)
        await admin.aclose(close_connection_pool=True)

    async def first_attempt_stored() -> bool:
        return await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = $1", source) == 3

    # The scenario: the client was told 503, yet the append ran and the worker stored the events.
    await eventually(first_attempt_stored, deadline_s(), "the events of the request that got 503")

    async def retried() -> httpx.Response | None:
        response = await client.post("/events/batch", json=events, headers=headers)
        return response if response.status_code == 202 else None

    retry = await eventually(retried, deadline_s(), "a 202 for the retry")

    async def drained() -> bool:
        return bool((await client.get("/ingest/stats", headers=AUTH)).json()["backlog"] == 0)

    await eventually(drained, deadline_s(), "the retry's events through the worker")
    return list(retry.json()["ids"])
