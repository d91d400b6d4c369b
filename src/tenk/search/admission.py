"""Which result pages are worth caching: only those of queries seen before (a TinyLFU-style doorkeeper).

Most search queries are never repeated. Caching each one on its first sighting costs a write, an
eviction of a page that may be hot, and a single-flight task per request, and buys nothing when the
query never comes back: with a long-tail query set the cache made search slower than no cache. So a
query's first sighting only records a hash of it; its second, within the window, admits it.

Two generations of hashes bound memory: when the current one holds `window` keys it becomes the
previous one and the one before is dropped, so a query is remembered for between one and two
windows of distinct queries.
"""

from __future__ import annotations

from collections.abc import Hashable


class Doorkeeper:
    def __init__(self, window: int) -> None:
        self.window = window
        self._current: set[int] = set()
        self._previous: set[int] = set()

    def seen_before(self, key: Hashable) -> bool:
        """True from a key's second sighting on; records the sighting either way."""
        digest = hash(key)
        if digest in self._current:
            return True
        self._current.add(digest)
        if digest in self._previous:
            return True
        if len(self._current) >= self.window:
            self._previous, self._current = self._current, set()
        return False
