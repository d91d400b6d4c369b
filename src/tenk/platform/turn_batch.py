"""Calls for different keys that start in the same event-loop turn, while another call is in flight, go
out as one call.

Under load many requests each need their own key at once (a product's row, its cached copy), and each
call costs a round trip plus the fixed overhead of a statement or a command, in the server and in the
client library. A call that finds another one in flight leads a batch: it yields the loop once
(`sleep(0)`, no timer), so every call started meanwhile joins it, then it makes one call for all their
keys and hands each joined call its answer. A call with none in flight (one request at a time) goes out
at once, alone: no wait, and no cost but a counter.

A failed batch fails every call in it, and each caller counts the failure where it counts its own (a
breaker, say). A joined call that gives up (its client left) leaves the others their answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TurnBatch(Generic[K, V]):
    def __init__(
        self,
        one: Callable[[K], Awaitable[V]],
        many: Callable[[list[K]], Awaitable[Mapping[K, V]]] | None,
        observe_size: Callable[[int], object],
    ) -> None:
        """`one` answers one key; `many` answers several, each key of its list in its mapping (None: never
        batch). `observe_size` sees each batch's size: lone calls are not observed, which would cost them a
        few percent."""
        self._one = one
        self._many = many
        self._observe_size = observe_size
        # While a leader yields its turn: the calls that joined it, by key.
        self._joining: dict[K, list[asyncio.Future[V]]] | None = None
        # Calls made and not yet answered.
        self._in_flight = 0

    async def get(self, key: K) -> V:
        if self._joining is not None:
            future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
            self._joining.setdefault(key, []).append(future)
            return await future
        joined: dict[K, list[asyncio.Future[V]]] = {}
        if self._in_flight and self._many is not None:
            self._joining = joined
            try:
                await asyncio.sleep(0)
            except BaseException as exc:
                _fail(joined, exc)
                raise
            finally:
                self._joining = None
        self._in_flight += 1
        try:
            if not joined:
                return await self._one(key)
            return await self._together(key, joined)
        finally:
            self._in_flight -= 1

    async def _together(self, key: K, joined: dict[K, list[asyncio.Future[V]]]) -> V:
        assert self._many is not None
        keys = [key, *(other for other in joined if other != key)]
        self._observe_size(len(keys))
        try:
            answers = await self._many(keys)
        except BaseException as exc:
            _fail(joined, exc)
            raise
        for other, futures in joined.items():
            for future in futures:
                if not future.done():
                    future.set_result(answers[other])
        return answers[key]


def _fail(joined: Mapping[K, list[asyncio.Future[V]]], exc: BaseException) -> None:
    for futures in joined.values():
        for future in futures:
            if future.done():
                continue
            if isinstance(exc, asyncio.CancelledError):
                # The leader's task was cancelled (shutdown), not theirs: they see it as a cancellation too.
                future.cancel()
            else:
                future.set_exception(exc)
