"""A constant-rate (open-loop) HTTP client for correctness tests: every failed request, never a figure.

Open loop: request i leaves at start + i / rate whether or not earlier ones have been answered, as real
traffic does, so a node that stalls or refuses shows up as failures rather than as a slower client.
It runs in a thread of its own, so that a test can restart servers meanwhile with blocking calls.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

# (method, path, JSON body or None, headers) for request number i.
RequestFor = Callable[[int], tuple[str, str, object, dict[str, str]]]


@dataclass
class OpenLoop:
    base_url: str
    rate: float
    request_for: RequestFor
    timeout_s: float = 10.0
    sent: int = 0
    answered: int = 0
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="open-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sending, and wait for every request in flight to be answered or to time out."""
        self._stop.set()
        assert self._thread is not None
        self._thread.join(self.timeout_s * 3)
        assert not self._thread.is_alive(), "the load did not finish"

    async def _run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:
            in_flight: set[asyncio.Task[None]] = set()
            started = time.monotonic()
            for i in itertools.count():
                if self._stop.is_set():
                    break
                delay = started + i / self.rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                task = asyncio.create_task(self._one(session, i))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
                self.sent += 1
            if in_flight:
                await asyncio.wait(in_flight)

    async def _one(self, session: aiohttp.ClientSession, i: int) -> None:
        method, path, body, headers = self.request_for(i)
        try:
            async with session.request(method, self.base_url + path, json=body, headers=headers) as response:
                body = await response.read()
                if response.status >= 300:
                    self.failures.append(f"{method} {path}: {response.status} {body[:200]!r} at {time.monotonic():.2f}")
                else:
                    self.answered += 1
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.failures.append(f"{method} {path}: {exc.__class__.__name__}: {exc} at {time.monotonic():.2f}")
