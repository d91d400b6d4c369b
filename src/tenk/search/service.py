"""Ranked full-text search, with a short per-process cache of result pages.

Ranking has to score every matching row, so a common word costs milliseconds of Postgres time. Result
pages tolerate seconds of staleness, so repeated queries are answered from memory, and concurrent
identical queries share one Postgres call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import orjson
from fastapi import FastAPI

from tenk.local_cache import LocalCache
from tenk.resilience import SingleFlight
from tenk.search.queries import SEARCH_PRODUCTS
from tenk.search.settings import SearchSettings


class SearchService:
    def __init__(self, pg: asyncpg.Pool, settings: SearchSettings) -> None:
        self.pg = pg
        self.settings = settings
        self.pages: LocalCache[tuple[str, int]] = LocalCache(settings.cache_max_items, settings.cache_ttl_s)
        self.loads: SingleFlight[tuple[str, int], bytes] = SingleFlight()

    async def search(self, query: str, limit: int) -> bytes:
        """The response body for one query: `{"query": ..., "items": [...]}`."""
        key = (query, limit)
        if self.settings.cache:
            cached = self.pages.get(key)
            if cached is not None:
                return cached
        return await self.loads.do(key, lambda: self._load(query, limit))

    async def _load(self, query: str, limit: int) -> bytes:
        epoch = self.pages.epoch
        hits: str = await self.pg.fetchval(SEARCH_PRODUCTS, query, limit)
        body = b'{"query":' + orjson.dumps(query) + b',"items":' + hits.encode() + b"}"
        if self.settings.cache:
            self.pages.put(key=(query, limit), value=body, epoch=epoch)
        return body


@asynccontextmanager
async def search_lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.search = SearchService(app.state.pg, SearchSettings())
    yield
