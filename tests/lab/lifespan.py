"""The ASGI lifespan of the suite's tiny test apps: nothing to start or stop, each step acknowledged."""

from __future__ import annotations

from typing import Any


async def acknowledge_lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
