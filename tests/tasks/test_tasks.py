from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
import pytest

from harness.clients import AUTH


async def test_create_read_and_patch_a_task(client: httpx.AsyncClient) -> None:
    created = await client.post("/tasks", json={"title": "write the spec", "notes": "soon"}, headers=AUTH)
    assert created.status_code == 201
    task = created.json()
    assert task["done"] is False
    fetched = await client.get(f"/tasks/{task['id']}")
    assert fetched.json() == task
    patched = await client.patch(f"/tasks/{task['id']}", json={"done": True}, headers=AUTH)
    assert patched.json()["done"] is True
    assert patched.json()["title"] == "write the spec"


async def test_create_answers_201_with_the_location_of_the_new_task(client: httpx.AsyncClient) -> None:
    created = await client.post("/tasks", json={"title": "locate me"}, headers=AUTH)
    assert created.status_code == 201
    assert created.headers["location"] == f"/tasks/{created.json()['id']}"
    assert (await client.get(created.headers["location"])).json() == created.json()


async def test_delete_needs_a_writer_removes_the_task_and_is_404_the_second_time(client: httpx.AsyncClient) -> None:
    location = (await client.post("/tasks", json={"title": "delete me"}, headers=AUTH)).headers["location"]
    assert (await client.delete(location)).status_code == 401
    deleted = await client.delete(location, headers=AUTH)
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert (await client.get(location)).status_code == 404
    again = await client.delete(location, headers=AUTH)
    assert again.status_code == 404
    assert again.json()["error"]["fields"] == [{"field": "path.task_id", "message": "no such task"}]


async def test_missing_task_is_404(client: httpx.AsyncClient) -> None:
    assert (await client.get("/tasks/77777777")).status_code == 404
    assert (await client.patch("/tasks/77777777", json={"done": True}, headers=AUTH)).status_code == 404


@pytest.mark.parametrize("limit", ["0", "101", "-3", "ten"])
async def test_limit_outside_1_to_100_is_422(client: httpx.AsyncClient, limit: str) -> None:
    response = await client.get("/tasks", params={"limit": limit})
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "query.limit"


async def test_default_page_is_25_with_a_next_cursor(client: httpx.AsyncClient) -> None:
    page = (await client.get("/tasks")).json()
    assert len(page["items"]) == 25
    assert page["next"]


async def _tampered(cursor: str) -> list[str]:
    raw = bytearray(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    raw[2] ^= 0x01  # flip one bit of the position
    flipped = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    forged = base64.urlsafe_b64encode(b"[5]" + b"\x00" * 12).rstrip(b"=").decode()
    return [flipped, forged, "garbage!!", "", "A" * 600, "W10", "%00", cursor[:-1]]


async def test_tampered_or_garbage_cursors_are_422_never_500(client: httpx.AsyncClient) -> None:
    cursor = (await client.get("/tasks")).json()["next"]
    for bad in await _tampered(cursor):
        response = await client.get("/tasks", params={"after": bad})
        assert response.status_code in (200, 422), (bad, response.text)
        if bad:  # an empty `after` means "from the start"
            assert response.status_code == 422, bad
            assert response.json()["error"]["fields"][0]["field"] == "query.after"


async def test_a_products_cursor_is_not_accepted_for_tasks(client: httpx.AsyncClient) -> None:
    products_cursor = (await client.get("/products")).json()["next"]
    assert (await client.get("/tasks", params={"after": products_cursor})).status_code == 422


async def test_keyset_pages_return_every_row_exactly_once_under_concurrent_inserts(
    client: httpx.AsyncClient,
) -> None:
    before = {item["id"] for item in await _walk(client, page_size=100)}
    stop = asyncio.Event()

    async def insert_while_walking() -> int:
        inserted = 0
        while not stop.is_set() and inserted < 300:
            response = await client.post("/tasks", json={"title": f"concurrent {inserted}"}, headers=AUTH)
            assert response.status_code == 201
            inserted += 1
        return inserted

    writers = [asyncio.create_task(insert_while_walking()) for _ in range(3)]
    try:
        walked = await _walk(client, page_size=7)
    finally:
        stop.set()
        inserted = sum(await asyncio.gather(*writers))
    ids = [item["id"] for item in walked]
    assert inserted > 0
    assert len(ids) == len(set(ids)), "a row came back twice"
    assert before <= set(ids), "a row that existed before the walk was skipped"
    assert ids == sorted(ids)


async def _walk(client: httpx.AsyncClient, page_size: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10_000):
        params = {"limit": str(page_size), **({"after": cursor} if cursor else {})}
        page = (await client.get("/tasks", params=params)).json()
        items += page["items"]
        cursor = page["next"]
        if cursor is None:
            return items
    raise AssertionError("pagination did not terminate")
