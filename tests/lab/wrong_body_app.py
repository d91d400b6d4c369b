"""A target that answers `GET /items/{n}` with `{"id": n}`, except for every tenth n, whose answer names
n + 1: a 200 with the wrong body, which only a body check can tell from a right one."""

from __future__ import annotations

from typing import Any

from tests.lab.lifespan import acknowledge_lifespan


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await acknowledge_lifespan(receive, send)
        return
    item = int(scope["path"].rsplit("/", 1)[1]) if scope["path"].startswith("/items/") else 0
    body = b'{"id": %d}' % (item + 1 if item % 10 == 0 else item)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
