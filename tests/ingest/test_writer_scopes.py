"""A client-chosen event id is its writer key's: another key's event under the same id neither conflicts
with it nor is taken for its duplicate. Within one key, ids behave as before: the same event again is
stored once, another event under a stored id is dead-lettered as a conflict."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import asyncpg
import httpx
import pytest

from harness.clients import TEST_API_KEY
from harness.deadlines import deadline_s
from harness.stack import Stack
from tenk.ingest.writers import ANONYMOUS, scoped_id
from tenk.ops.api_keys import digest
from tenk.settings import Settings
from tests.ingest.streams import count_rows, event
from tests.support.waiting import eventually
from tests.support.workers import SpawnWorker

OTHER_API_KEY = "tk_other_writer_for_the_suite"
KEY_A = {"Authorization": f"Bearer {TEST_API_KEY}"}
KEY_B = {"Authorization": f"Bearer {OTHER_API_KEY}"}


def _two_writers(stack: Stack) -> Settings:
    return stack.settings(api_keys=[digest(TEST_API_KEY), digest(OTHER_API_KEY)])


async def _dead_letters(stack: Stack, event_ids: list[str]) -> list[str]:
    conn = await asyncpg.connect(stack.pg.url)
    try:
        rows = await conn.fetch("SELECT reason FROM ingest_dead_letters WHERE event_id = ANY($1::text[])", event_ids)
        return [row["reason"] for row in rows]
    finally:
        await conn.close()


async def _settled(client: httpx.AsyncClient, stack: Stack, source: str, rows: int) -> None:
    async def done() -> bool:
        stored = await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = $1", source)
        return stored == rows and (await client.get("/ingest/stats", headers=KEY_A)).json()["backlog"] == 0

    await eventually(done, deadline_s(), f"{rows} rows of {source} and an empty backlog")


# access_log on sends the POSTs through FastAPI's routes; off, through the hot lane.
@pytest.mark.parametrize("access_log", [False, True], ids=["hot-lane", "fastapi"])
async def test_two_keys_posting_one_id_with_different_content_are_both_stored_and_none_dead_lettered(
    stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
    access_log: bool,
) -> None:
    spawn_worker(stack, f"w-scopes-{access_log}")
    source = f"wk-scopes-{access_log}"
    shared = str(uuid.uuid4())
    async with app_client_factory(_two_writers(stack).model_copy(update={"access_log": access_log})) as client:
        conflicts_before = (await client.get("/ingest/stats", headers=KEY_A)).json()["conflicts"]
        first = await client.post("/events", json=event(source, shared, by="a"), headers=KEY_A)
        second = await client.post("/events/batch", json=[event(source, shared, by="b")], headers=KEY_B)
        assert first.status_code == second.status_code == 202
        [id_a], [id_b] = first.json()["ids"], second.json()["ids"]
        assert id_a != id_b

        await _settled(client, stack, source, 2)
        assert (await client.get("/ingest/stats", headers=KEY_A)).json()["conflicts"] == conflicts_before
        assert await _dead_letters(stack, [shared, id_a, id_b]) == []
        # Each writer reads its own event by the id its client chose; anyone by the id the 202 answered.
        by_a = (await client.get(f"/events/{shared}", headers=KEY_A)).json()
        by_b = (await client.get(f"/events/{shared}", headers=KEY_B)).json()
        assert (by_a["payload"], by_b["payload"]) == ({"by": "a"}, {"by": "b"})
        assert (await client.get(f"/events/{id_b}", headers=KEY_A)).json()["payload"] == {"by": "b"}
        assert (by_a["event_id"], by_b["event_id"]) == (id_a, id_b)


async def test_one_key_posting_one_id_twice_stores_it_once_and_other_content_is_a_conflict(
    stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    spawn_worker: SpawnWorker,
) -> None:
    spawn_worker(stack, "w-scopes-one-key")
    source = "wk-scopes-one-key"
    chosen = str(uuid.uuid4())
    async with app_client_factory(_two_writers(stack)) as client:
        answers = [await client.post("/events", json=event(source, chosen, v="same"), headers=KEY_B) for _ in range(2)]
        assert [answer.status_code for answer in answers] == [202, 202]
        [stored_id] = {answer.json()["ids"][0] for answer in answers}
        await _settled(client, stack, source, 1)
        assert await _dead_letters(stack, [stored_id]) == []

        impostor = await client.post("/events", json=event(source, chosen, v="other"), headers=KEY_B)
        assert impostor.json()["ids"] == [stored_id]

        async def dead_lettered(stored: str = stored_id) -> list[str]:
            return await _dead_letters(stack, [stored])

        assert await eventually(dead_lettered, deadline_s(), "the conflict dead-lettered") == ["conflict"]
        assert await count_rows(stack.pg.url, "SELECT count(*) FROM events WHERE source = $1", source) == 1
        assert (await client.get(f"/events/{chosen}", headers=KEY_B)).json()["payload"] == {"v": "same"}


async def test_two_keys_sending_the_same_events_under_one_idempotency_key_get_ids_of_their_own(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    idempotency = {"Idempotency-Key": f"order-{uuid.uuid4()}"}
    body = [event("wk-scopes-idem", n=i) for i in range(3)]
    async with app_client_factory(_two_writers(stack)) as client:
        by_a = await client.post("/events/batch", json=body, headers={**KEY_A, **idempotency})
        again_a = await client.post("/events/batch", json=body, headers={**KEY_A, **idempotency})
        by_b = await client.post("/events/batch", json=body, headers={**KEY_B, **idempotency})
    assert by_a.json()["ids"] == again_a.json()["ids"]
    assert not set(by_a.json()["ids"]) & set(by_b.json()["ids"])


def test_the_anonymous_writer_stores_ids_as_sent_and_a_v7_id_keeps_its_day() -> None:
    v4, v7 = uuid.uuid4(), uuid.UUID("018f0000-0000-7000-8000-000000000000")
    assert scoped_id(ANONYMOUS, v4) == str(v4)
    writer = digest(TEST_API_KEY).encode()
    scoped = uuid.UUID(scoped_id(writer, v7))
    assert (scoped.version, scoped.int >> 80) == (7, v7.int >> 80)
    assert uuid.UUID(scoped_id(writer, v4)).version == 8
