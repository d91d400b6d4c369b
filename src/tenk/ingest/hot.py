"""POST /events and /events/batch in a pure-ASGI fast lane in front of FastAPI.

At thousands of events a second, FastAPI's route matching and dependency solving cost more than
accepting the event does. This lane does the same work as the documented routes (API key, body limit,
validation, XADD, the same outcome from `accept.py`) and what every request gets (a request id, echoed;
latency in the route-template histogram), and nothing else. Other methods and paths pass through.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.datastructures import State
from starlette.types import ASGIApp, Receive, Scope, Send

from tenk.errors import ForbiddenError, PayloadTooLargeError, TenkError, UnauthorizedError, response_for
from tenk.ingest.accept import Outcome, accept_batch, accept_one
from tenk.ops.auth import key_is_accepted
from tenk.ops.metrics import REQUEST_LATENCY
from tenk.ops.request_id import HEADER as REQUEST_ID_HEADER
from tenk.ops.request_id import request_id_var, resolve_request_id

_ONE, _BATCH = "/events", "/events/batch"
_JSON_HEADER = (b"content-type", b"application/json")


class IngestFastLane:
    def __init__(self, app: ASGIApp, state: State, max_body_bytes: int) -> None:
        self.app = app
        self.state = state
        self.max_body_bytes = max_body_bytes
        self._timers: dict[tuple[str, int], Callable[[float], None]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in (_ONE, _BATCH):
            await self._serve(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        path: str = scope["path"]
        request_id = resolve_request_id(scope)
        token = request_id_var.set(request_id.decode())
        try:
            try:
                status, body, retry_after = await self._outcome(path, scope, receive)
            except Exception as exc:
                response = response_for(exc)
                status, body = response.status_code, bytes(response.body)
                retry = response.headers.get("retry-after")
                retry_after = int(retry) if retry else None
            headers = [_JSON_HEADER, (b"content-length", str(len(body)).encode()), (REQUEST_ID_HEADER, request_id)]
            if retry_after is not None:
                headers.append((b"retry-after", str(retry_after).encode()))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            self._timer(path, status)(time.perf_counter() - started)
        finally:
            request_id_var.reset(token)

    async def _outcome(self, path: str, scope: Scope, receive: Receive) -> Outcome:
        authorization = content_type = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length" and (not value.isdigit() or int(value) > self.max_body_bytes):
                raise PayloadTooLargeError(f"request body exceeds {self.max_body_bytes} bytes")
        self._authorize(authorization)
        body = await self._body(receive)
        service = self.state.ingest
        if path == _ONE:
            return await accept_one(service, body)
        return await accept_batch(service, body, b"ndjson" in content_type)

    def _authorize(self, authorization: bytes) -> None:
        scheme, _, key = authorization.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise UnauthorizedError("missing API key: send Authorization: Bearer <key>", field="header.authorization")
        if not key_is_accepted(key.strip(), self.state.accepted_key_digests):
            raise ForbiddenError("API key not accepted", field="header.authorization")

    async def _body(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise TenkError("client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise PayloadTooLargeError(f"request body exceeds {self.max_body_bytes} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _timer(self, template: str, status: int) -> Callable[[float], None]:
        timer = self._timers.get((template, status))
        if timer is None:
            timer = self._timers[(template, status)] = REQUEST_LATENCY.labels("POST", template, str(status)).observe
        return timer
