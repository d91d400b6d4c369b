"""The ASGI application: the routers, the request edge in front of them (`TenkAPI.open_edge`), and the
lifespan that owns every pool and client. tenk adds no middleware: what every request shares is the edge's."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import ORJSONResponse
from starlette.types import ASGIApp

from tenk import __version__
from tenk.catalog.routes import router as catalog_router
from tenk.catalog.service import catalog_lifespan
from tenk.ingest.routes import router as ingest_router
from tenk.ingest.service import ingest_lifespan
from tenk.ops.docs import router as docs_router
from tenk.ops.health import router as health_router
from tenk.ops.logging import configure_logging
from tenk.ops.metrics_port import MetricsPort, start_metrics_port
from tenk.ops.tracing import setup_tracing
from tenk.platform import (
    COMMON_ERRORS,
    OPS_POLICIES,
    REDIS_DOWN,
    TenkAPI,
    check_replies,
    connect_redis,
    create_pg_pool,
    create_redis,
    cursor_secret,
    errors_documented,
    install_error_handlers,
    live_gauges,
    metrics_endpoint,
    pg_pool_options,
    pool_gauges,
    redis_options,
    require_ops_key,
)
from tenk.platform.fast_paths import FastPath, runs
from tenk.platform.metrics import use_stock_metrics
from tenk.search.routes import router as search_router
from tenk.search.service import search_lifespan
from tenk.settings import Settings
from tenk.tasks.routes import router as tasks_router
from tenk.upstream.routes import router as upstream_router
from tenk.upstream.service import upstream_lifespan

DomainLifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


@dataclass(frozen=True)
class Domain:
    """A domain as the app serves it: its routes, and the lifespan of the state it owns (caches,
    listeners, clients), opened after the shared Postgres pool and Redis client exist. Its settings are
    its branch of the tree (`app.state.settings.<branch>`), or its own declaration's
    (`ReadThrough(settings=...)`)."""

    router: APIRouter
    lifespan: DomainLifespan | None = None


# Every domain: routes included in this order, lifespans opened in this order and closed in reverse.
DOMAINS: tuple[Domain, ...] = (
    Domain(catalog_router, catalog_lifespan),
    Domain(tasks_router),
    Domain(search_router, search_lifespan),  # after the catalog's: its pages hear of product changes
    Domain(upstream_router, upstream_lifespan),
    Domain(ingest_router, ingest_lifespan),
)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    async with AsyncExitStack() as stack:
        pg = await create_pg_pool(settings.resolved_database_url, **pg_pool_options(settings))
        stack.push_async_callback(pg.close)
        redis = create_redis(settings.resolved_redis_url, **redis_options(settings))
        stack.push_async_callback(redis.aclose)
        with suppress(*REDIS_DOWN):
            await connect_redis(redis)
        app.state.pg = pg
        app.state.redis = redis
        app.state.readiness_probes = {
            "postgres": (lambda: pg.fetchval("SELECT 1"), True),
            "redis": (redis.ping, False),
        }

        def gauges() -> list[tuple[dict[str, str], float]]:
            return pool_gauges(pg, "postgres")

        live_gauges.add("tenk_pool_connections", "Connection pool size and use.", gauges)
        stack.callback(live_gauges.remove, "tenk_pool_connections", gauges)

        def fast_paths() -> list[tuple[dict[str, str], float]]:
            return [({"path": path}, float(serves)) for path, serves in app.state.fast_paths.items()]

        live_gauges.add("tenk_fast_path", "1 where a fast path serves, 0 where its stock twin does.", fast_paths)
        stack.callback(live_gauges.remove, "tenk_fast_path", fast_paths)
        for domain in app.state.domains:
            if domain.lifespan is not None:
                await stack.enter_async_context(domain.lifespan(app))
        if settings.metrics_port:
            handler = MetricsPort(
                settings.header_timeout_s,
                OPS_POLICIES["metrics"].needs_key(settings),
                lambda: app.state.accepted_key_digests,
            )
            metrics_server = await start_metrics_port(settings.host, settings.metrics_port, handler)
            stack.push_async_callback(metrics_server.wait_closed)
            stack.callback(metrics_server.close)
        # Everything made at start-up lives as long as the process: move it out of the collector's sight,
        # so that full collections under load scan only what requests create.
        gc.collect()
        gc.freeze()
        yield


def create_app(settings: Settings | None = None, domains: Sequence[Domain] = DOMAINS) -> TenkAPI:
    """The app for `settings`; with none (a server calling the factory), the tree read from the environment.
    It serves `domains` (tenk's own by default) beside health, docs and metrics."""
    settings = settings or Settings()
    configure_logging(settings.log_level)
    # Before any route is served: the metrics are the process's, whichever app is made last decides.
    use_stock_metrics(settings.stock_paths)
    app = TenkAPI(
        title="tenk",
        version=__version__,
        summary="An async Python API stack built for ten thousand requests per second.",
        lifespan=lifespan,
        default_response_class=ORJSONResponse,
        # Declared in tenk.ops.docs instead, behind their key check (TENK_AUTH_DOCS).
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.domains = tuple(domains)
    app.state.accepted_key_digests = settings.accepted_key_digests
    app.state.cursor_secret = cursor_secret(settings)
    install_error_handlers(app)
    app.include_router(health_router)
    app.include_router(docs_router)
    # Every route may answer these, in the one error shape; documented so that clients can rely on it.
    common_errors = errors_documented(COMMON_ERRORS)
    for domain in domains:
        check_replies(domain.router.routes)  # one handler convention: a `Reply` from every route
        app.include_router(domain.router, responses=common_errors)
    if not settings.metrics_port:
        app.add_api_route(
            "/metrics",
            metrics_endpoint,
            include_in_schema=False,
            dependencies=[Depends(require_ops_key("metrics"))],
        )

    # Every request, whichever lane answers it, passes the edge: id, metrics, key, body, refusals (tenk.platform.edge).
    app.open_edge(
        # The lane's stock twin is FastAPI's own routing (tenk.platform.fast_paths).
        hot_lane=settings.hot_lane and runs(FastPath.HOT_LANE, stock_paths=settings.stock_paths),
        needs_key=lambda policy: policy.needs_key(settings),
        max_body_bytes=settings.max_body_bytes,
        body_timeout_s=settings.body_timeout_s,
        access_log=settings.access_log,
        trusted_proxies=settings.trusted_proxies,
    )
    # What serves, for the tenk_fast_path gauge: a fast path or its stock twin (tenk.platform.fast_paths).
    app.state.fast_paths = {
        FastPath.HOT_LANE: app.lane is not None,
        **{path: runs(path, stock_paths=settings.stock_paths) for path in FastPath if path != FastPath.HOT_LANE},
    }
    return app


def create_traced_app() -> ASGIApp:
    """The app factory `tenk serve` uses when TENK_OPS_OTEL_ENDPOINT is set (`tenk.ops.tracing.app_factory`):
    tenk's app inside the server spans, so that the hot lane's requests get their server span too."""
    # Deferred: the opentelemetry packages are the optional `otel` extra, needed only when tracing.
    from opentelemetry import trace

    from tenk.ops.server_spans import ServerSpans

    # The server calls this factory with no arguments: this process's entry point reads the tree.
    settings = Settings()
    app = create_app(settings)
    setup_tracing("tenk-api", settings.ops)
    return ServerSpans(
        app,
        trace.get_tracer("tenk.http"),
        frozenset({"/health", "/ready", "/metrics"}),
        trusted_networks=settings.ops.otel_trusted_networks,
        trusted_proxies=settings.trusted_proxies,
    )
