"""The cached hit's cost in Python function calls: a deterministic figure the wall clock cannot give here.

`GET /products/{id}` answered from the in-process cache is the cheapest request tenk serves, so any
per-request work the edge adds shows in it first. The requests are driven through the ASGI app in
process, and `sys.setprofile` counts every Python function call (C calls apart) they make.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from starlette.types import ASGIApp, Message

from harness.stack import Stack
from tenk.app import create_app
from tenk.platform.fast_paths import FastPath

# The lane's own behaviour: with the stock switch FastAPI's routing serves these routes instead.
pytestmark = pytest.mark.fast_path(FastPath.HOT_LANE)

REQUESTS = 200
# Measured: 23 before the edge (the lane in front of FastAPI's middleware) and 23 with it. Exact, not a
# margin: a call added to the cheapest request should be argued for here.
CALLS_PER_HIT_BUDGET = 23


async def _get(app: ASGIApp, path: str) -> list[Message]:
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"tenk.test")],
        "client": ("127.0.0.1", 1),
        "server": ("tenk.test", 80),
    }
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def _counting(calls: list[int]) -> Callable[[FrameType, str, Any], None]:
    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            calls[0] += 1

    return profile


async def calls_per_cached_hit(stack: Stack) -> float:
    app = create_app(stack.settings())
    async with app.router.lifespan_context(app):
        warm = await _get(app, "/products/5")
        assert warm[0]["status"] == 200
        calls = [0]
        sys.setprofile(_counting(calls))
        try:
            for _ in range(REQUESTS):
                await _get(app, "/products/5")
        finally:
            sys.setprofile(None)
    # The driver's own calls (`_get`, `receive`, two `send`) are not the app's.
    return calls[0] / REQUESTS - 4


async def test_a_cached_product_hit_costs_no_more_python_calls_than_measured(stack: Stack) -> None:
    per_hit = await calls_per_cached_hit(stack)
    print(f"calls per cached hit: {per_hit:g}")
    assert per_hit <= CALLS_PER_HIT_BUDGET, f"{per_hit:g} Python calls per cached hit"
