"""A target whose CPU goes where its settings say, to check that the lab's profile finds it there.

Every request burns STEADY_MS of CPU in `steady_work`, then EXTRA_MS in `extra_work` (none by default):
a rung that sets EXTRA_MS spends its extra CPU in a function the rung before it never ran. CPU time, not
wall time: on a busy machine the loop still burns what it was told to.
"""

from __future__ import annotations

import os
import time
from typing import Any

STEADY_S = float(os.environ.get("STEADY_MS", "4")) / 1000
EXTRA_S = float(os.environ.get("EXTRA_MS", "0")) / 1000


def steady_work() -> None:
    _spin_in_steady(STEADY_S)


def extra_work() -> None:
    _spin_in_extra(EXTRA_S)


# Each burner is its own function, so the frame running is the one the profile must name.
def _spin_in_steady(seconds: float) -> None:
    stop = time.process_time() + seconds
    while time.process_time() < stop:
        pass


def _spin_in_extra(seconds: float) -> None:
    stop = time.process_time() + seconds
    while time.process_time() < stop:
        pass


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] != "/health":
        steady_work()
        if EXTRA_S:
            extra_work()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"done":true}'})
