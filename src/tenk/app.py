"""The ASGI application: middleware, routers, and the lifespan that owns every pool and client."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import ORJSONResponse
from starlette.routing import Route

from tenk import __version__
from tenk.catalog import hot as catalog_hot
from tenk.catalog.routes import router as catalog_router
from tenk.catalog.service import catalog_lifespan
from tenk.connections import create_pg_pool, create_redis, pool_gauges
from tenk.errors import install_error_handlers
from tenk.hotpath import HotRoute, TenkAPI
from tenk.ingest import hot as ingest_hot
from tenk.ingest.routes import router as ingest_router
from tenk.ingest.service import ingest_lifespan
from tenk.ops.body_limit import BodyLimitMiddleware
from tenk.ops.health import router as health_router
from tenk.ops.logging import configure_logging
from tenk.ops.metrics import MetricsMiddleware, live_gauges, metrics_endpoint
from tenk.ops.request_id import RequestIdMiddleware
from tenk.search.routes import router as search_router
from tenk.search.service import search_lifespan
from tenk.settings import Settings, get_settings
from tenk.tasks import hot as tasks_hot
from tenk.tasks.routes import router as tasks_router
from tenk.upstream import hot as upstream_hot
from tenk.upstream import router as upstream_router
from tenk.upstream import upstream_lifespan

# Reads served by the pure-ASGI hot lane in front of FastAPI (see tenk.hotpath), and the ingest writes.
HOT_READS: list[HotRoute] = [catalog_hot.ROUTE, tasks_hot.ROUTE, upstream_hot.ROUTE]
HOT_WRITES: list[HotRoute] = ingest_hot.ROUTES

DomainLifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

# Each domain that owns long-lived state (caches, listeners, clients) opens it here, in this order,
# after the shared Postgres pool and Redis client exist, and closes it in reverse.
DOMAIN_LIFESPANS: list[DomainLifespan] = [catalog_lifespan, search_lifespan, upstream_lifespan, ingest_lifespan]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    async with AsyncExitStack() as stack:
        pg = await create_pg_pool(settings)
        stack.push_async_callback(pg.close)
        redis = create_redis(settings)
        stack.push_async_callback(redis.aclose)
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
        for domain_lifespan in DOMAIN_LIFESPANS:
            await stack.enter_async_context(domain_lifespan(app))
        # Everything made at start-up lives as long as the process: move it out of the collector's sight,
        # so that full collections under load scan only what requests create.
        gc.collect()
        gc.freeze()
        yield


def create_app(settings: Settings | None = None) -> TenkAPI:
    settings = settings or get_settings()
    configure_logging(settings.log_level)
    app = TenkAPI(
        title="tenk",
        version=__version__,
        summary="An async Python API stack built for ten thousand requests per second.",
        lifespan=lifespan,
        default_response_class=ORJSONResponse,
    )
    app.state.settings = settings
    app.state.accepted_key_digests = settings.accepted_key_digests
    install_error_handlers(app)
    app.include_router(health_router)
    app.include_router(catalog_router)
    app.include_router(tasks_router)
    app.include_router(search_router)
    app.include_router(upstream_router)
    app.include_router(ingest_router)
    app.router.routes.append(Route("/metrics", metrics_endpoint, include_in_schema=False))

    # Outermost first: the request id exists before anything logs, and metrics time everything inside.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, access_log=settings.access_log)
    app.add_middleware(RequestIdMiddleware)
    # The hot lane writes no access log, and checks no key on reads: with either on, requests take the full path.
    if not settings.access_log:
        app.serve_hot(HOT_WRITES + ([] if settings.auth_reads else HOT_READS))
    return app
