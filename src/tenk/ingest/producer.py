"""The API side of the stream: XADDs from concurrent requests leave together.

Each request hands its encoded events to `add` and waits. One sender sends everything that queued up
while the previous round trip was in flight as one script call, then wakes each waiter. Under load a
request costs a future, not a Redis command of its own; when idle a request goes out at once, because
the sender does not wait to fill a batch. A request returns only after Redis has confirmed its XADDs.
"""

from __future__ import annotations

import asyncio
import logging

from redis.asyncio import Redis

from tenk.background import cancel_and_wait
from tenk.ingest import keys

logger = logging.getLogger("tenk.ingest.producer")

_MAX_ENTRIES_PER_CALL = 4096


class StreamProducer:
    def __init__(self, redis: Redis) -> None:
        self._script = redis.register_script(keys.XADD_MANY)
        self._queue: list[tuple[list[bytes], asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sender = asyncio.create_task(self._send_forever(), name="ingest-producer")

    async def stop(self) -> None:
        await cancel_and_wait(self._sender)
        for _, waiter in self._queue:
            if not waiter.done():
                waiter.set_exception(ConnectionError("the API is shutting down"))
        self._queue.clear()

    async def add(self, entries: list[bytes]) -> None:
        """Append the entries to the stream; returns once Redis has confirmed all of them."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((entries, waiter))
        self._wake.set()
        await waiter

    async def _send_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                taken = 0
                count = 0
                for entries, _ in self._queue:
                    if count and count + len(entries) > _MAX_ENTRIES_PER_CALL:
                        break
                    count += len(entries)
                    taken += 1
                batch, self._queue = self._queue[:taken], self._queue[taken:]
                args = [entry for entries, _ in batch for entry in entries]
                try:
                    await self._script(keys=[keys.STREAM, keys.STATS], args=args)
                except asyncio.CancelledError:
                    for _, waiter in batch:
                        if not waiter.done():
                            waiter.set_exception(ConnectionError("the API is shutting down"))
                    raise
                except Exception as exc:
                    logger.warning("XADD of %d events failed: %s", count, exc)
                    for _, waiter in batch:
                        if not waiter.done():
                            waiter.set_exception(exc)
                else:
                    for _, waiter in batch:
                        if not waiter.done():
                            waiter.set_result(None)
