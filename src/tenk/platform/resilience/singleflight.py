"""Coalesce concurrent calls for one key into one call (Go's `singleflight`).

By default the work runs in its own task, so a caller that is cancelled (client hung up) does not
cancel it for the others waiting on the same key. `forget` ends the sharing of a call: the callers
already waiting keep theirs, and the next caller starts a new one (a write made the old one's answer
stale).

`SingleFlight(own_task=False)`: the first caller runs the work in its own task, inline, and the others
wait for its answer. A lone call then costs no task, no shield and no loop turns for their callbacks
(it is answered in the turn its work ends). When that first caller is cancelled, its work is too, and
the callers waiting on it start the call again, the first of them in its place: none of them is
cancelled for it, and none gets an answer older than its own call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _LeaderCancelled(Exception):
    """What the callers waiting on an inline call see when its first caller was cancelled: call again."""


class SingleFlight(Generic[K, V]):
    def __init__(self, *, own_task: bool = True) -> None:
        self._inflight: dict[K, asyncio.Future[V]] = {}
        self._own_task = own_task
        self.calls = 0

    def __len__(self) -> int:
        return len(self._inflight)

    def __contains__(self, key: K) -> bool:
        """Is a call for `key` in flight (so `do` would join it)?"""
        return key in self._inflight

    async def do(self, key: K, fn: Callable[[], Awaitable[V]]) -> V:
        future = self._inflight.get(key)
        if self._own_task:
            if future is None:
                self.calls += 1
                future = asyncio.ensure_future(fn())
                self._inflight[key] = future
                future.add_done_callback(lambda done: self._settle(key, done))
            return await asyncio.shield(future)
        while future is not None:
            try:
                # Shielded: a waiting caller that is cancelled leaves the call to the others.
                return await asyncio.shield(future)
            except _LeaderCancelled:
                future = self._inflight.get(key)
        # No call in flight: this caller leads one, in its own task (inline, in this coroutine).
        self.calls += 1
        led: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._inflight[key] = led
        try:
            result = await fn()
        except asyncio.CancelledError:
            _fail(led, _LeaderCancelled())
            raise
        except BaseException as exc:
            _fail(led, exc)
            raise
        finally:
            # A forgotten call must not take the entry of the one that replaced it.
            if self._inflight.get(key) is led:
                del self._inflight[key]
        led.set_result(result)
        return result

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


def _fail(future: asyncio.Future[V], exc: BaseException) -> None:
    future.set_exception(exc)
    # Marked retrieved: when nobody waits on it, nobody else will.
    future.exception()
