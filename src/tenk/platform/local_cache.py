"""A bounded per-process LRU with a TTL, holding ready answers: replies (products), response bytes (quotes)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """Not thread-safe, and needn't be: one event loop owns it. `clock` is injectable for tests.

    `epoch` counts invalidations. A loader notes it before going to Redis or Postgres and stores
    its result only if no invalidation arrived meanwhile, so a slow read that raced a write can
    never reinstate the old value after this process has seen the invalidation.
    """

    def __init__(self, max_items: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_items = max_items
        self.ttl_s = ttl_s
        self.epoch = 0
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: K, value: V, *, epoch: int | None = None, ttl_s: float | None = None) -> None:
        """Keep `value` for `ttl_s` (default: the cache's); not at all if `epoch` is given and is stale."""
        if epoch is not None and epoch != self.epoch:
            return
        ttl = self.ttl_s if ttl_s is None else ttl_s
        if ttl <= 0:
            return
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        if len(self._entries) > self.max_items:
            self._entries.popitem(last=False)

    def invalidate(self, key: K) -> None:
        self.epoch += 1
        self._entries.pop(key, None)

    def clear(self) -> None:
        self.epoch += 1
        self._entries.clear()
