"""The process-wide clients: created once per process in the lifespan, never per request."""

from __future__ import annotations

import logging

import asyncpg
import orjson
from redis.asyncio import BlockingConnectionPool, Redis
from redis.exceptions import RedisError

from tenk.settings import Settings

logger = logging.getLogger("tenk.connections")

# What a Redis call raises when Redis is down or drops the connection. RuntimeError is in it because
# redis-py under uvloop raises "unable to perform operation on <TCPTransport closed=True>" when Redis
# dies while a connection is being set up; callers treat that as the outage it is, not as a bug.
REDIS_DOWN: tuple[type[Exception], ...] = (RedisError, OSError, RuntimeError)


async def _init_connection(conn: asyncpg.Connection) -> None:
    # Decode json/jsonb with orjson; the default json module is several times slower.
    for kind in ("json", "jsonb"):
        await conn.set_type_codec(
            kind, encoder=lambda v: orjson.dumps(v).decode(), decoder=orjson.loads, schema="pg_catalog"
        )


async def create_pg_pool(settings: Settings) -> asyncpg.Pool:
    """A pool that still comes up when Postgres is down: the API must start, and `/ready` say why not."""
    kwargs = dict(
        dsn=settings.resolved_database_url,
        max_size=settings.db_pool_max,
        command_timeout=settings.db_timeout_s,
        timeout=settings.db_timeout_s,
        init=_init_connection,
        server_settings={"timezone": "UTC", "application_name": "tenk"},
        # Postgres may restart under us; drop idle connections rather than hand out dead ones for long.
        max_inactive_connection_lifetime=60.0,
    )
    try:
        return await asyncpg.create_pool(min_size=min(settings.db_pool_min, settings.db_pool_max), **kwargs)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        logger.warning("postgres unreachable at start-up (%s); the pool will connect lazily", exc)
        return await asyncpg.create_pool(min_size=0, **kwargs)


def create_redis(settings: Settings, *, max_connections: int | None = None) -> Redis:
    pool = BlockingConnectionPool.from_url(
        settings.resolved_redis_url,
        max_connections=max_connections or settings.redis_pool_max,
        timeout=settings.redis_timeout_s,
        socket_timeout=settings.redis_timeout_s,
        socket_connect_timeout=settings.redis_timeout_s,
    )
    return Redis(connection_pool=pool)


def pool_gauges(pool: asyncpg.Pool, name: str) -> list[tuple[dict[str, str], float]]:
    size = pool.get_size()
    return [
        ({"pool": name, "kind": "size"}, float(size)),
        ({"pool": name, "kind": "in_use"}, float(size - pool.get_idle_size())),
        ({"pool": name, "kind": "max"}, float(pool.get_max_size())),
    ]
