"""tenk's HttpArena entry: `/baseline11`, `/json/{count}`, `/async-db` and `/crud/items`, on tenk's public API.

Every route is declared once on a FastAPI router and served by tenk's hot lane (`@hot`), behind tenk's
edge (`TenkAPI`); each returns a `Reply`. Postgres renders the rows' JSON (`json_build_object`), so a
database answer is one text value that goes out as it is. The single-item reads of `/crud/items` go
through tenk's read-through cache (`tenk.platform.readthrough`): ready replies in the process, kept the
profile's 200 ms from the fill; with REDIS_URL set (several workers), Redis behind them, and every worker
told of each write before it is answered. The environment is HttpArena's: DATABASE_URL,
DATABASE_MAX_CONN, REDIS_URL, and the dataset at /data/dataset.json (DATASET_PATH).
"""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path as FilePath
from typing import Annotated, Any

import asyncpg
import orjson
from fastapi import APIRouter, FastAPI, Path, Query
from pydantic import BaseModel, Field

from tenk.platform import (
    POSTGRES_ERRORS,
    InvalidInputError,
    NotFoundError,
    RawBody,
    Reply,
    ReplyRoute,
    TenkAPI,
    app_state,
    create_pg_pool,
    create_redis,
    hot,
    install_error_handlers,
    postgres_is_down,
)
from tenk.platform.readthrough import CacheSettings, ReadCache, ReadThrough, load_by_id, load_by_ids

DATASET_PATH = FilePath(os.environ.get("DATASET_PATH", "/data/dataset.json"))
DATASET: list[dict[str, Any]] = orjson.loads(DATASET_PATH.read_bytes())
INT4 = 2**31 - 1  # the items table's INTEGER columns
NO_ROWS = b'{"items":[],"count":0}'

# One item as the profiles show it: the rating's two columns as one object.
ITEM_JSON = """json_build_object('id', id, 'name', name, 'category', category, 'price', price,
    'quantity', quantity, 'active', active, 'tags', tags,
    'rating', json_build_object('score', rating_score, 'count', rating_count))"""
COLUMNS = "id, name, category, price, quantity, active, tags, rating_score, rating_count"
ASYNC_DB = f"""SELECT json_build_object('items', coalesce(json_agg({ITEM_JSON}), '[]'), 'count', count(*))::text
FROM (SELECT {COLUMNS} FROM items WHERE price BETWEEN $1 AND $2 LIMIT $3) AS found"""
ITEM_BY_ID = f"SELECT {ITEM_JSON}::text FROM items WHERE id = $1"
ITEMS_BY_ID = f"SELECT id, {ITEM_JSON}::text FROM items WHERE id = ANY($1::int[])"
PAGE = f"""SELECT json_build_object('items', coalesce(json_agg({ITEM_JSON} ORDER BY id), '[]'),
    'total', count(*), 'page', $4::bigint, 'limit', $2::int)::text
FROM (SELECT {COLUMNS} FROM items WHERE category = $1 ORDER BY id LIMIT $2 OFFSET $3) AS page"""
# A new item has no tags and no rating yet; an id already there is overwritten (the profile's upsert).
UPSERT = f"""INSERT INTO items AS i ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, true, '[]', 0, 0)
ON CONFLICT (id) DO UPDATE SET name = $2, category = $3, price = $4, quantity = $5
RETURNING {ITEM_JSON}::text"""
UPDATE = f"""UPDATE items SET name = $2, category = coalesce($3, category), price = $4, quantity = $5
WHERE id = $1 RETURNING {ITEM_JSON}::text"""


def text(total: int) -> Reply:
    return Reply(200, b"%d" % total, media_type="text/plain")


def body_int(body: bytes) -> int:
    try:
        return int(body.strip() or b"0")
    except ValueError:
        raise InvalidInputError("the body must be an integer", field="body") from None


# Writes go through this app, which invalidates after each: no outbox trigger on HttpArena's table.
ITEMS = ReadThrough(
    name="items",
    item="item",
    table="items",
    load_one=load_by_id(ITEM_BY_ID),  # a miss alone: one id, no array to encode
    load_many=load_by_ids(ITEMS_BY_ID),  # the misses of one event-loop turn, in one query
    x_cache=True,
    outbox=False,
)


def cache_settings(shared: bool) -> CacheSettings:
    """The profile's cache-aside: 200 ms from the fill (a 404 too), never extended; Redis when workers share it."""
    return CacheSettings(local_ttl_s=0.2, redis_ttl_s=0.2, negative_ttl_s=0.2, ttl_jitter=0, local_only=not shared)


def pool_size(workers: int) -> int:
    """HttpArena sizes pools from DATABASE_MAX_CONN, shared by the workers, with a little left over."""
    return max(2, int(int(os.environ.get("DATABASE_MAX_CONN", "256")) * 0.9) // workers)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    dsn = os.environ.get("DATABASE_URL", "postgresql://bench:bench@localhost:5432/benchmark")
    size = pool_size(int(os.environ.get("TENK_WORKERS") or len(os.sched_getaffinity(0))))
    # Up even with Postgres down: it connects on first use, and /async-db answers no rows meanwhile.
    pg = app.state.pg = await create_pg_pool(dsn, max_size=size)
    # A bounded pool that waits briefly for a free connection, not one that fails at its size.
    redis = create_redis(os.environ["REDIS_URL"]) if os.environ.get("REDIS_URL") else None
    try:
        async with ITEMS.serving(app, pg, redis, cache_settings(redis is not None)):
            # What start-up made lives as long as the process: out of the collector's sight.
            gc.collect()
            gc.freeze()
            yield
    finally:
        await pg.close()
        if redis is not None:
            await redis.aclose()


router = APIRouter(route_class=ReplyRoute)
Pg = Annotated[asyncpg.Pool, app_state("pg")]
Items = Annotated[ReadCache, app_state("items")]
Whole = Annotated[int, Query(ge=0, le=10**15)]
Int4 = Annotated[int, Query(ge=0, le=INT4)]
ItemId = Annotated[int, Path(ge=1, le=INT4)]


@router.get("/baseline11")
@hot
def baseline_get(a: Whole = 0, b: Whole = 0) -> Reply:
    return text(a + b)


@router.post("/baseline11")
@hot
def baseline_post(body: RawBody, a: Whole = 0, b: Whole = 0) -> Reply:
    return text(a + b + body_int(body))


@router.get("/json/{count}")
@hot
def json_items(count: Annotated[int, Path(ge=0, le=INT4)], m: Int4 = 1) -> Reply:
    # Serialized afresh on every request, from the dataset read at start-up.
    items = [{**item, "total": item["price"] * item["quantity"] * m} for item in DATASET[:count]]
    return Reply(200, orjson.dumps({"items": items, "count": len(items)}))


@router.get("/async-db")
@hot
async def async_db(
    pg: Pg,
    low: Annotated[int, Query(alias="min", ge=0, le=INT4)] = 10,
    high: Annotated[int, Query(alias="max", ge=0, le=INT4)] = 50,
    limit: Int4 = 50,
) -> Reply:
    try:
        found: str = await pg.fetchval(ASYNC_DB, low, high, sorted((1, limit, 50))[1])
    except POSTGRES_ERRORS as exc:
        if not postgres_is_down(exc):
            raise
        return Reply(200, NO_ROWS)  # the profile's answer while Postgres is away
    return Reply(200, found.encode())


class ItemUpdate(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    category: str | None = Field(None, min_length=1, max_length=100)
    price: int = Field(ge=0, le=INT4)
    quantity: int = Field(ge=0, le=INT4)


class ItemIn(ItemUpdate):
    id: int = Field(ge=1, le=INT4)
    category: str = Field(min_length=1, max_length=100)


@router.get("/crud/items")
@hot
async def list_items(
    pg: Pg,
    category: Annotated[str, Query(min_length=1, max_length=100)] = "electronics",
    page: Annotated[int, Query(ge=1, le=INT4)] = 1,
    limit: Int4 = 10,
) -> Reply:
    limit = sorted((1, limit, 50))[1]
    found: str = await pg.fetchval(PAGE, category, limit, (page - 1) * limit, page)
    return Reply(200, found.encode())


@router.get("/crud/items/{item_id}")
@hot
def get_item(item_id: ItemId, items: Items) -> Reply | Awaitable[Reply]:
    # A plain `def`: a hit answers at once, a miss hands back its load to be awaited.
    cached = items.cached(item_id)
    return items.load(item_id) if cached is None else cached


@router.post("/crud/items", status_code=201)
@hot
async def create_item(item: ItemIn, items: Items) -> Reply:
    row: str = await items.pg.fetchval(UPSERT, item.id, item.name, item.category, item.price, item.quantity)
    await items.invalidate(item.id)
    return Reply(201, row.encode(), location=f"/crud/items/{item.id}")


@router.put("/crud/items/{item_id}")
@hot
async def update_item(item_id: ItemId, update: ItemUpdate, items: Items) -> Reply:
    row: str | None = await items.pg.fetchval(
        UPDATE, item_id, update.name, update.category, update.price, update.quantity
    )
    if row is None:
        raise NotFoundError("no such item", field="path.item_id")
    await items.invalidate(item_id)
    return Reply(200, row.encode())


def create_app() -> TenkAPI:
    app = TenkAPI(title="tenk (HttpArena)", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    install_error_handlers(app)
    app.include_router(router)
    app.open_edge(
        hot_lane=True, needs_key=lambda _: False, max_body_bytes=1 << 20, body_timeout_s=10.0, access_log=False
    )
    return app


app = create_app()
