"""The request body, guarded: no body is read for a client that may not write, none beyond the byte
limit, and none for longer than the body deadline.

Invariant: an unauthenticated client can make the server hold no more than its headers. A route that
needs a writer key is answered 401/403 from the headers alone, before a byte of body is read (FastAPI
itself would read, and buffer, the whole body before running the route's auth dependency). Every
other body is streamed through as it arrives, never buffered here: the app sees at most `max_bytes`,
and a client still sending after `timeout_s` gets 408, so a slow sender cannot hold a request open
for ever (the servers bound neither).

Two lanes use this:
- FastAPI routes, through `RequestBodyGuard`, an ASGI middleware around the app.
- The hot lane (tenk.lane), which runs before the middleware, checks the key from the headers
  before it reads a body on a write route, and reads bodies with `read_body(...)`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import fastapi.routing
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenk.errors import PayloadTooLargeError, RequestTimeoutError, TenkError, error_body
from tenk.ops.auth import check_authorization_header, require_writer

# Methods whose requests carry no body worth guarding.
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def api_routes(app: FastAPI) -> list[APIRoute]:
    # FastAPI from 0.160 keeps included routers as such and flattens them on demand; older ones flatten
    # them into app.routes at include time.
    iterate = getattr(fastapi.routing, "iter_route_contexts", None)
    routes = [context.original_route for context in iterate(app.routes)] if iterate else app.routes
    return [route for route in routes if isinstance(route, APIRoute)]


def writer_routes(app: FastAPI) -> list[APIRoute]:
    """The app's routes that declare `require_writer` (call after every router is included)."""
    return [
        route
        for route in api_routes(app)
        if any(dependency.dependency is require_writer for dependency in route.dependencies)
    ]


def writer_refusal(scope: Scope, accepted_digests: list[str]) -> TenkError | None:
    """Why this request may not write (401 no key, 403 wrong key), from its headers alone; or None."""
    authorization = b""
    for name, value in scope["headers"]:
        if name == b"authorization":
            authorization = bytes(value)
            break
    try:
        check_authorization_header(authorization, accepted_digests)
    except TenkError as refusal:
        return refusal
    return None


def declared_length(scope: Scope) -> int | None:
    """Content-Length as sent, or None when absent; -1 when it is not a plain decimal number."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            # A length over 19 digits is over any limit; int() of a huge string would cost CPU.
            return int(value) if value.isdigit() and len(value) <= 19 else -1
    return None


async def read_body(receive: Receive, max_bytes: int, deadline: float) -> bytes:
    """The whole body, or PayloadTooLargeError / RequestTimeoutError. `deadline` is loop time."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout_at(deadline):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise TenkError("client disconnected")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > max_bytes:
                    raise PayloadTooLargeError(f"request body exceeds {max_bytes} bytes")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    except TimeoutError:
        raise RequestTimeoutError("the request body did not arrive in time") from None


def _too_large(max_bytes: int) -> TenkError:
    return PayloadTooLargeError(f"request body exceeds {max_bytes} bytes")


def _too_slow(timeout_s: float) -> TenkError:
    return RequestTimeoutError(f"the request body did not arrive within {timeout_s:g}s")


class RequestBodyGuard:
    """ASGI middleware; see the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        timeout_s: float,
        writer_routes: Sequence[BaseRoute],
        accepted_digests: list[str],
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.writer_routes = list(writer_routes)
        self.accepted_digests = accepted_digests

    def _needs_writer(self, scope: Scope) -> bool:
        return any(route.matches(scope)[0] is Match.FULL for route in self.writer_routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _BODILESS:
            await self.app(scope, receive, send)
            return
        if self._needs_writer(scope):
            refusal = writer_refusal(scope, self.accepted_digests)
            if refusal is not None:
                await _answer(send, refusal)
                return
        length = declared_length(scope)
        if length is not None and not 0 <= length <= self.max_bytes:
            await _answer(send, _too_large(self.max_bytes))
            return
        await _GuardedRequest(self, scope, receive, send).run()


class _GuardedRequest:
    """One request's receive and send, watched: the guard answers, and drops the app's answer, if the
    body breaks the limit or the deadline."""

    __slots__ = ("_deadline", "_guard", "_receive", "_received", "_responded", "_scope", "_send", "_started")

    def __init__(self, guard: RequestBodyGuard, scope: Scope, receive: Receive, send: Send) -> None:
        self._guard = guard
        self._scope = scope
        self._receive = receive
        self._send = send
        self._deadline = asyncio.get_running_loop().time() + guard.timeout_s
        self._received = 0
        self._started = False  # the app has started its response
        self._responded = False  # we answered in the app's place

    async def run(self) -> None:
        await self._guard.app(self._scope, self.receive, self.send)

    async def receive(self) -> Message:
        if self._responded:
            return {"type": "http.disconnect"}
        try:
            async with asyncio.timeout_at(self._deadline):
                message = await self._receive()
        except TimeoutError:
            return await self._refuse(_too_slow(self._guard.timeout_s))
        if message["type"] == "http.request":
            self._received += len(message.get("body", b""))
            if self._received > self._guard.max_bytes:
                return await self._refuse(_too_large(self._guard.max_bytes))
        return message

    async def send(self, message: Message) -> None:
        if self._responded:
            return
        if message["type"] == "http.response.start":
            self._started = True
        await self._send(message)

    async def _refuse(self, error: TenkError) -> Message:
        # The app sees the client go away; whatever it answers to that is dropped in `send`.
        if not self._started:
            self._responded = True
            await _answer(self._send, error)
        return {"type": "http.disconnect"}


async def _answer(send: Send, error: TenkError) -> None:
    fields = [{"field": error.field, "message": error.message}] if error.field else None
    body = error_body(error.code, error.message, fields)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if error.retry_after_s is not None:
        headers.append((b"retry-after", str(max(1, math.ceil(error.retry_after_s))).encode()))
    if error.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    # The rest of the body is never read: tell the client this connection is done.
    headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
