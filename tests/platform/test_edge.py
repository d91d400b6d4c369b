"""The request edge: what every request gets, whichever lane answers it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest
import uvicorn
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from starlette._utils import is_async_callable
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from harness.clients import AUTH
from harness.stack import Stack
from tenk.app import create_app
from tenk.settings import Settings
from tests.support.inprocess import app_in_process
from tests.support.servers import ServerProcess

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

    app = create_app(stack.settings(stock_paths=False))  # the lane's requests, whatever the suite runs with
    app.add_middleware(Recording)
    assert app.lane is not None
    async with app_in_process(app) as client:
        assert (await client.get("/products/5")).status_code == 200
        assert (await client.get("/products?limit=1")).status_code == 200
    assert seen == ["/products/5", "/products"]
    assert app.lane.match({"method": "GET", "path": "/products/5", "query_string": b"", "headers": []}) is not None


def test_tenk_adds_no_middleware_of_its_own() -> None:
    # What every request shares is the edge's (tenk.app's docstring says so): a middleware of tenk's would
    # be a second place a concern could live, and could skip a lane.
    assert create_app(Settings()).user_middleware == []


def test_servers_and_clients_that_ask_take_the_app_for_asgi_3() -> None:
    # TenkAPI.__call__ is a plain function handing back the edge's coroutine: uvicorn and starlette's test
    # client would take an unmarked one for ASGI 2, and call it with the scope alone.
    app = create_app(Settings())
    config = uvicorn.Config(app)
    config.load()
    assert config.interface == "asgi3"
    assert is_async_callable(app)


# The item's four, each with a control character a filter in front may miss: LF (`$` matches before it), CR, NUL.
CONTROL_PATHS = ["/metrics%0A", "/products/1%0A", "/events%0D", "/tasks%00"]
# A path of each route family, the hot lane's among them, for controls to be put into.
ROUTE_PATHS = ["/metrics", "/products/1", "/products", "/events", "/events/batch", "/tasks", "/tasks/1", "/search"]
ROUTE_PATHS += ["/quotes/AAPL", "/sources/s/events", "/health", "/ready", "/ping", "/docs", "/openapi.json", "/"]


def _is_the_path_refusal(response: httpx.Response) -> bool:
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return (
        response.status_code == 400
        and response.headers["content-type"] == "application/json"
        and error["code"] == "malformed_path"
        and [field["field"] for field in error["fields"]] == ["path"]
    )


@pytest.mark.parametrize("path", CONTROL_PATHS)
async def test_a_path_with_a_control_character_is_refused_alike_by_both_lanes(stack: Stack, path: str) -> None:
    answers = []
    for hot_lane in (True, False):
        async with app_in_process(create_app(stack.settings(hot_lane=hot_lane))) as client:
            refused = await client.get(path, headers={"x-request-id": "control-test"})
            assert _is_the_path_refusal(refused), (hot_lane, refused.status_code, refused.text)
            assert (await client.post(path, content=EVENT, headers=AUTH)).status_code == 400
            answers.append((refused.status_code, refused.headers.multi_items(), refused.content))
    assert answers[0] == answers[1]


async def test_invisible_characters_that_are_not_controls_route_as_themselves(client: httpx.AsyncClient) -> None:
    # A no-break space, a zero-width joiner and a line separator are text, not controls (tenk.platform.edge): routed
    # as they are, they match no fixed path, and a parameter's parser judges them.
    for path in ("/metrics%C2%A0", "/metrics%E2%80%A8", "/quotes/A%E2%80%8D", "/tasks/%E2%80%A8"):
        answer = await client.get(path)
        assert not _is_the_path_refusal(answer), path
        assert answer.status_code in (404, 422), (path, answer.text)
    assert (await client.get("/products/1")).status_code == 200


@st.composite
def _paths_with_controls(draw: st.DrawFn) -> str:
    path = draw(st.sampled_from(ROUTE_PATHS)) + draw(st.text(max_size=4))
    at = draw(st.integers(1, len(path)))
    controls = draw(st.text(st.characters(categories=["Cc"]), min_size=1, max_size=3))
    return path[:at] + controls + path[at:]


@pytest.mark.parametrize("hot_lane", [True, False])
def test_no_path_with_a_control_character_is_ever_served_by_a_real_server(
    stack: Stack, spawn_api: Callable[..., ServerProcess], hot_lane: bool
) -> None:
    api = spawn_api(stack, "granian", TENK_HOT_LANE=str(hot_lane).lower())
    with httpx.Client(base_url=api.base_url, headers=AUTH, timeout=30) as http:

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(_paths_with_controls())
        @example("/metrics\n")
        @example("/products/1\n")
        @example("/events\r")
        @example("/tasks\x00")
        @example("/metrics\x85")
        @example("/products/1\t")
        @example("/health\x7f")
        def request(path: str) -> None:
            # Percent-encoded, as a client gets one past a proxy; the server decodes it into the ASGI path.
            answer = http.get(quote(path, safe="/"))
            assert _is_the_path_refusal(answer), (path, answer.status_code, answer.text[:200])

        request()


@pytest.mark.parametrize("server", ["uvicorn", "gunicorn"])
def test_every_server_tenk_starts_hands_the_edge_a_path_it_refuses(
    stack: Stack, spawn_api: Callable[..., ServerProcess], server: str
) -> None:
    api = spawn_api(stack, server)
    with httpx.Client(base_url=api.base_url, timeout=30) as http:
        for path in CONTROL_PATHS:
            answer = http.get(path)
            assert _is_the_path_refusal(answer), (server, path, answer.status_code, answer.text[:200])
        assert http.get("/products/1").status_code == 200
