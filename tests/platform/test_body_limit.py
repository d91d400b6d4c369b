from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import httpx

from harness.clients import AUTH
from harness.stack import Stack
from tenk.settings import Settings


async def test_body_over_the_limit_is_413(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async with app_client_factory(stack.settings(max_body_bytes=200)) as client:
        response = await client.post("/tasks", json={"title": "x" * 300}, headers=AUTH)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"


async def test_streamed_body_without_length_over_the_limit_is_413(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"title": "'
        for _ in range(10):
            yield b"y" * 100
        yield b'"}'

    async with app_client_factory(stack.settings(max_body_bytes=200)) as client:
        response = await client.post("/tasks", content=chunks(), headers={**AUTH, "content-type": "application/json"})
        assert response.status_code == 413
        before = (await client.get("/tasks?limit=100")).json()
        assert not any(item["title"].startswith("yyyy") for item in before["items"])


async def test_malformed_json_is_422_naming_the_body(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/tasks", content=b'{"title": "x",', headers={**AUTH, "content-type": "application/json"}
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "malformed_json"
    assert error["fields"][0]["field"].startswith("body")


async def test_unknown_field_is_422_naming_it(client: httpx.AsyncClient) -> None:
    response = await client.post("/tasks", json={"title": "x", "colour": "red"}, headers=AUTH)
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "body.colour"
