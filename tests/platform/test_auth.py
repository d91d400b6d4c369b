from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest
from fastapi import APIRouter, Depends

from harness.clients import AUTH
from harness.stack import Stack
from tenk.ops.api_keys import digest, key_is_accepted
from tenk.platform import (
    KeyPolicy,
    Reply,
    ReplyRoute,
    TenkAPI,
    hot,
    install_error_handlers,
    key_digest,
    require_reader,
    require_writer,
)
from tenk.settings import Settings
from tests.support.inprocess import app_in_process

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
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async with app_client_factory(stack.settings(auth_reads=True)) as client:
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


EVENT_READS = [f"/events/{uuid.uuid4()}", "/sources/auth-check/events", "/ingest/stats"]
OPS_PATHS = {"metrics": ["/metrics"], "docs": ["/docs", "/redoc", "/openapi.json"], "ready": ["/ready"]}


@pytest.mark.parametrize("hot_lane", [True, False], ids=["hot lane", "FastAPI"])
async def test_stored_events_need_a_reader_key_by_default(
    stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    hot_lane: bool,
) -> None:
    async with app_client_factory(stack.settings(hot_lane=hot_lane)) as client:
        for path in EVENT_READS:
            refused = await client.get(path)
            assert refused.status_code == 401, path
            assert refused.json()["error"]["fields"][0]["field"] == "header.authorization"
            assert (await client.get(path, headers={"Authorization": "Bearer nope"})).status_code == 403, path
            assert (await client.get(path, headers=AUTH)).status_code in (200, 404), path
        # The catalogue stays public: only the clients' own data is locked.
        assert (await client.get("/products/1")).status_code == 200


async def test_stored_events_are_public_only_when_auth_events_is_off(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async with app_client_factory(stack.settings(auth_events=False)) as client:
        for path in EVENT_READS:
            assert (await client.get(path)).status_code in (200, 404), path
    # TENK_AUTH_READS wins over the events' own switch.
    async with app_client_factory(stack.settings(auth_events=False, auth_reads=True)) as client:
        for path in EVENT_READS:
            assert (await client.get(path)).status_code == 401, path


async def test_ops_endpoints_need_a_key_with_auth_reads_each_with_its_own_switch(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async with app_client_factory(stack.settings()) as client:
        for paths in OPS_PATHS.values():
            for path in paths:
                assert (await client.get(path)).status_code == 200, f"{path} is open while reads are"
    async with app_client_factory(stack.settings(auth_reads=True)) as client:
        for paths in OPS_PATHS.values():
            for path in paths:
                assert (await client.get(path)).status_code == 401, path
                assert (await client.get(path, headers=AUTH)).status_code == 200, path
        assert (await client.get("/health")).status_code == 200  # liveness stays open, and says nothing
    for opened in OPS_PATHS:
        switches: dict[str, object] = {f"auth_{opened}": False}
        async with app_client_factory(stack.settings(auth_reads=True, **switches)) as client:
            for endpoint, others in OPS_PATHS.items():
                for path in others:
                    status = (await client.get(path)).status_code
                    assert status == (200 if endpoint == opened else 401), f"TENK_AUTH_{opened.upper()}=false: {path}"
    # And one switch alone locks its endpoint while reads stay public.
    async with app_client_factory(stack.settings(auth_metrics=True)) as client:
        assert (await client.get("/metrics")).status_code == 401
        assert (await client.get("/docs")).status_code == 200


def _own_app(needs_key: Callable[[KeyPolicy], bool], accepted: list[str]) -> TenkAPI:
    """A builder's app: no settings tree in app.state, its keys given to the edge as digests."""
    router = APIRouter(route_class=ReplyRoute)

    @router.post("/hot", dependencies=[Depends(require_writer)])
    @hot
    def hot_write() -> Reply:
        return Reply(200, b'{"lane":"hot"}')

    @router.post("/routed", dependencies=[Depends(require_writer)])
    def routed_write() -> Reply:
        return Reply(200, b'{"lane":"fastapi"}')

    @router.get("/read", dependencies=[Depends(require_reader)])
    def read() -> Reply:
        return Reply(200, b"{}")

    app = TenkAPI()
    install_error_handlers(app)
    app.include_router(router)
    app.open_edge(
        hot_lane=True,
        needs_key=needs_key,
        accepted_digests=accepted,
        max_body_bytes=1024,
        body_timeout_s=5.0,
        access_log=False,
    )
    return app


async def test_an_app_of_its_own_checks_its_keys_in_both_lanes_from_the_digests_it_gives() -> None:
    assert key_digest("tk_own") == hashlib.sha256(b"tk_own").hexdigest()  # what TENK_API_KEYS holds
    app = _own_app(lambda policy: policy.name == "writer", [key_digest("tk_own")])
    async with app_in_process(app) as client:
        for path in ("/hot", "/routed"):
            assert (await client.post(path)).status_code == 401, path
            assert (await client.post(path, headers={"Authorization": "Bearer tk_other"})).status_code == 403, path
            assert (await client.post(path, headers={"Authorization": "Bearer tk_own"})).status_code == 200, path
        assert (await client.get("/read")).status_code == 200  # the judge says reads need none


async def test_an_app_that_gives_no_digests_accepts_no_key() -> None:
    app = _own_app(lambda policy: True, [])
    async with app_in_process(app) as client:
        for path in ("/hot", "/routed"):
            assert (await client.post(path, headers={"Authorization": "Bearer tk_own"})).status_code == 403, path
