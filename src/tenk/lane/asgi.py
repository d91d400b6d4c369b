"""`TenkAPI`: FastAPI with the hot lane in front of everything FastAPI wraps around a request.

FastAPI's per-request work (its middleware stack, routing, a Request object, dependency solving,
validation) costs more than a cache hit or a stream append itself. The lane matches a `@hot` route,
parses its input with parsers derived from the route's declaration (`derive.py`), checks the key and
reads the body with the same helpers as the FastAPI side, and calls the route's one handler. What
every request gets is written once and called from both sides: the request id (`resolve_request_id`),
latency in the route-template histogram (`latency_observer`), the writer check before any body is
read, the body limit and deadline (`declared_length`, `read_body`, as `RequestBodyGuard` applies them)
and the error mapping (`reply_for`). Input the lane does not fully recognise falls
through to FastAPI untouched.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from starlette.datastructures import State
from starlette.types import Receive, Scope, Send

from tenk.errors import PayloadTooLargeError, reply_for
from tenk.lane.declare import header
from tenk.lane.derive import UNRECOGNISED, LaneRoute, hot_routes
from tenk.ops.auth import KeyPolicy, check_authorization_header
from tenk.ops.metrics import latency_observer
from tenk.ops.request_body import declared_length, read_body
from tenk.ops.request_id import HEADER as REQUEST_ID_HEADER
from tenk.ops.request_id import request_id_var, resolve_request_id

_JSON_HEADER = (b"content-type", b"application/json")


def _query_arguments(route: LaneRoute, scope: Scope, args: list[Any]) -> bool:
    # The same split as Starlette's QueryParams; unknown keys are ignored there too.
    given: dict[str, str] = {}
    for key, value in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True):
        if key in given and key in route.query_keys:
            return False  # a declared parameter twice: FastAPI's to judge
        given[key] = value
    for param in route.query:
        text = given.get(param.key)
        if text is None:
            if param.required:
                return False
            args[param.position] = param.default
            continue
        value = param.parse(text)
        if value is UNRECOGNISED:
            return False
        args[param.position] = value
    return True


class TenkAPI(FastAPI):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lane: dict[str, list[LaneRoute]] = {}
        self._max_body_bytes = 0
        self._body_timeout_s = 0.0

    def serve_hot(
        self, *, max_body_bytes: int, needs_key: Callable[[KeyPolicy], bool], body_timeout_s: float = 10.0
    ) -> None:
        """Derive the lane from the `@hot` routes included so far (LaneDeclarationError if one can't be).

        `needs_key` judges a route's key policies, as its FastAPI dependencies do, from the same settings."""
        self.lane = {}
        for route in hot_routes(self.router.routes):
            keyed = dataclasses.replace(route, key_required=any(needs_key(policy) for policy in route.auth))
            self.lane.setdefault(route.method, []).append(keyed)
        self._max_body_bytes = max_body_bytes
        self._body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (routes := self.lane.get(scope["method"])):
            path = scope["path"]
            for route in routes:
                if (tail := route.tail(path)) is not None:
                    if await self._serve(route, tail, scope, receive, send):
                        return
                    break
        await super().__call__(scope, receive, send)

    def _arguments(self, route: LaneRoute, tail: str, scope: Scope, state: State) -> list[Any] | None:
        args: list[Any] = [None] * route.arity
        if route.path is not None:
            position, parse = route.path
            value = parse(tail)
            if value is UNRECOGNISED:
                return None
            args[position] = value
        if route.query and not _query_arguments(route, scope, args):
            return None
        for position, resolve in route.resolvers:
            args[position] = resolve(state, scope)
        return args

    async def _body(self, receive: Receive) -> bytes:
        deadline = asyncio.get_running_loop().time() + self._body_timeout_s
        return await read_body(receive, self._max_body_bytes, deadline)

    async def _serve(self, route: LaneRoute, tail: str, scope: Scope, receive: Receive, send: Send) -> bool:
        started = time.perf_counter()
        args = self._arguments(route, tail, scope, self.state)
        if args is None:
            return False
        # What an outer layer (the tracing's server span) reads to name the route, as after Starlette's routing.
        scope["route"] = route.route
        request_id = resolve_request_id(scope)
        token = request_id_var.set(request_id.decode())
        try:
            try:
                # RequestBodyGuard's order: the key from the headers alone, then the declared length, then the body.
                if route.key_required:
                    check_authorization_header(header(scope, b"authorization"), self.state.accepted_key_digests)
                if route.body is not None:
                    length = declared_length(scope)
                    if length is not None and not 0 <= length <= self._max_body_bytes:
                        raise PayloadTooLargeError(f"request body exceeds {self._max_body_bytes} bytes")
                if route.body is not None:
                    args[route.body] = await self._body(receive)
                status, body, retry_after = await route.handler(*args)
            except Exception as exc:
                status, body, retry_after = reply_for(exc)
            headers = [_JSON_HEADER, (b"content-length", str(len(body)).encode()), (REQUEST_ID_HEADER, request_id)]
            if retry_after is not None:
                headers.append((b"retry-after", str(retry_after).encode()))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            latency_observer(route.method, route.template, status)(time.perf_counter() - started)
            return True
        finally:
            request_id_var.reset(token)
