"""A target with a known limit: each request holds one of SEM_PERMITS slots for SEM_SLEEP_MS.

Its throughput cannot exceed permits / sleep (2 / 20 ms = 100 req/s), whatever the machine.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from tests.lab.lifespan import acknowledge_lifespan

PERMITS = int(os.environ.get("SEM_PERMITS", "2"))
SLEEP_S = float(os.environ.get("SEM_SLEEP_MS", "20")) / 1000
_slots = asyncio.Semaphore(PERMITS)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await acknowledge_lifespan(receive, send)
        return
    if scope["path"] == "/health":
        body = b'{"status":"ok"}'
    else:
        async with _slots:
            await asyncio.sleep(SLEEP_S)
        body = b'{"done":true}'
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
