"""A pure-ASGI fast lane, outside FastAPI, for the few routes that run thousands of times a second.

FastAPI's per-request work (its own outer middleware, routing, a Request object, dependency solving,
parameter validation) costs more than a cache hit or a stream append itself. A hot route parses its
input by hand and still gets what every request gets: a request id, echoed; latency in the
route-template histogram; errors mapped by `tenk.errors.response_for`. A handler that does not fully
recognise its input returns None, and the request falls through to FastAPI, which validates and
documents the same route as usual.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from starlette.datastructures import State
from starlette.types import Receive, Scope, Send

from tenk.errors import PayloadTooLargeError, TenkError, response_for
from tenk.ops.metrics import REQUEST_LATENCY
from tenk.ops.request_id import HEADER as REQUEST_ID_HEADER
from tenk.ops.request_id import request_id_var, resolve_request_id

# (status, JSON body, Retry-After seconds or None), or None to fall through to FastAPI.
HotResult = tuple[int, bytes, int | None] | None
_JSON_HEADER = (b"content-type", b"application/json")


class HotRequest:
    __slots__ = ("receive", "scope", "state", "tail")

    def __init__(self, state: State, scope: Scope, receive: Receive, tail: str) -> None:
        self.state = state
        self.scope = scope
        self.receive = receive
        self.tail = tail  # the path after the route's fixed prefix ("" for exact routes)

    def header(self, name: bytes) -> bytes:
        for key, value in self.scope["headers"]:
            if key == name:
                return bytes(value)
        return b""

    async def body(self, max_bytes: int) -> bytes:
        declared = self.header(b"content-length")
        if declared and (not declared.isdigit() or int(declared) > max_bytes):
            raise PayloadTooLargeError(f"request body exceeds {max_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise TenkError("client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_bytes:
                raise PayloadTooLargeError(f"request body exceeds {max_bytes} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


HotHandler = Callable[[HotRequest], Awaitable[HotResult]]


@dataclass(frozen=True)
class HotRoute:
    """`template` is an exact path ("/events") or a prefix plus one path segment ("/products/{product_id}")."""

    method: str
    template: str
    handler: HotHandler
    prefix: str = field(init=False)
    exact: bool = field(init=False)

    def __post_init__(self) -> None:
        brace = self.template.find("{")
        object.__setattr__(self, "exact", brace < 0)
        object.__setattr__(self, "prefix", self.template if brace < 0 else self.template[:brace])

    def tail(self, path: str) -> str | None:
        if self.exact:
            return "" if path == self.prefix else None
        if path.startswith(self.prefix):
            rest = path[len(self.prefix) :]
            return rest if rest and "/" not in rest else None
        return None


class TenkAPI(FastAPI):
    """FastAPI, with the hot lane in front of everything FastAPI itself wraps around a request."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hot_routes: list[HotRoute] = []
        self._timers: dict[tuple[HotRoute, int], Callable[[float], None]] = {}

    def serve_hot(self, routes: list[HotRoute]) -> None:
        self.hot_routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.hot_routes:
            method, path = scope["method"], scope["path"]
            for route in self.hot_routes:
                if route.method == method and (tail := route.tail(path)) is not None:
                    if await self._serve(route, HotRequest(self.state, scope, receive, tail), send):
                        return
                    break
        await super().__call__(scope, receive, send)

    async def _serve(self, route: HotRoute, request: HotRequest, send: Send) -> bool:
        started = time.perf_counter()
        request_id = resolve_request_id(request.scope)
        token = request_id_var.set(request_id.decode())
        try:
            try:
                result = await route.handler(request)
            except Exception as exc:
                response = response_for(exc)
                retry = response.headers.get("retry-after")
                result = (response.status_code, bytes(response.body), int(retry) if retry else None)
            if result is None:
                return False
            status, body, retry_after = result
            headers = [_JSON_HEADER, (b"content-length", str(len(body)).encode()), (REQUEST_ID_HEADER, request_id)]
            if retry_after is not None:
                headers.append((b"retry-after", str(retry_after).encode()))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            self._timer(route, status)(time.perf_counter() - started)
            return True
        finally:
            request_id_var.reset(token)

    def _timer(self, route: HotRoute, status: int) -> Callable[[float], None]:
        timer = self._timers.get((route, status))
        if timer is None:
            timer = REQUEST_LATENCY.labels(route.method, route.template, str(status)).observe
            self._timers[(route, status)] = timer
        return timer
