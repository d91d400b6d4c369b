"""A naive asynchronous baseline. It exists only to be measured against: never deploy it.

`naive_sync` with `async def` and async drivers (psycopg's AsyncConnection, redis.asyncio,
httpx.AsyncClient), and still the first tasks app's habits: a config object and a new Postgres
connection per request, pydantic models validating and serialising every response, an access log line
per request, no cache, one INSERT plus commit per event. Knobs (env): NAIVE_POOL=1 (an
AsyncConnectionPool instead, the pooling study's fix), NAIVE_REDIS_CACHE=1 (cache-aside for
GET /products/{id} with a Redis pool built on every request, as the product-API study published it),
NAIVE_REDIS_CACHE=shared (one pool per process), NAIVE_REDIS_PROTOCOL=3 (RESP3), NAIVE_ACCESS_LOG=0.
Serve it as a plain app: `uvicorn tenk.lab.targets.baselines.naive_async:app`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import httpx
import psycopg
import redis.asyncio as aioredis
from fastapi import Depends, FastAPI, HTTPException, Request
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from tenk.ingest.schemas import Accepted, EventIn
from tenk.lab.targets.baselines import queries
from tenk.lab.targets.baselines.base import TLS, baseline_app
from tenk.lab.targets.baselines.config import NaiveConfig
from tenk.lab.targets.baselines.keys import PRODUCT_TTL_S, product_key
from tenk.lab.targets.baselines.paging import decode_after, encode_after
from tenk.lab.targets.baselines.schemas import (
    After,
    Limit,
    Product,
    ProductId,
    ProductIn,
    ProductPage,
    Quote,
    SearchHit,
    SearchLimit,
    SearchQuery,
    SearchResults,
    Symbol,
    Task,
    TaskId,
    TaskIn,
    TaskPage,
)
from tenk.platform import ConflictError, InvalidInputError

Connection = psycopg.AsyncConnection[DictRow]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    config = NaiveConfig()
    app.state.pool = None
    app.state.redis = None
    if config.pool:
        pool = AsyncConnectionPool(
            config.dsn, connection_class=Connection, kwargs={"row_factory": dict_row}, open=False
        )
        await pool.open(wait=True)
        app.state.pool = pool
    if config.redis_cache == "shared":
        app.state.redis = aioredis.Redis.from_url(config.redis_dsn, **config.redis_kwargs())
    try:
        yield
    finally:
        if app.state.redis is not None:
            await app.state.redis.aclose()
        if app.state.pool is not None:
            await app.state.pool.close()


app = baseline_app("naive_async", lifespan)


async def get_config() -> NaiveConfig:
    return NaiveConfig()


Config = Annotated[NaiveConfig, Depends(get_config)]


@asynccontextmanager
async def connect(request: Request, config: NaiveConfig) -> AsyncIterator[Connection]:
    pool: AsyncConnectionPool[Connection] | None = request.app.state.pool
    if pool is not None:
        async with pool.connection() as conn:
            yield conn
        return
    async with await psycopg.AsyncConnection.connect(config.dsn, row_factory=dict_row) as conn:
        yield conn


async def get_db(request: Request, config: Config) -> AsyncIterator[Connection]:
    async with connect(request, config) as conn:
        yield conn


Db = Annotated[Connection, Depends(get_db)]


@asynccontextmanager
async def cache_client(request: Request, config: NaiveConfig) -> AsyncIterator[aioredis.Redis]:
    shared: aioredis.Redis | None = request.app.state.redis
    if shared is not None:
        yield shared
        return
    # As published: a fresh pool (and so a fresh TCP connection) for every request. The published code
    # only closed the client, which leaves the pool's socket for the garbage collector; closing the
    # pool too keeps the cost measured the same and the socket count bounded.
    pool = aioredis.ConnectionPool.from_url(config.redis_dsn, max_connections=100, **config.redis_kwargs())
    client = aioredis.Redis(connection_pool=pool)
    try:
        yield client
    finally:
        await client.aclose()
        await pool.aclose()


@app.get("/ping")
async def ping() -> dict[str, str]:
    return {"ping": "pong"}


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


async def load_product(request: Request, config: NaiveConfig, product_id: int) -> Product:
    async with connect(request, config) as conn:
        row = await (await conn.execute(queries.PRODUCT_BY_ID, (product_id,))).fetchone()
    if row is None:
        raise HTTPException(404, "no such product")
    return Product(**row)


@app.get("/products/{product_id}", response_model=Product)
async def get_product(product_id: ProductId, request: Request, config: Config) -> Product:
    if config.redis_cache == "0":
        return await load_product(request, config, product_id)
    async with cache_client(request, config) as client:
        cached = await client.get(product_key(product_id))
        if cached:
            return Product(**json.loads(cached))
        product = await load_product(request, config, product_id)
        await client.setex(product_key(product_id), PRODUCT_TTL_S, product.model_dump_json())
        return product


@app.get("/products", response_model=ProductPage)
async def list_products(db: Db, after: After = None, limit: Limit = 25) -> ProductPage:
    rows = await (await db.execute(queries.PRODUCT_PAGE, (decode_after(after), limit + 1))).fetchall()
    items = [Product(**row) for row in rows[:limit]]
    return ProductPage(items=items, next=encode_after(items[-1].id) if len(rows) > limit else None)


@app.post("/products", status_code=201, response_model=Product)
async def create_product(product: ProductIn, db: Db) -> Product:
    try:
        cursor = await db.execute(
            queries.INSERT_PRODUCT,
            (product.sku, product.name, product.description, product.price_cents, product.stock),
        )
        row = await cursor.fetchone()
        await db.commit()
    except psycopg.errors.UniqueViolation:
        raise ConflictError("a product with this sku exists", field="body.sku") from None
    assert row is not None
    return Product(**row)


@app.get("/tasks", response_model=TaskPage)
async def list_tasks(db: Db, after: After = None, limit: Limit = 25) -> TaskPage:
    rows = await (await db.execute(queries.TASK_PAGE, (decode_after(after), limit + 1))).fetchall()
    items = [Task(**row) for row in rows[:limit]]
    return TaskPage(items=items, next=encode_after(items[-1].id) if len(rows) > limit else None)


@app.post("/tasks", status_code=201, response_model=Task)
async def create_task(task: TaskIn, db: Db) -> Task:
    row = await (await db.execute(queries.INSERT_TASK, (task.title, task.notes, task.done))).fetchone()
    await db.commit()
    assert row is not None
    return Task(**row)


@app.get("/tasks/{task_id}", response_model=Task)
async def get_task(task_id: TaskId, db: Db) -> Task:
    row = await (await db.execute(queries.TASK_BY_ID, (task_id,))).fetchone()
    if row is None:
        raise HTTPException(404, "no such task")
    return Task(**row)


@app.get("/search", response_model=SearchResults)
async def search(db: Db, q: SearchQuery, limit: SearchLimit = 10) -> SearchResults:
    query = q.strip()
    if not query:
        raise InvalidInputError("q must contain a word", field="query.q")
    rows = await (await db.execute(queries.SEARCH_PRODUCTS, (query, limit))).fetchall()
    return SearchResults(query=query, items=[SearchHit(**row) for row in rows])


@app.post("/events", status_code=202, response_model=Accepted)
async def post_event(event: EventIn, db: Db) -> Accepted:
    event_id = event.event_id or uuid.uuid4()
    await db.execute(queries.INSERT_EVENT, (event_id, event.source, event.ts, Jsonb(event.payload)))
    await db.commit()
    return Accepted(accepted=1, ids=[event_id])


@app.get("/quotes/{symbol}", response_model=Quote)
async def get_quote(symbol: Symbol, config: Config) -> Quote:
    async with httpx.AsyncClient(timeout=config.upstream_timeout_s, verify=TLS) as client:
        response = await client.get(config.quote_url(symbol))
    if response.status_code == 404:
        raise HTTPException(404, "no such symbol")
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return Quote(**body)
