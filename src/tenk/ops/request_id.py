"""Take `X-Request-ID` from the request, or make one, and echo it on the response."""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

request_id_var: ContextVar[str | None] = ContextVar("tenk_request_id", default=None)

# A client-chosen id goes into our logs and back into a header: accept only a safe, bounded shape.
_ACCEPTABLE = re.compile(rb"^[A-Za-z0-9._:\-]{1,128}$")
HEADER = b"x-request-id"


def resolve_request_id(scope: Scope) -> bytes:
    for name, value in scope["headers"]:
        if name == HEADER:
            if _ACCEPTABLE.match(value):
                return bytes(value)
            break
    return uuid.uuid4().hex.encode()


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = resolve_request_id(scope)
        scope["request_id"] = request_id.decode()
        token = request_id_var.set(scope["request_id"])

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (HEADER, request_id)]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id_var.reset(token)
