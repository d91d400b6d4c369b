"""A cap on calls in flight to one dependency, with a bounded wait instead of an unbounded queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class BulkheadFullError(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(f"bulkhead {name!r} is full")
        self.name = name


class Bulkhead:
    """`max_wait_s=0` rejects at once when full; a positive wait queues for at most that long."""

    def __init__(self, name: str, max_inflight: int, max_wait_s: float = 0.0) -> None:
        self.name = name
        self.max_inflight = max_inflight
        self.max_wait_s = max_wait_s
        self._semaphore = asyncio.Semaphore(max_inflight)
        self.rejected = 0

    @property
    def inflight(self) -> int:
        return self.max_inflight - self._semaphore._value

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._semaphore.locked():
            if self.max_wait_s <= 0:
                self.rejected += 1
                raise BulkheadFullError(self.name)
            try:
                # A timeout scope, not wait_for: on Python 3.11 wait_for wraps the wait in a task of its own,
                # and under load nearly every search request waits here.
                async with asyncio.timeout(self.max_wait_s):
                    await self._semaphore.acquire()
            except TimeoutError:
                self.rejected += 1
                raise BulkheadFullError(self.name) from None
        else:
            await self._semaphore.acquire()
        try:
            yield
        finally:
            self._semaphore.release()
