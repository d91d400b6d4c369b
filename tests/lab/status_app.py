"""A target that answers every other request with a fast 503: throughput that is not goodput."""

from __future__ import annotations

import itertools
from typing import Any

from tests.lab.lifespan import acknowledge_lifespan

_count = itertools.count()


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await acknowledge_lifespan(receive, send)
        return
    status = 200 if scope["path"] == "/health" or next(_count) % 2 else 503
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"{}"})
