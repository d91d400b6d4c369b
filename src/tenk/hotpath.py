"""A pure-ASGI fast lane in front of FastAPI for the few GET routes that run thousands of times a second.

FastAPI's per-request work (Request object, dependency solving, parameter validation, three middleware
layers) costs more than a cache hit itself. A hot route here parses its one path parameter by hand,
and still does what every request gets: a request id, echoed; latency in the route-template histogram;
errors mapped by `tenk.errors.response_for`. Anything it does not fully recognise (another method,
a malformed id) falls through to the FastAPI app, which validates and documents the route as usual.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.datastructures import State
from starlette.types import ASGIApp, Receive, Scope, Send

from tenk.errors import response_for
from tenk.ops.metrics import REQUEST_LATENCY
from tenk.ops.request_id import HEADER as REQUEST_ID_HEADER
from tenk.ops.request_id import request_id_var, resolve_request_id

# (status, JSON body), or None to fall through to the full app.
HotResult = tuple[int, bytes] | None
HotHandler = Callable[[State, str], Awaitable[HotResult]]

_JSON_HEADER = (b"content-type", b"application/json")


@dataclass(frozen=True)
class HotRoute:
    """GET `prefix` + one path segment (the tail), e.g. prefix "/products/" for "/products/{product_id}"."""

    prefix: str
    template: str
    handler: HotHandler


class HotPathMiddleware:
    def __init__(self, app: ASGIApp, state: State, routes: list[HotRoute]) -> None:
        self.app = app
        self.state = state
        self.routes = routes
        self._timers: dict[tuple[str, int], Callable[[float], None]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            path: str = scope["path"]
            for route in self.routes:
                if path.startswith(route.prefix):
                    tail = path[len(route.prefix) :]
                    if "/" not in tail and await self._serve(route, tail, scope, send):
                        return
                    break
        await self.app(scope, receive, send)

    async def _serve(self, route: HotRoute, tail: str, scope: Scope, send: Send) -> bool:
        started = time.perf_counter()
        request_id = resolve_request_id(scope)
        token = request_id_var.set(request_id.decode())
        try:
            try:
                result = await route.handler(self.state, tail)
            except Exception as exc:
                response = response_for(exc)
                result = (response.status_code, bytes(response.body))
                extra = [(k, v) for k, v in response.raw_headers if k == b"retry-after"]
            else:
                extra = []
            if result is None:
                return False
            status, body = result
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [
                        _JSON_HEADER,
                        (b"content-length", str(len(body)).encode()),
                        (REQUEST_ID_HEADER, request_id),
                        *extra,
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            self._timer(route.template, status)(time.perf_counter() - started)
            return True
        finally:
            request_id_var.reset(token)

    def _timer(self, template: str, status: int) -> Callable[[float], None]:
        timer = self._timers.get((template, status))
        if timer is None:
            timer = self._timers[(template, status)] = REQUEST_LATENCY.labels("GET", template, str(status)).observe
        return timer
