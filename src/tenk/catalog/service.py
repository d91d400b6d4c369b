"""The product read path and the write-side invalidation: a read-through cache of `products`.

Everything a cached read needs (the process LRU, Redis, negative entries and the id ceiling,
single-flight and turn batching, the generation-guarded fill, the outbox invalidation, the breakers
and the Redis-down bulkhead, replica reads) is `tenk.platform.readthrough`'s; the catalog declares
what it reads (`PRODUCTS`) and opens it with the read replicas. docs/catalog.md tells the whole path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from fastapi import FastAPI
from redis.asyncio import Redis

from tenk.catalog import queries
from tenk.catalog.settings import CatalogSettings
from tenk.platform import pg_pool_options
from tenk.platform.readthrough import ReadCache, ReadThrough, Replicas, load_by_id, load_by_ids

# Its keys are tenk:catalog:product:{<id>} (`tenk.platform.readthrough`), its metrics tenk_catalog_*, its outbox
# catalog_invalidations (migration 0003, `PRODUCTS.outbox_sql()`).
PRODUCTS = ReadThrough(
    name="catalog",
    item="product",
    table="products",
    load_one=load_by_id(queries.PRODUCT_BY_ID),
    load_many=load_by_ids(queries.PRODUCTS_BY_IDS),
)


class CatalogService(ReadCache):
    """The products' cache, under the names the catalog's routes read it by."""

    redis: Redis

    def __init__(
        self, pg: asyncpg.Pool, redis: Redis, settings: CatalogSettings, replicas: Replicas | None = None
    ) -> None:
        super().__init__(PRODUCTS, pg, redis, settings, replicas=replicas)

    product_reply = ReadCache.reply
    cached_reply = ReadCache.cached
    load_reply = ReadCache.load


@asynccontextmanager
async def catalog_lifespan(app: FastAPI) -> AsyncIterator[None]:
    tree = app.state.settings
    replicas = await Replicas.open(tree.database.replica_urls, **pg_pool_options(tree))
    service = CatalogService(app.state.pg, app.state.redis, app.state.settings.catalog, replicas)
    app.state.catalog = service
    try:
        async with service.running():
            yield
    finally:
        await replicas.close()
