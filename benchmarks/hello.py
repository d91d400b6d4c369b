"""The ceiling for `bench-reads`: a bare ASGI app that answers every request with a fixed JSON body."""

from __future__ import annotations

from typing import Any

_BODY = b'{"ping":"pong"}'
_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(_BODY)).encode())],
}
_END = {"type": "http.response.body", "body": _BODY}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        await send(_START)
        await send(_END)
