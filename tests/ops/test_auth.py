from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx

from tenk.ops.api_keys import digest, key_is_accepted
from tenk.settings import Settings
from tests.conftest import AUTH, Stack

NEW_TASK = {"title": "auth check"}


async def test_write_without_key_is_401_naming_the_header(client: httpx.AsyncClient) -> None:
    response = await client.post("/tasks", json=NEW_TASK)
    assert response.status_code == 401
    assert response.json()["error"]["fields"][0]["field"] == "header.authorization"


async def test_write_with_wrong_key_is_403(client: httpx.AsyncClient) -> None:
    response = await client.post("/tasks", json=NEW_TASK, headers={"Authorization": "Bearer tk_not_the_key"})
    assert response.status_code == 403


async def test_write_with_non_bearer_scheme_is_401(client: httpx.AsyncClient) -> None:
    response = await client.post("/tasks", json=NEW_TASK, headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert response.status_code == 401


async def test_write_with_the_key_is_accepted(client: httpx.AsyncClient) -> None:
    response = await client.post("/tasks", json=NEW_TASK, headers=AUTH)
    assert response.status_code == 201


async def test_reads_are_public_by_default(client: httpx.AsyncClient) -> None:
    assert (await client.get("/tasks")).status_code == 200
    assert (await client.get("/products/1")).status_code == 200


async def test_reads_need_a_key_when_configured(
    stack: Stack, app_client_factory: Callable[[Settings], AsyncIterator[httpx.AsyncClient]]
) -> None:
    async for client in app_client_factory(stack.settings(auth_reads=True)):
        assert (await client.get("/products/1")).status_code == 401
        assert (await client.get("/tasks", headers={"Authorization": "Bearer nope"})).status_code == 403
        assert (await client.get("/products/1", headers=AUTH)).status_code == 200
        assert (await client.get("/health")).status_code == 200


def test_keys_are_compared_against_digests_not_plaintext() -> None:
    accepted = [digest("alpha"), digest("beta")]
    assert key_is_accepted("beta", accepted)
    assert not key_is_accepted(digest("beta"), accepted)
    assert not key_is_accepted("gamma", accepted)
    assert not key_is_accepted("alpha", [])
