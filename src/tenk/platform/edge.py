"""The request edge: the one layer every HTTP request passes, whichever lane answers it.

    server ─▶ TenkAPI ─▶ middleware added with add_middleware ─▶ RequestEdge
                                     ├─▶ Lane.match ─▶ the route's handler      (the `@hot` routes)
                                     └─▶ FastAPI: routing, Depends, validation ─▶ the same handler

The edge gives every request, in this order: its id (`X-Request-ID`, echoed, and in the log context);
its client, through the trusted proxies' X-Forwarded-For (`tenk.ops.forwarded`), put in `scope["client"]`;
a 400 for a path that holds a control character, before either lane matches it; the key check, from the
headers alone, on routes that need a key; the limit on the declared length; the body, streamed within
the byte limit and the deadline; and, once answered, its latency in the route-template histogram (and an
access log line when on). A concern added here cannot skip a lane, and every answer the edge writes (a
hot route's reply or a refusal) goes through `answer`, with the headers FastAPI's responses take too
(`tenk.platform.reply.Reply.headers`): the two lanes cannot drift apart.

A refusal made before the body was read carries `Connection: close`: the rest of the body is never
read, so the connection cannot carry another request.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from fastapi import FastAPI
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenk.ops.forwarded import TrustedProxies
from tenk.platform.auth import KeyPolicy, check_authorization_header
from tenk.platform.errors import CLIENT_LEFT, ClientDisconnectedError, MalformedPathError, TenkError, reply_for
from tenk.platform.lane import HotCall, Lane, header
from tenk.platform.lane.derive import UNRECOGNISED
from tenk.platform.metrics import latency_observer, method_label, route_template
from tenk.platform.reply import CLOSE, Reply
from tenk.platform.request_body import BODILESS, declared_length, too_large, too_slow, writer_routes
from tenk.platform.request_id import HEADER as REQUEST_ID_HEADER
from tenk.platform.request_id import request_id_var, resolve_request_id

access_logger = logging.getLogger("tenk.access")
_DISCONNECT: Final[Message] = {"type": "http.disconnect"}
# Unicode's control characters (category Cc): C0 (NUL, TAB, LF, CR, ESC...), DEL, and C1 (NEL, CSI...). No
# route's path holds one. Starlette's route regexes end in `$`, which also matches before a trailing
# newline, so `/metrics%0A` would be served as `/metrics` past a proxy that refuses `/metrics` exactly;
# C1 dodges no regex, but NEL ends a line for some log readers and CSI starts a terminal's escape.
# Other invisible characters (format, separators) are text in some languages, and route as themselves.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
CONTROL_IN_PATH = "the path holds a control character (C0, DEL or C1), percent-encoded or not"


async def answer(send: Send, reply: Reply, request_id: bytes, *, close: bool = False) -> int:
    """Write a reply as the whole response; its status back, for the metrics."""
    headers = [*reply.headers, (REQUEST_ID_HEADER, request_id)]
    if close:
        headers.append(CLOSE)
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})
    return reply.status


class RequestEdge:
    """Pure ASGI around the hot lane and FastAPI; see the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        lane: Lane | None,
        writer_routes: Sequence[BaseRoute],
        accepted_digests: list[str],
        max_body_bytes: int,
        body_timeout_s: float,
        access_log: bool,
        trusted_proxies: TrustedProxies | None = None,
    ) -> None:
        self.app = app
        self.lane = lane
        self.trusted_proxies = trusted_proxies
        self.writer_routes = list(writer_routes)
        self.accepted_digests = accepted_digests
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = resolve_request_id(scope)
        token = request_id_var.set(request_id)
        status = 500
        passed: _Exchange | None = None
        if self.trusted_proxies is not None:
            scope["client"] = self.trusted_proxies.client(scope)
        path = scope["path"]
        # For ASCII, isprintable() is exactly "no control character": the regex runs only for other text.
        clean = path.isprintable() or _CONTROL.search(path) is None
        hot = self.lane.match(scope) if self.lane is not None and clean else None
        try:
            if hot is not None:
                route, args = hot
                # A bodiless route that needs no key goes straight to its handler; the rest are admitted
                # first (the key, the body), or answered in the handler's place.
                answered = None if route.admit_at_once else await self._admit(hot, scope, receive, send, request_id)
                if answered is None:
                    # Written here rather than through `answer`: a coroutine less on every hot request.
                    try:
                        reply = route.handler(*args)
                        if not isinstance(reply, Reply):
                            reply = await reply
                    except Exception as exc:
                        reply = reply_for(exc)
                    status = reply.status
                    headers = [*reply.headers, (REQUEST_ID_HEADER, request_id)]
                    await send({"type": "http.response.start", "status": status, "headers": headers})
                    await send({"type": "http.response.body", "body": reply.body})
                else:
                    status = answered
            else:
                passed = _Exchange(self, scope, receive, send, request_id)
                if clean:
                    await passed.pass_on()
                else:
                    await passed.refuse(MalformedPathError(CONTROL_IN_PATH, field="path"))
        finally:
            elapsed = time.perf_counter() - started
            # Labels from bounded sets only (tenk.platform.metrics): a hot route's own, or what routing matched.
            if hot is not None:
                route = hot[0]
                observe = route.observers.get(status)
                if observe is None:
                    observe = route.observers[status] = latency_observer(route.method, route.template, status)
                observe(elapsed)
            else:
                assert passed is not None
                status = passed.status
                latency_observer(method_label(scope["method"]), route_template(scope), status)(elapsed)
            if self.access_log:
                self._log(scope, status, elapsed)  # inside the request's id, which the log line carries
            request_id_var.reset(token)

    async def _admit(self, hot: HotCall, scope: Scope, receive: Receive, send: Send, request_id: bytes) -> int | None:
        """Check a hot request's key and read its body into its arguments: None when the handler may
        answer, or the status of the answer given in its place (a refusal, FastAPI's 422)."""
        route, args = hot
        needs_key = route.key_required
        if route.body is None:
            if needs_key and (refusal := self.refusal(scope, True, False)) is not None:
                return await answer(send, reply_for(refusal), request_id)
            return None
        exchange = _Exchange(self, scope, receive, send, request_id)
        body = await exchange.read_body(needs_key)
        if body is None:
            return exchange.status
        position, parse = route.body
        value = parse(body)
        if value is UNRECOGNISED:
            return await exchange.replay(body)  # FastAPI words the 422, from the same bytes
        args[position] = value
        return None

    def refusal(self, scope: Scope, needs_key: bool, has_body: bool) -> TenkError | None:
        """Why this request is refused from its headers alone (401, 403, 413), or None."""
        if needs_key:
            try:
                check_authorization_header(header(scope, b"authorization"), self.accepted_digests)
            except TenkError as refusal:
                return refusal
        if has_body:
            length = declared_length(scope)
            if length is not None and not 0 <= length <= self.max_body_bytes:
                return too_large(self.max_body_bytes)
        return None

    def needs_writer(self, scope: Scope) -> bool:
        for route in self.writer_routes:
            if route.matches(scope)[0] is Match.FULL:
                # Named now, as routing would: the refusal's latency is the route's, in either lane.
                scope["route"] = route
                return True
        return False

    def _log(self, scope: Scope, status: int, elapsed: float) -> None:
        client = scope.get("client")
        access_logger.info(
            "request",
            extra={
                "client": client[0] if client else None,
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
                "duration_ms": round(elapsed * 1000, 3),
            },
        )


class _Exchange:
    """One request's receive and send, watched by the edge: its body within the limit and the deadline,
    its status noted, its id echoed; if the edge refuses mid-way, the app sees the client leave and
    whatever it answers to that is dropped."""

    __slots__ = (
        "_body_done",
        "_deadline",
        "_edge",
        "_receive",
        "_received",
        "_refused",
        "_request_id",
        "_scope",
        "_send",
        "_started",
        "status",
    )

    def __init__(self, edge: RequestEdge, scope: Scope, receive: Receive, send: Send, request_id: bytes) -> None:
        self._edge = edge
        self._scope = scope
        self._receive = receive
        self._send = send
        self._request_id = request_id
        self._deadline = asyncio.get_running_loop().time() + edge.body_timeout_s
        self._received = 0
        self._body_done = False
        self._started = False  # a response has started
        self._refused = False  # the edge answered in the app's place
        self.status = 500

    async def pass_on(self) -> None:
        """Hand the request to FastAPI, guarded as a hot route's would be."""
        edge, scope = self._edge, self._scope
        if scope["method"] in BODILESS:
            await edge.app(scope, self._receive, self.send)
            return
        refusal = edge.refusal(scope, edge.needs_writer(scope), True)
        if refusal is not None:
            await self.refuse(refusal)
            return
        await edge.app(scope, self.receive, self.send)

    async def read_body(self, needs_key: bool) -> bytes | None:
        """A hot route's whole body; None when the edge refused (and so answered) instead."""
        refusal = self._edge.refusal(self._scope, needs_key, True)
        if refusal is not None:
            await self.refuse(refusal)
            return None
        chunks: list[bytes] = []
        while True:
            message = await self.receive()
            if message["type"] != "http.request":
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def replay(self, body: bytes) -> int:
        """Hand FastAPI a request whose whole body the edge has read: it reads those bytes, then this
        exchange's messages as before (the client leaving). The answer's status back."""
        replayed = False

        async def receive() -> Message:
            nonlocal replayed
            if replayed:
                return await self.receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._edge.app(self._scope, receive, self.send)
        return self.status

    async def receive(self) -> Message:
        if self._refused:
            return _DISCONNECT
        if self._body_done:
            return await self._receive()
        try:
            async with asyncio.timeout_at(self._deadline):
                message = await self._receive()
        except TimeoutError:
            return await self.refuse(too_slow(self._edge.body_timeout_s))
        if message["type"] == "http.request":
            self._received += len(message.get("body", b""))
            if self._received > self._edge.max_body_bytes:
                return await self.refuse(too_large(self._edge.max_body_bytes))
            self._body_done = not message.get("more_body", False)
        elif message["type"] == "http.disconnect":
            return await self.refuse(ClientDisconnectedError(CLIENT_LEFT))
        return message

    async def send(self, message: Message) -> None:
        if self._refused:
            return
        if message["type"] == "http.response.start":
            self._started = True
            self.status = message["status"]
            message["headers"] = [*message.get("headers", ()), (REQUEST_ID_HEADER, self._request_id)]
        await self._send(message)

    async def refuse(self, error: TenkError) -> Message:
        if not self._started:
            self._refused = True
            self.status = await answer(self._send, reply_for(error), self._request_id, close=True)
        return _DISCONNECT


def _coroutine_function(function: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Mark a plain function that returns a coroutine as a coroutine function, for the servers and clients
    that ask which ASGI version an app speaks (uvicorn, starlette's test client: an app whose `__call__` is
    not one is taken for ASGI 2)."""
    if sys.version_info >= (3, 12):
        return inspect.markcoroutinefunction(function)
    # What `asyncio.iscoroutinefunction` looks for on Python 3.11.
    function._is_coroutine = getattr(asyncio.coroutines, "_is_coroutine")  # type: ignore[attr-defined]  # noqa: B009
    return function


class TenkAPI(FastAPI):
    """FastAPI with the edge in front (`open_edge`). Middleware added with `add_middleware` wraps the
    edge, so that it sees every request, the hot lane's included."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.edge: RequestEdge | None = None
        self._entry: ASGIApp | None = None

    def open_edge(
        self,
        *,
        hot_lane: bool,
        needs_key: Callable[[KeyPolicy], bool],
        max_body_bytes: int,
        body_timeout_s: float,
        access_log: bool,
        trusted_proxies: Sequence[str] = (),
        accepted_digests: Sequence[str] | None = None,
    ) -> RequestEdge:
        """Put the edge in front; call after every router is included (the lane is derived from them).

        `needs_key` judges each route's key policies, in both lanes (the `require_*` checks FastAPI runs
        ask it too); `accepted_digests` are the SHA-256 digests of the accepted keys (`key_digest(key)`),
        none by default, or what `app.state.accepted_key_digests` already holds (tenk's `create_app`
        puts the settings' there); `trusted_proxies` are the networks whose X-Forwarded-For is believed
        (none: the peer is the client)."""
        if accepted_digests is not None or not hasattr(self.state, "accepted_key_digests"):
            self.state.accepted_key_digests = [value.lower() for value in accepted_digests or ()]
        self.state.key_needed = needs_key
        self.edge = RequestEdge(
            functools.partial(FastAPI.__call__, self),
            lane=Lane.derive(self.router.routes, self.state, needs_key) if hot_lane else None,
            writer_routes=writer_routes(self),
            accepted_digests=self.state.accepted_key_digests,
            max_body_bytes=max_body_bytes,
            body_timeout_s=body_timeout_s,
            access_log=access_log,
            trusted_proxies=TrustedProxies(trusted_proxies) if trusted_proxies else None,
        )
        return self.edge

    @property
    def lane(self) -> Lane | None:
        return self.edge.lane if self.edge is not None else None

    def build_middleware_stack(self) -> ASGIApp:
        # Added middleware goes around the edge (`_wrapped_edge`), not inside FastAPI behind it.
        added, self.user_middleware = self.user_middleware, []
        try:
            return super().build_middleware_stack()
        finally:
            self.user_middleware = added

    def _wrapped_edge(self) -> ASGIApp:
        self.middleware_stack = self.build_middleware_stack()  # from now on, add_middleware refuses
        app: ASGIApp = self.edge if self.edge is not None else functools.partial(FastAPI.__call__, self)
        for cls, args, kwargs in reversed(self.user_middleware):
            app = cls(app, *args, **kwargs)
        return app

    @_coroutine_function
    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:  # type: ignore[override]
        # Not `async def`: the edge's own coroutine is handed back, and a server awaits it. A coroutine of
        # this method around it would be a second coroutine on every request (budgets.json: cached_hit).
        entry = self._entry
        if entry is None:
            entry = self._entry = self._wrapped_edge()
        return entry(scope, receive, send)
