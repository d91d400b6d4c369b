"""tenk with search ranking every match, as it did before the postings (migration 0005).

Only `make bench-reads`' "full ranking (before)" cases serve it: the comparison used to be a production
setting (TENK_SEARCH_FULL_RANKING), which nothing in production needed. Serve it as a factory:
`benchmarks.full_ranking:create_app`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from fastapi import FastAPI

from tenk.app import create_app as create_tenk_app
from tenk.platform.edge import TenkAPI
from tenk.search.queries import RANK_ALL_MATCHES
from tenk.search.service import SearchService
from tenk.settings import Settings


class FullRankingSearch(SearchService):
    async def _ranked(self, conn: asyncpg.Connection, query: str, limit: int) -> str:
        everything: str = await conn.fetchval(RANK_ALL_MATCHES, query, limit)
        return everything


def create_app(settings: Settings | None = None) -> TenkAPI:
    app = create_tenk_app(settings)
    tenk_lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with tenk_lifespan(app):
            # Routes read the service off the app per request: the swap reaches both lanes.
            shipped: SearchService = app.state.search
            app.state.search = FullRankingSearch(
                shipped.pg, shipped.settings, timeout_per_transaction=shipped.timeout_per_transaction
            )
            try:
                yield
            finally:
                await app.state.search.close()

    app.router.lifespan_context = lifespan
    return app
