"""The ASGI application: middleware, routers, and the lifespan that owns every pool and client."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress

from fastapi import FastAPI
from fastapi.responses import ORJSONResponse
from starlette.routing import Route

from tenk import __version__
from tenk.catalog.routes import router as catalog_router
from tenk.catalog.service import catalog_lifespan
from tenk.connections import REDIS_DOWN, connect_redis, create_pg_pool, create_redis, pool_gauges
from tenk.edge import TenkAPI
from tenk.errors import install_error_handlers
from tenk.ingest.routes import router as ingest_router
from tenk.ingest.service import ingest_lifespan
from tenk.models import COMMON_ERRORS, errors_documented
from tenk.ops.health import router as health_router
from tenk.ops.logging import configure_logging
from tenk.ops.metrics import live_gauges, metrics_endpoint
from tenk.pagination import cursor_secret
from tenk.search.routes import router as search_router
from tenk.search.service import search_lifespan
from tenk.settings import Settings
from tenk.tasks.routes import router as tasks_router
from tenk.upstream import router as upstream_router
from tenk.upstream import upstream_lifespan

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
        for domain_lifespan in DOMAIN_LIFESPANS:
            await stack.enter_async_context(domain_lifespan(app))
        # Everything made at start-up lives as long as the process: move it out of the collector's sight,
        # so that full collections under load scan only what requests create.
        gc.collect()
        gc.freeze()
        yield


def create_app(settings: Settings | None = None) -> TenkAPI:
    """The app for `settings`; with none (a server calling the factory), the tree read from the environment."""
    settings = settings or Settings()
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
    app.state.cursor_secret = cursor_secret(settings)
    install_error_handlers(app)
    app.include_router(health_router)
    # Every route may answer these, in the one error shape; documented so that clients can rely on it.
    common_errors = errors_documented(COMMON_ERRORS)
    for router in (catalog_router, tasks_router, search_router, upstream_router, ingest_router):
        app.include_router(router, responses=common_errors)
    app.router.routes.append(Route("/metrics", metrics_endpoint, include_in_schema=False))

    # Every request, whichever lane answers it, passes the edge: id, metrics, key, body, refusals (tenk.edge).
    app.open_edge(
        hot_lane=settings.hot_lane,
        auth_reads=settings.auth_reads,
        max_body_bytes=settings.max_body_bytes,
        body_timeout_s=settings.body_timeout_s,
        access_log=settings.access_log,
    )
    return app
