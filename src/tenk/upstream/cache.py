"""A small TTL cache of quote bodies. Short-lived by design: quotes go stale in seconds."""

from __future__ import annotations

import time
from collections.abc import Callable


class TtlCache:
    """Insertion-ordered dict; when full, the oldest entry goes. Cheap because entries live ~1 s."""

    def __init__(self, max_items: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_items = max_items
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: dict[str, tuple[float, bytes]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        return entry[1]

    def put(self, key: str, value: bytes) -> None:
        if self.ttl_s <= 0:
            return
        entries = self._entries
        entries.pop(key, None)
        if len(entries) >= self.max_items:
            del entries[next(iter(entries))]
        entries[key] = (self._clock() + self.ttl_s, value)
