"""The routes of the two FastAPI baselines built on blocking drivers, registered one of two ways.

- `def` endpoints (`naive_sync`): FastAPI runs each in its thread pool (40 threads), so the blocking
  calls overlap up to 40 at a time. This is what a FastAPI user who writes `def` gets.
- `async def` endpoints that make the same blocking calls (`naive_blocking`): they run on the event
  loop and hold it for every database round trip, Redis call and vendor wait, so the process serves one
  request at a time. This is the product-API study's legacy code and the ladder study's v1, whose
  figure the ladder-study preset's claims quote.

Dependencies follow the endpoints: FastAPI would run a sync generator dependency in its thread pool, so
the on-loop variant opens its connection in an `async def` dependency, on the loop too.

No `from __future__ import annotations` here: the endpoints are defined inside `install_routes` and
their annotations name its locals, which FastAPI can only resolve when they are evaluated at once.
"""

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, ParamSpec, TypeVar

from fastapi import Depends, FastAPI, Request

from tenk.ingest.schemas import Accepted, EventIn
from tenk.lab.targets.baselines import blocking_io as io
from tenk.lab.targets.baselines import schemas as s
from tenk.lab.targets.baselines.base import baseline_app
from tenk.lab.targets.baselines.blocking_io import Connection, Resources
from tenk.lab.targets.baselines.config import NaiveConfig

P = ParamSpec("P")
R = TypeVar("R")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.resources = Resources.open(NaiveConfig())
    try:
        yield
    finally:
        app.state.resources.close()


def _on_the_loop(endpoint: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`endpoint` as an `async def` with the same signature: FastAPI then calls it on the event loop."""

    @functools.wraps(endpoint)
    async def blocking(*args: P.args, **kwargs: P.kwargs) -> R:
        return endpoint(*args, **kwargs)

    return blocking


def _in_the_pool(endpoint: Callable[P, R]) -> Callable[P, R]:
    return endpoint


def _config() -> NaiveConfig:
    # One per request, as the first tasks app built its Config.
    return NaiveConfig()


async def _config_on_the_loop() -> NaiveConfig:
    return NaiveConfig()


def _db(request: Request, config: Annotated[NaiveConfig, Depends(_config)]) -> Iterator[Connection]:
    with io.connect(request.app.state.resources, config) as conn:
        yield conn


async def _db_on_the_loop(
    request: Request, config: Annotated[NaiveConfig, Depends(_config_on_the_loop)]
) -> AsyncIterator[Connection]:
    with io.connect(request.app.state.resources, config) as conn:
        yield conn


def blocking_app(title: str, *, on_loop: bool) -> FastAPI:
    app = baseline_app(title, lifespan)
    install_routes(app, on_loop=on_loop)
    return app


def install_routes(app: FastAPI, *, on_loop: bool) -> None:
    endpoint: Callable[[Callable[..., Any]], Callable[..., Any]] = _on_the_loop if on_loop else _in_the_pool
    Config = Annotated[NaiveConfig, Depends(_config_on_the_loop if on_loop else _config)]
    Db = Annotated[Connection, Depends(_db_on_the_loop if on_loop else _db)]

    @app.get("/ping")
    @endpoint
    def ping() -> dict[str, str]:
        return {"ping": "pong"}

    @app.get("/health")
    @endpoint
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/products/{product_id}", response_model=s.Product)
    @endpoint
    def get_product(product_id: s.ProductId, request: Request, config: Config) -> s.Product:
        return io.product(request.app.state.resources, config, product_id)

    @app.get("/products", response_model=s.ProductPage)
    @endpoint
    def list_products(db: Db, after: s.After = None, limit: s.Limit = 25) -> s.ProductPage:
        return io.product_page(db, after, limit)

    @app.post("/products", status_code=201, response_model=s.Product)
    @endpoint
    def create_product(product: s.ProductIn, db: Db) -> s.Product:
        return io.create_product(db, product)

    @app.get("/tasks", response_model=s.TaskPage)
    @endpoint
    def list_tasks(db: Db, after: s.After = None, limit: s.Limit = 25) -> s.TaskPage:
        return io.task_page(db, after, limit)

    @app.post("/tasks", status_code=201, response_model=s.Task)
    @endpoint
    def create_task(task: s.TaskIn, db: Db) -> s.Task:
        return io.create_task(db, task)

    @app.get("/tasks/{task_id}", response_model=s.Task)
    @endpoint
    def get_task(task_id: s.TaskId, db: Db) -> s.Task:
        return io.task(db, task_id)

    @app.get("/search", response_model=s.SearchResults)
    @endpoint
    def search(db: Db, q: s.SearchQuery, limit: s.SearchLimit = 10) -> s.SearchResults:
        return io.search(db, q, limit)

    @app.post("/events", status_code=202, response_model=Accepted)
    @endpoint
    def post_event(event: EventIn, db: Db) -> Accepted:
        return io.post_event(db, event)

    @app.get("/quotes/{symbol}", response_model=s.Quote)
    @endpoint
    def get_quote(symbol: s.Symbol, config: Config) -> s.Quote:
        return io.quote(config, symbol)
