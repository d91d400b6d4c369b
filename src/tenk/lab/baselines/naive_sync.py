"""A naive synchronous baseline. It exists only to be measured against: never deploy it.

Written the way the studies started: `def` handlers (FastAPI runs each in its thread pool), blocking
drivers (psycopg, redis-py, httpx.Client), a config object and a new Postgres connection per request,
pydantic models validating and serialising every response, an access log line per request, no cache,
and one INSERT plus commit per event. Knobs (env): NAIVE_POOL=1 (a connection pool instead),
NAIVE_REDIS_CACHE=1|shared (cache-aside for GET /products/{id}, a new client per request or one
shared pool), NAIVE_ACCESS_LOG=0. Serve it as a plain app: `uvicorn tenk.lab.baselines.naive_sync:app`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any

import httpx
import psycopg
import redis
from fastapi import Depends, FastAPI, HTTPException, Request
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from tenk.errors import ConflictError, InvalidInputError
from tenk.ingest.schemas import Accepted, EventIn
from tenk.lab.baselines import queries
from tenk.lab.baselines.access_log import AccessLog, configure_access_logger
from tenk.lab.baselines.config import NaiveConfig
from tenk.lab.baselines.errors import install_baseline_error_handlers
from tenk.lab.baselines.keys import PRODUCT_TTL_S, product_key
from tenk.lab.baselines.paging import decode_after, encode_after
from tenk.lab.baselines.schemas import (
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

Connection = psycopg.Connection[DictRow]

# The vendor gets a new client, and so a new TCP connection, per call, as the naive app did. The CA
# bundle is read once: httpx reads it for every client (tens of ms of CPU each), a cost of the
# library rather than of the pattern, and it would drown what the presets compare.
TLS = httpx.create_ssl_context()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    config = NaiveConfig()
    app.state.pool = None
    app.state.redis = None
    if config.pool:
        pool = ConnectionPool(config.dsn, connection_class=Connection, kwargs={"row_factory": dict_row}, open=False)
        pool.open(wait=True)
        app.state.pool = pool
    if config.redis_cache == "shared":
        app.state.redis = redis.Redis.from_url(config.redis_dsn, decode_responses=True)
    try:
        yield
    finally:
        if app.state.redis is not None:
            app.state.redis.close()
        if app.state.pool is not None:
            app.state.pool.close()


app = FastAPI(title="naive_sync", lifespan=lifespan)
install_baseline_error_handlers(app)
if NaiveConfig().access_log:
    configure_access_logger()
    app.add_middleware(AccessLog)


def get_config() -> NaiveConfig:
    return NaiveConfig()


Config = Annotated[NaiveConfig, Depends(get_config)]


@contextmanager
def connect(request: Request, config: NaiveConfig) -> Iterator[Connection]:
    pool: ConnectionPool[Connection] | None = request.app.state.pool
    if pool is not None:
        with pool.connection() as conn:
            yield conn
        return
    with psycopg.connect(config.dsn, row_factory=dict_row) as conn:
        yield conn


def get_db(request: Request, config: Config) -> Iterator[Connection]:
    with connect(request, config) as conn:
        yield conn


Db = Annotated[Connection, Depends(get_db)]


@app.get("/ping")
def ping() -> dict[str, str]:
    return {"ping": "pong"}


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


def load_product(request: Request, config: NaiveConfig, product_id: int) -> Product:
    with connect(request, config) as conn:
        row = conn.execute(queries.PRODUCT_BY_ID, (product_id,)).fetchone()
    if row is None:
        raise HTTPException(404, "no such product")
    return Product(**row)


@app.get("/products/{product_id}", response_model=Product)
def get_product(product_id: ProductId, request: Request, config: Config) -> Product:
    if config.redis_cache == "0":
        return load_product(request, config, product_id)
    shared: redis.Redis | None = request.app.state.redis
    client = shared or redis.Redis.from_url(config.redis_dsn, decode_responses=True)
    try:
        cached = client.get(product_key(product_id))
        if cached:
            return Product(**json.loads(cached))
        product = load_product(request, config, product_id)
        client.setex(product_key(product_id), PRODUCT_TTL_S, product.model_dump_json())
        return product
    finally:
        if shared is None:
            client.close()


@app.get("/products", response_model=ProductPage)
def list_products(db: Db, after: After = None, limit: Limit = 25) -> ProductPage:
    rows = db.execute(queries.PRODUCT_PAGE, (decode_after(after), limit + 1)).fetchall()
    items = [Product(**row) for row in rows[:limit]]
    return ProductPage(items=items, next=encode_after(items[-1].id) if len(rows) > limit else None)


@app.post("/products", status_code=201, response_model=Product)
def create_product(product: ProductIn, db: Db) -> Product:
    try:
        row = db.execute(
            queries.INSERT_PRODUCT,
            (product.sku, product.name, product.description, product.price_cents, product.stock),
        ).fetchone()
        db.commit()
    except psycopg.errors.UniqueViolation:
        raise ConflictError("a product with this sku exists", field="body.sku") from None
    assert row is not None
    return Product(**row)


@app.get("/tasks", response_model=TaskPage)
def list_tasks(db: Db, after: After = None, limit: Limit = 25) -> TaskPage:
    rows = db.execute(queries.TASK_PAGE, (decode_after(after), limit + 1)).fetchall()
    items = [Task(**row) for row in rows[:limit]]
    return TaskPage(items=items, next=encode_after(items[-1].id) if len(rows) > limit else None)


@app.post("/tasks", status_code=201, response_model=Task)
def create_task(task: TaskIn, db: Db) -> Task:
    row = db.execute(queries.INSERT_TASK, (task.title, task.notes, task.done)).fetchone()
    db.commit()
    assert row is not None
    return Task(**row)


@app.get("/tasks/{task_id}", response_model=Task)
def get_task(task_id: TaskId, db: Db) -> Task:
    row = db.execute(queries.TASK_BY_ID, (task_id,)).fetchone()
    if row is None:
        raise HTTPException(404, "no such task")
    return Task(**row)


@app.get("/search", response_model=SearchResults)
def search(db: Db, q: SearchQuery, limit: SearchLimit = 10) -> SearchResults:
    query = q.strip()
    if not query:
        raise InvalidInputError("q must contain a word", field="query.q")
    rows = db.execute(queries.SEARCH_PRODUCTS, (query, limit)).fetchall()
    return SearchResults(query=query, items=[SearchHit(**row) for row in rows])


@app.post("/events", status_code=202, response_model=Accepted)
def post_event(event: EventIn, db: Db) -> Accepted:
    event_id = event.event_id or uuid.uuid4()
    db.execute(queries.INSERT_EVENT, (event_id, event.source, event.ts, Jsonb(event.payload)))
    db.commit()
    return Accepted(accepted=1, ids=[event_id])


@app.get("/quotes/{symbol}", response_model=Quote)
def get_quote(symbol: Symbol, config: Config) -> Quote:
    with httpx.Client(timeout=config.upstream_timeout_s, verify=TLS) as client:
        response = client.get(config.quote_url(symbol))
    if response.status_code == 404:
        raise HTTPException(404, "no such symbol")
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return Quote(**body)
