"""Result pages kept per process, refreshed ahead of expiry.

A page asked for in the last part of its TTL is served from memory and reloaded in the background,
once, so a popular page is replaced before it expires and no request waits for its reload. Without
this every hot page expired at once every TTL and the requests behind it queued on Postgres.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, NamedTuple, TypeVar

K = TypeVar("K", bound=Hashable)


class Page(NamedTuple):
    body: bytes
    refresh: bool  # past the refresh-ahead point: serve it, and reload it in the background


class ResultPages(Generic[K]):
    """A bounded LRU; `clock` is injectable so that tests step time instead of sleeping."""

    def __init__(
        self, max_items: int, ttl_s: float, refresh_ahead: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_items = max_items
        self.ttl_s = ttl_s
        self.refresh_after_s = ttl_s * refresh_ahead
        self.clock = clock
        self._entries: OrderedDict[K, tuple[float, bytes]] = OrderedDict()
        self.writes = 0  # pages stored, for tests and operators: admission keeps one-off queries out

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> Page | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        age = self.clock() - entry[0]
        if age >= self.ttl_s:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return Page(entry[1], age >= self.refresh_after_s)

    def put(self, key: K, body: bytes, loaded_at: float) -> None:
        """`loaded_at` is the clock reading taken before the load began: a page is never younger than its data."""
        self.writes += 1
        self._entries[key] = (loaded_at, body)
        self._entries.move_to_end(key)
        if len(self._entries) > self.max_items:
            self._entries.popitem(last=False)
