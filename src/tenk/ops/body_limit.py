"""Refuse request bodies over a byte limit with 413, whether or not the client sent Content-Length."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenk.errors import PayloadTooLargeError, error_body


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self._too_large = error_body("payload_too_large", f"request body exceeds {max_bytes} bytes")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit() or int(value) > self.max_bytes:
                    await self._reject(send)
                    return
                break
        received = 0
        max_bytes = self.max_bytes

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    raise PayloadTooLargeError(f"request body exceeds {max_bytes} bytes")
            return message

        await self.app(scope, counting_receive, send)

    async def _reject(self, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(self._too_large)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": self._too_large})
