"""An app called as a server would call it, straight through its ASGI callable: the requests of the
instruction counts (`driver.py` for tenk's own paths, `arena.py` for the HttpArena entries).

Standard library only: `arena.py` imports it from an entry's own environment, where tenk is not installed.
"""

from __future__ import annotations

import asyncio
from itertools import repeat
from typing import Any

Scope = dict[str, Any]


def request_scope(key: str | None, method: str, path: str, query: bytes = b"", body: bytes = b"") -> Scope:
    """An HTTP scope as a server makes it; with `key`, a bearer token (None: no authorization header)."""
    host = (b"host", b"budget.test")
    # One list display, as driver.py's requests always built it: tenk's budgets count this too.
    headers = [host, (b"authorization", f"Bearer {key}".encode())] if key is not None else [host]
    if body:
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


class Requests:
    """Calls the app as a server would, and checks the status of every answer."""

    def __init__(self, app: Any, expected: int, plant_iterations: int = 0) -> None:
        self.app = app
        self.expected = expected
        self.plant_iterations = plant_iterations

    async def one(self, scope: Scope, body: bytes = b"") -> None:
        if self.plant_iterations:
            for _ in repeat(None, self.plant_iterations):
                pass
        status = 0
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # a client that stays connected
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await self.app(dict(scope), receive, send)
        if status != self.expected:
            raise SystemExit(f"{scope['method']} {scope['path']}: {status}, expected {self.expected}")


async def count_between_marks(client: Requests, make: Any, count: int, marks: Any, warm_up: int) -> None:
    """`warm_up` requests uncounted, then `count` between callgrind's marks; `make(n)` gives the n-th
    request's (scope, body)."""
    for n in range(warm_up):
        await client.one(*make(n))
    marks.tenk_measure_start()
    for n in range(count):
        await client.one(*make(warm_up + n))
    marks.tenk_measure_stop()
