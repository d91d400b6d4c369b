"""A stock FastAPI entry for HttpArena's crud profile, written to its production rules: the baseline that
`make bench-httparena` measures tenk's crud entry against (HttpArena has no Python crud entry).

As a FastAPI service is usually written: asyncpg's pool sized from DATABASE_MAX_CONN, pydantic models in
and out (`response_model`), FastAPI's own JSON responses, and the single-item read cache-aside in a dict
of this process with HttpArena's 200 ms absolute TTL, dropped on PUT. Served by uvicorn as HttpArena's
fastapi entry serves it. validate.sh checks a crud entry's /async-db too, so it has one, in the same style.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import asyncpg
from fastapi import FastAPI, HTTPException, Query, Response
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

COLUMNS = "id, name, category, price, quantity, active, tags, rating_score, rating_count"
TTL_S = 0.2


class Rating(BaseModel):
    score: int
    count: int


class Item(BaseModel):
    id: int
    name: str
    category: str
    price: int
    quantity: int
    active: bool
    tags: list[str]
    rating: Rating


class ItemPage(BaseModel):
    items: list[Item]
    total: int
    page: int
    limit: int


class FoundItems(BaseModel):
    items: list[Item]
    count: int


class ItemIn(BaseModel):
    id: int
    name: str
    category: str
    price: int
    quantity: int


class ItemUpdate(BaseModel):
    name: str
    category: str | None = None
    price: int
    quantity: int


def item_of(row: asyncpg.Record) -> Item:
    return Item(
        id=row["id"],
        name=row["name"],
        category=row["category"],
        price=row["price"],
        quantity=row["quantity"],
        active=row["active"],
        tags=row["tags"],
        rating=Rating(score=row["rating_score"], count=row["rating_count"]),
    )


async def decode_json(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # HttpArena's fastapi entry's sizing: DATABASE_MAX_CONN shared by the workers its launcher starts.
    workers = max(min(len(os.sched_getaffinity(0)), 128), 4)
    size = max(2, int(int(os.environ.get("DATABASE_MAX_CONN", "256")) * 0.92 / workers))
    app.state.pool = await asyncpg.create_pool(os.environ["DATABASE_URL"], min_size=1, max_size=size, init=decode_json)
    yield
    await app.state.pool.close()


app = FastAPI(lifespan=lifespan)
# id -> (when it expires, the item): the process's cache-aside, kept from the fill, never extended by reads.
CACHE: dict[int, tuple[float, Item]] = {}


@app.get("/baseline11")
async def baseline11(a: int = 0, b: int = 0) -> PlainTextResponse:
    return PlainTextResponse(str(a + b))


@app.get("/async-db", response_model=FoundItems)
async def async_db(
    low: Annotated[int, Query(alias="min")] = 10, high: Annotated[int, Query(alias="max")] = 50, limit: int = 50
) -> FoundItems:
    rows = await app.state.pool.fetch(
        f"SELECT {COLUMNS} FROM items WHERE price BETWEEN $1 AND $2 LIMIT $3", low, high, min(max(limit, 1), 50)
    )
    items = [item_of(row) for row in rows]
    return FoundItems(items=items, count=len(items))


@app.get("/crud/items", response_model=ItemPage)
async def list_items(category: str = "electronics", page: int = 1, limit: int = 10) -> ItemPage:
    limit = min(max(limit, 1), 50)
    rows = await app.state.pool.fetch(
        f"SELECT {COLUMNS} FROM items WHERE category = $1 ORDER BY id LIMIT $2 OFFSET $3",
        category,
        limit,
        (max(page, 1) - 1) * limit,
    )
    items = [item_of(row) for row in rows]
    return ItemPage(items=items, total=len(items), page=page, limit=limit)


@app.get("/crud/items/{item_id}", response_model=Item)
async def get_item(item_id: int, response: Response) -> Item:
    now = time.monotonic()
    cached = CACHE.get(item_id)
    if cached is not None and cached[0] > now:
        response.headers["X-Cache"] = "HIT"
        return cached[1]
    row = await app.state.pool.fetchrow(f"SELECT {COLUMNS} FROM items WHERE id = $1", item_id)
    if row is None:
        raise HTTPException(status_code=404, detail="Item not found")
    item = item_of(row)
    CACHE[item_id] = (now + TTL_S, item)
    response.headers["X-Cache"] = "MISS"
    return item


@app.post("/crud/items", response_model=Item, status_code=201)
async def create_item(new: ItemIn) -> Item:
    row = await app.state.pool.fetchrow(
        f"""INSERT INTO items ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, true, '[]', 0, 0)
        ON CONFLICT (id) DO UPDATE SET name = $2, category = $3, price = $4, quantity = $5 RETURNING {COLUMNS}""",
        new.id,
        new.name,
        new.category,
        new.price,
        new.quantity,
    )
    CACHE.pop(new.id, None)
    return item_of(row)


@app.put("/crud/items/{item_id}", response_model=Item)
async def update_item(item_id: int, update: ItemUpdate) -> Item:
    row = await app.state.pool.fetchrow(
        f"""UPDATE items SET name = $2, category = coalesce($3, category), price = $4, quantity = $5
        WHERE id = $1 RETURNING {COLUMNS}""",
        item_id,
        update.name,
        update.category,
        update.price,
        update.quantity,
    )
    if row is None:
        raise HTTPException(status_code=404, detail="Item not found")
    CACHE.pop(item_id, None)
    return item_of(row)
