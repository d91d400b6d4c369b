"""A bounded per-process LRU with a TTL, holding ready-to-send response bytes."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class LocalCache(Generic[K]):
    """Not thread-safe, and needn't be: one event loop owns it.

    `epoch` counts invalidations. A loader notes it before going to Redis or Postgres and stores
    its result only if no invalidation arrived meanwhile, so a slow read that raced a write can
    never reinstate the old value after this process has seen the invalidation.
    """

    def __init__(self, max_items: int, ttl_s: float) -> None:
        self.max_items = max_items
        self.ttl_s = ttl_s
        self.epoch = 0
        self._entries: OrderedDict[K, tuple[float, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] < time.monotonic():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: K, value: bytes, epoch: int, ttl_s: float | None = None) -> None:
        if epoch != self.epoch:
            return
        self._entries[key] = (time.monotonic() + (ttl_s if ttl_s is not None else self.ttl_s), value)
        self._entries.move_to_end(key)
        if len(self._entries) > self.max_items:
            self._entries.popitem(last=False)

    def invalidate(self, key: K) -> None:
        self.epoch += 1
        self._entries.pop(key, None)

    def clear(self) -> None:
        self.epoch += 1
        self._entries.clear()
