"""The process-wide clients: created once per process in the lifespan, never per request."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

import asyncpg
import orjson
from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import NoBackoff
from redis.exceptions import AskError, ClusterDownError, MovedError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

from tenk.platform.fast_paths import FastPath, runs
from tenk.platform.outages import POSTGRES_ERRORS
from tenk.platform.pg_pool import create_pool
from tenk.platform.redis_pool import PromptConnectionPool
from tenk.redis_urls import CLUSTER_SCHEMES, is_cluster_url, is_sentinel_url, parse_sentinel_url, split_netloc

if TYPE_CHECKING:
    # Only for annotations: nothing here reads the settings classes at run time.
    from tenk.settings import Settings

logger = logging.getLogger("tenk.connections")


async def _init_connection(conn: asyncpg.Connection) -> None:
    # Decode json/jsonb with orjson; the default json module is several times slower.
    for kind in ("json", "jsonb"):
        await conn.set_type_codec(
            kind, encoder=lambda v: orjson.dumps(v).decode(), decoder=orjson.loads, schema="pg_catalog"
        )


def pooler_connect_kwargs(pooler: str = "none") -> dict[str, Any]:
    """asyncpg arguments that a transaction-mode pooler needs (`pooler="transaction"`, TENK_DATABASE_POOLER).

    The pooler hands each transaction to any server connection, so a statement prepared under a name
    on one is missing on the next (asyncpg #339, #1058). With no statement cache asyncpg uses only the
    unnamed statement, whose Parse/Bind/Execute it sends before a single Sync: one transaction, one
    server connection.
    """
    return {"statement_cache_size": 0} if pooler == "transaction" else {}


def pg_pool_options(settings: Settings) -> dict[str, Any]:
    """`create_pg_pool`'s sizes, timeout, pooler and switch as tenk's settings tree has them (TENK_DATABASE_*)."""
    database = settings.database
    return {
        "min_size": database.pool_min,
        "max_size": database.pool_max,
        "timeout_s": database.timeout_s,
        "pooler": database.pooler,
        "stock_paths": settings.stock_paths,
    }


async def create_pg_pool(
    dsn: str,
    *,
    min_size: int = 4,
    max_size: int = 16,
    timeout_s: float = 5.0,
    pooler: str = "none",
    server_settings: dict[str, str] | None = None,
    stock_paths: bool = False,
) -> asyncpg.Pool:
    """A pool that still comes up when Postgres is down: the API must start, and `/ready` say why not.

    `timeout_s` bounds both the wait for a connection and each statement; `pooler="transaction"` is a
    transaction-mode pooler's DSN (`pooler_connect_kwargs`); `stock_paths` takes asyncpg's own pool
    instead of the prompt one (`tenk.platform.fast_paths`). Behind a transaction pooler only
    application_name and the time zone may go in the startup packet (PgBouncer refuses other
    parameters): a domain must then set the rest per transaction. Inside tenk, `pg_pool_options(settings)`
    gives the rest of the arguments from the settings tree.
    """
    kwargs = dict(
        max_size=max_size,
        command_timeout=timeout_s,
        timeout=timeout_s,
        init=_init_connection,
        server_settings={"timezone": "UTC", "application_name": "tenk", **(server_settings or {})},
        # Postgres may restart under us; drop idle connections rather than hand out dead ones for long.
        max_inactive_connection_lifetime=60.0,
        **pooler_connect_kwargs(pooler),
    )
    prompt = runs(FastPath.PG_POOL, stock_paths=stock_paths)
    try:
        return await create_pool(dsn, min_size=min(min_size, max_size), prompt=prompt, **kwargs)
    except POSTGRES_ERRORS as exc:
        logger.warning("postgres unreachable at start-up (%s); the pool will connect lazily", exc)
        return await create_pool(dsn, min_size=0, prompt=prompt, **kwargs)


def _cluster_from_url(url: str, max_connections: int, **kwargs: Any) -> RedisCluster:
    parts = urlsplit(url)
    username, password, addresses = split_netloc(parts.netloc, 6379)
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in addresses],
        username=username,
        password=password,
        ssl=CLUSTER_SCHEMES[parts.scheme],
        max_connections=max_connections,
        **kwargs,
    )


class BlockingSentinelConnectionPool(SentinelConnectionPool, PromptConnectionPool):
    """Connections to whichever server the sentinels name master, waiting up to `timeout` for a free one
    when all `max_connections` are busy, as the single server's BlockingConnectionPool does."""


class StockBlockingSentinelConnectionPool(SentinelConnectionPool, BlockingConnectionPool):
    """`BlockingSentinelConnectionPool` on redis-py's own blocking pool (the stock path)."""


class SentinelMasterRedis(Redis):
    """The master's client, which also closes its connections to the sentinels when it is closed."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        await cast(SentinelConnectionPool, self.connection_pool).sentinel_manager.aclose()


def _sentinel_master(
    url: str, max_connections: int, pool_timeout_s: float | None, prompt: bool = True, **kwargs: Any
) -> Redis:
    """A client bound to the current master: each new connection asks the sentinels where that is.

    Sentinels that demote a master close its clients' connections (CLIENT KILL), so the next command
    fails as an outage, is retried, and reconnects to the new master; redis-py also drops a connection
    whose command gets READONLY, should one reach a demoted master otherwise."""
    address = parse_sentinel_url(url)
    # One attempt per sentinel: discover_master asks the next one itself, and redis-py's default of ten
    # retries with backoff on each dead sentinel made a request wait out every backoff for its 503.
    sentinel_kwargs = {name: value for name, value in kwargs.items() if name.startswith("socket_")}
    sentinel_kwargs["retry"] = Retry(NoBackoff(), 0)
    sentinel = Sentinel(address.sentinels, sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
    pool: dict[str, Any] = {"connection_pool_class": SentinelConnectionPool}
    if pool_timeout_s is not None:
        blocking = BlockingSentinelConnectionPool if prompt else StockBlockingSentinelConnectionPool
        pool = {"connection_pool_class": blocking, "timeout": pool_timeout_s}
    return cast(
        Redis,
        sentinel.master_for(
            address.service,
            redis_class=SentinelMasterRedis,
            db=address.db,
            username=address.username,
            password=address.password,
            max_connections=max_connections,
            **pool,
            **kwargs,
        ),
    )


def redis_from_url(url: str, *, max_connections: int = 64, **kwargs: Any) -> Redis:
    """The one place that tells a single Redis from a cluster or Sentinel: every domain gets what this returns.

    A cluster client is typed as `Redis` on purpose. Each command tenk sends touches one slot (the
    keys carry hash tags, see each domain's `keys.py`), so RedisCluster routes it like a single server
    would answer it; what differs (sharded pub/sub, WAIT on the right connection) is in
    `tenk.platform.pubsub` and `on_one_connection`, beside this function, not in the domains. A Sentinel client is a
    plain `Redis` whose connections go to the current master.
    """
    if is_cluster_url(url):
        return cast(Redis, _cluster_from_url(url, max_connections, **kwargs))
    if is_sentinel_url(url):
        return _sentinel_master(url, max_connections, None, **kwargs)
    return Redis.from_url(url, max_connections=max_connections, **kwargs)


async def connect_redis(redis: Redis) -> None:
    """Discover a cluster's nodes and slots now, before the first commands run concurrently.

    redis-py 8.1 lets commands that start together on a client that has not yet mapped the cluster
    trip over each other's set-up (AttributeError on a connection being torn down, "slot not
    covered" in pub/sub). A single server needs nothing. Raises the REDIS_DOWN family when the
    cluster is unreachable: callers carry on, and the client maps it on first use.
    """
    if isinstance(redis, RedisCluster):
        await redis.initialize()


def is_cluster(redis: Redis) -> bool:
    return isinstance(redis, RedisCluster)


async def on_one_connection(redis: Redis, key: str, *commands: tuple[EncodableT, ...]) -> list[Any]:
    """Send `commands` together on one connection to the server owning `key`; their answers, in order.

    For commands whose meaning is the connection's: WAIT counts the replicas that have *this
    connection's* writes, so it must follow the append on the connection that sent it.

    A single server's (or Sentinel's master's) pipeline does that, and when the connection drops it
    re-sends all of them on a new one, which keeps them together. redis-py's cluster pipeline does not:
    after a connection error it re-sends only the commands still unanswered, so an append already
    answered is followed by a WAIT alone, which (its target dropped on the first attempt, redis-py 8.1)
    goes to any node, where a connection without writes has nothing to wait for and answers at once;
    and an append answered MOVED is re-sent on its own, elsewhere, after the WAIT ran here. Either way
    an append no replica holds would be acknowledged. So on a cluster the commands go on one connection
    to the key's primary and are never retried nor redirected: a failure raises, and the slot map is
    read again before the next call.
    """
    if not isinstance(redis, RedisCluster):
        async with redis.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            answers: list[Any] = await pipe.execute()
            return answers
    await redis.initialize()  # a no-op unless a failure (here or elsewhere) asked for a new slot map
    node = redis.get_node_from_key(key)
    connection = node.acquire_connection()
    try:
        await node.disconnect_if_needed(connection)
        await connection.send_packed_command(connection.pack_commands(commands))
        answers = [await _answer(connection) for _ in commands]
    except BaseException as exc:
        # An answer may be left unread: this connection cannot serve the next caller.
        await connection.disconnect()
        if isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError)):
            await redis.aclose()  # the node may be gone: map the slots again before the next call
        raise
    finally:
        node.release(connection)
    for answer in answers:
        if isinstance(answer, Exception):
            if isinstance(answer, (MovedError, AskError, ClusterDownError, TryAgainError)):
                await redis.aclose()
            raise answer
    return answers


async def _answer(connection: Connection) -> Any:
    """One reply, an error reply as its exception (the rest of the replies are still to be read)."""
    try:
        return await connection.read_response()
    except ResponseError as exc:
        return exc


def redis_options(settings: Settings) -> dict[str, Any]:
    """`create_redis`'s pool size, timeout and switch as tenk's settings tree has them (TENK_REDIS_*)."""
    return {
        "max_connections": settings.redis.pool_max,
        "timeout_s": settings.redis.timeout_s,
        "stock_paths": settings.stock_paths,
    }


def create_redis(url: str, *, max_connections: int = 64, timeout_s: float = 0.25, stock_paths: bool = False) -> Redis:
    """A client of `url` (one server, a cluster or Sentinel's master: `redis_from_url`) that waits up to
    `timeout_s` for a free connection of its `max_connections`, with that socket timeout too. Inside
    tenk, `redis_options(settings)` gives the shared cache client's arguments; a domain's own client
    overrides the size and timeout."""
    timeouts = dict(socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
    if is_cluster_url(url):
        return redis_from_url(url, max_connections=max_connections, **timeouts)
    prompt = runs(FastPath.REDIS_POOL, stock_paths=stock_paths)
    if is_sentinel_url(url):
        return _sentinel_master(url, max_connections, timeout_s, prompt, **timeouts)
    pool_class = PromptConnectionPool if prompt else BlockingConnectionPool
    pool = pool_class.from_url(url, max_connections=max_connections, timeout=timeout_s, **timeouts)
    return Redis(connection_pool=pool)


def pool_gauges(pool: asyncpg.Pool, name: str) -> list[tuple[dict[str, str], float]]:
    size = pool.get_size()
    return [
        ({"pool": name, "kind": "size"}, float(size)),
        ({"pool": name, "kind": "in_use"}, float(size - pool.get_idle_size())),
        ({"pool": name, "kind": "max"}, float(pool.get_max_size())),
    ]


def reply_text(value: object) -> str:
    """A Redis reply (stream id, group name, config value) as text, whether the client decodes replies or not."""
    return value.decode() if isinstance(value, bytes) else str(value)
