"""Coalesce concurrent calls for one key into one call (Go's `singleflight`).

The work runs in its own task, so a caller that is cancelled (client hung up) does not cancel it
for the others waiting on the same key. `forget` ends the sharing of a call: the callers already
waiting keep theirs, and the next caller starts a new one (a write made the old one's answer stale).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    def __init__(self) -> None:
        self._inflight: dict[K, asyncio.Future[V]] = {}
        self.calls = 0

    def __len__(self) -> int:
        return len(self._inflight)

    def __contains__(self, key: K) -> bool:
        """Is a call for `key` in flight (so `do` would join it)?"""
        return key in self._inflight

    async def do(self, key: K, fn: Callable[[], Awaitable[V]]) -> V:
        future = self._inflight.get(key)
        if future is None:
            self.calls += 1
            future = asyncio.ensure_future(fn())
            self._inflight[key] = future
            future.add_done_callback(lambda done: self._settle(key, done))
        return await asyncio.shield(future)

    def forget(self, key: K) -> None:
        """Let no later caller join the call in flight for `key`: the next `do` starts its own."""
        self._inflight.pop(key, None)

    def _settle(self, key: K, done: asyncio.Future[V]) -> None:
        # A forgotten call must not take the entry of the one that replaced it.
        if self._inflight.get(key) is done:
            del self._inflight[key]
        # Mark the exception retrieved: when every waiter was cancelled nobody else will.
        if not done.cancelled():
            done.exception()
