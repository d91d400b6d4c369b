"""The request edge: what every request gets, whichever lane answers it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
from starlette._utils import is_async_callable
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenk.app import create_app
from tenk.settings import Settings
from tests.support.clients import AUTH
from tests.support.inprocess import app_in_process
from tests.support.stack import Stack

EVENT = orjson.dumps({"source": "edge-test", "ts": "2026-01-01T00:00:00Z", "payload": {"n": 1}})


async def _post_then_leave(app: ASGIApp, path: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """POST a body announced at 1,000 bytes, send ten of them, then disconnect: what the app answers."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"tenk.test"),
            (b"authorization", AUTH["Authorization"].encode()),
            (b"content-type", b"application/json"),
            (b"content-length", b"1000"),
            (b"x-request-id", b"edge-test"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("tenk.test", 80),
    }
    messages: list[Message] = [
        {"type": "http.request", "body": b'{"source":', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start, body = sent
    return start["status"], list(start["headers"]), body["body"]


@pytest.mark.parametrize("path", ["/events", "/tasks"])
async def test_a_client_leaving_mid_body_gets_the_same_400_in_both_lanes(stack: Stack, path: str) -> None:
    answers = []
    for hot_lane in (True, False):
        app = create_app(stack.settings(hot_lane=hot_lane))
        async with app.router.lifespan_context(app):
            answers.append(await _post_then_leave(app, path))
    assert answers[0] == answers[1]
    status, headers, body = answers[0]
    assert status == 400
    assert orjson.loads(body)["error"]["code"] == "client_disconnected"
    assert (b"connection", b"close") in headers


@pytest.mark.parametrize("hot_lane", [True, False])
@pytest.mark.parametrize("path", ["/events", "/tasks"])
async def test_a_write_without_a_key_is_told_how_to_authenticate_and_the_connection_is_closed(
    stack: Stack,
    app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]],
    hot_lane: bool,
    path: str,
) -> None:
    async with app_client_factory(stack.settings(hot_lane=hot_lane)) as client:
        refused = await client.post(path, content=EVENT, headers={"content-type": "application/json"})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.headers["connection"] == "close"
        assert refused.json()["error"]["fields"][0]["field"] == "header.authorization"


async def test_a_read_without_a_key_is_told_how_to_authenticate_and_the_connection_stays_open(
    stack: Stack, app_client_factory: Callable[[Settings], AbstractAsyncContextManager[httpx.AsyncClient]]
) -> None:
    async with app_client_factory(stack.settings(auth_reads=True)) as client:
        for path in ("/products/5", "/products"):  # the first is the hot lane's, the second FastAPI's
            refused = await client.get(path)
            assert refused.status_code == 401, path
            assert refused.headers["www-authenticate"] == "Bearer", path
            assert "connection" not in refused.headers, path


async def test_middleware_added_to_the_app_sees_hot_lane_requests(stack: Stack) -> None:
    seen: list[str] = []

    class Recording:
        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                seen.append(scope["path"])
            await self.app(scope, receive, send)

    app = create_app(stack.settings())
    app.add_middleware(Recording)
    assert app.lane is not None
    async with app_in_process(app) as client:
        assert (await client.get("/products/5")).status_code == 200
        assert (await client.get("/products?limit=1")).status_code == 200
    assert seen == ["/products/5", "/products"]
    assert app.lane.match({"method": "GET", "path": "/products/5", "query_string": b"", "headers": []}) is not None


def test_servers_and_clients_that_ask_take_the_app_for_asgi_3() -> None:
    # TenkAPI.__call__ is a plain function handing back the edge's coroutine: uvicorn and starlette's test
    # client would take an unmarked one for ASGI 2, and call it with the scope alone.
    app = create_app(Settings())
    config = uvicorn.Config(app)
    config.load()
    assert config.interface == "asgi3"
    assert is_async_callable(app)
