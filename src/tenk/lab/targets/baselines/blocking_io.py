"""The blocking data layer of `naive_sync`, `naive_blocking` and `wsgi_sync`: psycopg, redis-py, httpx.Client.

Every call here holds its thread until the answer is in. Which thread that is (one of FastAPI's pool
threads, the event loop itself, a gunicorn sync worker) is the one thing those three baselines differ in,
so they share this code rather than copies of it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import redis
from fastapi import HTTPException
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from tenk.ingest.schemas import Accepted, EventIn
from tenk.lab.targets.baselines import queries
from tenk.lab.targets.baselines.base import TLS
from tenk.lab.targets.baselines.config import NaiveConfig
from tenk.lab.targets.baselines.keys import PRODUCT_TTL_S, product_key
from tenk.lab.targets.baselines.paging import decode_after, encode_after
from tenk.lab.targets.baselines.schemas import (
    Product,
    ProductIn,
    ProductPage,
    Quote,
    SearchHit,
    SearchResults,
    Task,
    TaskIn,
    TaskPage,
)
from tenk.platform import ConflictError, InvalidInputError

Connection = psycopg.Connection[DictRow]


@dataclass
class Resources:
    """What one process keeps between requests: nothing, unless a knob turns on the study's fix."""

    pool: ConnectionPool[Connection] | None = None
    redis: redis.Redis | None = None

    @classmethod
    def open(cls, config: NaiveConfig) -> Resources:
        resources = cls()
        if config.pool:
            pool = ConnectionPool(config.dsn, connection_class=Connection, kwargs={"row_factory": dict_row}, open=False)
            pool.open(wait=True)
            resources.pool = pool
        if config.redis_cache == "shared":
            resources.redis = redis.Redis.from_url(config.redis_dsn, **config.redis_kwargs())
        return resources

    def close(self) -> None:
        if self.redis is not None:
            self.redis.close()
        if self.pool is not None:
            self.pool.close()


@contextmanager
def connect(resources: Resources, config: NaiveConfig) -> Iterator[Connection]:
    if resources.pool is not None:
        with resources.pool.connection() as conn:
            yield conn
        return
    with psycopg.connect(config.dsn, row_factory=dict_row) as conn:
        yield conn


def load_product(resources: Resources, config: NaiveConfig, product_id: int) -> Product:
    with connect(resources, config) as conn:
        row = conn.execute(queries.PRODUCT_BY_ID, (product_id,)).fetchone()
    if row is None:
        raise HTTPException(404, "no such product")
    return Product(**row)


def product(resources: Resources, config: NaiveConfig, product_id: int) -> Product:
    if config.redis_cache == "0":
        return load_product(resources, config, product_id)
    # As the product-API study's legacy app: without the shared pool, a new client per request.
    client = resources.redis or redis.Redis.from_url(config.redis_dsn, **config.redis_kwargs())
    try:
        cached = client.get(product_key(product_id))
        if cached:
            return Product(**json.loads(cached))
        found = load_product(resources, config, product_id)
        client.setex(product_key(product_id), PRODUCT_TTL_S, found.model_dump_json())
        return found
    finally:
        if client is not resources.redis:
            client.close()


def product_page(db: Connection, after: str | None, limit: int) -> ProductPage:
    rows = db.execute(queries.PRODUCT_PAGE, (decode_after(after), limit + 1)).fetchall()
    items = [Product(**row) for row in rows[:limit]]
    return ProductPage(items=items, next=encode_after(items[-1].id) if len(rows) > limit else None)


def create_product(db: Connection, new: ProductIn) -> Product:
    try:
        row = db.execute(
            queries.INSERT_PRODUCT, (new.sku, new.name, new.description, new.price_cents, new.stock)
        ).fetchone()
        db.commit()
    except psycopg.errors.UniqueViolation:
        raise ConflictError("a product with this sku exists", field="body.sku") from None
    assert row is not None
    return Product(**row)


def task_page(db: Connection, after: str | None, limit: int) -> TaskPage:
    rows = db.execute(queries.TASK_PAGE, (decode_after(after), limit + 1)).fetchall()
    items = [Task(**row) for row in rows[:limit]]
    return TaskPage(items=items, next=encode_after(items[-1].id) if len(rows) > limit else None)


def create_task(db: Connection, new: TaskIn) -> Task:
    row = db.execute(queries.INSERT_TASK, (new.title, new.notes, new.done)).fetchone()
    db.commit()
    assert row is not None
    return Task(**row)


def task(db: Connection, task_id: int) -> Task:
    row = db.execute(queries.TASK_BY_ID, (task_id,)).fetchone()
    if row is None:
        raise HTTPException(404, "no such task")
    return Task(**row)


def search(db: Connection, q: str, limit: int) -> SearchResults:
    query = q.strip()
    if not query:
        raise InvalidInputError("q must contain a word", field="query.q")
    rows = db.execute(queries.SEARCH_PRODUCTS, (query, limit)).fetchall()
    return SearchResults(query=query, items=[SearchHit(**row) for row in rows])


def post_event(db: Connection, event: EventIn) -> Accepted:
    event_id = event.event_id or uuid.uuid4()
    db.execute(queries.INSERT_EVENT, (event_id, event.source, event.ts, Jsonb(event.payload)))
    db.commit()
    return Accepted(accepted=1, ids=[event_id])


def quote(config: NaiveConfig, symbol: str) -> Quote:
    with httpx.Client(timeout=config.upstream_timeout_s, verify=TLS) as client:
        response = client.get(config.quote_url(symbol))
    if response.status_code == 404:
        raise HTTPException(404, "no such symbol")
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return Quote(**body)
