"""POST /events and /events/batch: what is accepted, what is refused, and that a refusal writes nothing."""

from __future__ import annotations

import uuid

import httpx
import orjson
from redis.asyncio import Redis

from harness.clients import AUTH, stored_id
from harness.stack import Stack
from tenk.ingest import keys
from tests.ingest.streams import event


async def _stream_length(stack: Stack) -> int:
    redis = Redis.from_url(stack.redis.url)
    try:
        return int(await redis.xlen(keys.STREAM))
    finally:
        await redis.aclose()


async def test_one_event_is_accepted_with_its_id(client: httpx.AsyncClient) -> None:
    event_id = str(uuid.uuid4())
    response = await client.post("/events", json=event("api-one", event_id), headers=AUTH)
    assert response.status_code == 202
    assert response.json() == {"accepted": 1, "ids": [stored_id(event_id)]}


async def test_missing_id_is_generated_as_a_time_ordered_uuid(client: httpx.AsyncClient) -> None:
    first = (await client.post("/events", json=event("api-gen"), headers=AUTH)).json()["ids"][0]
    second = (await client.post("/events", json=event("api-gen"), headers=AUTH)).json()["ids"][0]
    assert uuid.UUID(first).version == 7
    assert first[:8] <= second[:8]


async def test_batch_accepts_a_json_array_and_ndjson(client: httpx.AsyncClient) -> None:
    events = [event("api-batch", str(uuid.uuid4()), i=i) for i in range(5)]
    response = await client.post("/events/batch", json=events, headers=AUTH)
    assert response.status_code == 202
    assert response.json() == {"accepted": 5, "ids": [stored_id(str(e["event_id"])) for e in events]}

    ndjson = b"\n".join(orjson.dumps(e) for e in events) + b"\n"
    response = await client.post(
        "/events/batch", content=ndjson, headers={**AUTH, "content-type": "application/x-ndjson"}
    )
    assert response.status_code == 202
    assert response.json()["accepted"] == 5


async def test_a_batch_with_bad_events_is_refused_whole_naming_each_index_and_field(
    client: httpx.AsyncClient, stack: Stack
) -> None:
    before = await _stream_length(stack)
    events: list[object] = [
        event("api-bad"),
        {"source": "api-bad", "ts": "yesterday", "payload": {}},
        event("api-bad"),
        {"source": "has space", "ts": "2026-01-01T00:00:00", "payload": [], "extra": 1},
        "not an object",
    ]
    response = await client.post("/events/batch", json=events, headers=AUTH)
    assert response.status_code == 422
    fields = {f["field"] for f in response.json()["error"]["fields"]}
    assert fields == {
        "body[1].ts",
        "body[3].source",
        "body[3].ts",
        "body[3].payload",
        "body[3].extra",
        "body[4]",
    }
    assert await _stream_length(stack) == before


async def test_payload_limits_are_enforced(client: httpx.AsyncClient) -> None:
    too_big = event("api-big", blob="x" * (16 * 1024))
    response = await client.post("/events", json=too_big, headers=AUTH)
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "body.payload"

    with_nul = event("api-nul", text="a\u0000b")
    response = await client.post("/events", json=with_nul, headers=AUTH)
    assert response.status_code == 422

    # The text "\u0000" (an escaped backslash) is fine; only a real NUL is refused.
    literal = event("api-nul", text="\\u0000")
    assert (await client.post("/events", json=literal, headers=AUTH)).status_code == 202


async def test_more_than_1000_events_is_413(client: httpx.AsyncClient) -> None:
    events = [{"source": "s", "ts": "2026-01-01T00:00:00Z", "payload": {}}] * 1001
    response = await client.post("/events/batch", json=events, headers=AUTH)
    assert response.status_code == 413


async def test_writes_need_the_api_key(client: httpx.AsyncClient) -> None:
    assert (await client.post("/events", json=event("api-auth"))).status_code == 401
    assert (await client.post("/events/batch", json=[event("api-auth")])).status_code == 401


async def test_malformed_json_and_wrong_shapes_are_422(client: httpx.AsyncClient) -> None:
    for body, content_type in (
        (b"{", "application/json"),
        (b"[]", "application/json"),
        (b"{}", "application/json"),
        (b"{}\nnot json\n", "application/x-ndjson"),
    ):
        response = await client.post("/events/batch", content=body, headers={**AUTH, "content-type": content_type})
        assert response.status_code == 422, body
    response = await client.post("/events", content=b"[1]", headers={**AUTH, "content-type": "application/json"})
    assert response.status_code == 422


async def test_unknown_event_is_404_and_a_bad_id_is_422(client: httpx.AsyncClient) -> None:
    assert (await client.get(f"/events/{uuid.uuid4()}", headers=AUTH)).status_code == 404
    response = await client.get("/events/not-a-uuid", headers=AUTH)
    assert response.status_code == 422
    assert (await client.get("/sources/bad source/events", headers=AUTH)).status_code == 422
    assert (await client.get("/sources/ok/events", params={"after": "forged"}, headers=AUTH)).status_code == 422
