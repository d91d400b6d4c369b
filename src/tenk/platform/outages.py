"""Is it down, or is it us? The outage classifiers every domain's breakers and error answers share.

A leaf: it imports only the drivers' exceptions, so that `tenk.platform.errors` (which maps outages to 503) and
each domain can ask without importing the clients in `tenk.platform.connections`.
"""

from __future__ import annotations

import asyncpg
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

# What a Redis call raises when Redis is down or drops the connection. RuntimeError is in it because
# redis-py under uvloop raises "unable to perform operation on <TCPTransport closed=True>" when Redis
# dies while a connection is being set up; callers treat that as the outage it is, not as a bug.
# Behind Sentinel, "no sentinel knows a master" (MasterNotFoundError) and "this master was demoted"
# are ConnectionErrors, so RedisError covers them and `redis_is_down` counts them as outages.
REDIS_DOWN: tuple[type[Exception], ...] = (RedisError, OSError, RuntimeError)


def redis_is_down(exc: BaseException) -> bool:
    """Did Redis fail to answer (unreachable, timed out, loading), as opposed to answering with an error?

    A refusal Redis sends (OOM at maxmemory, WRONGTYPE, NOSCRIPT) proves it is up: a circuit breaker
    must not count it as an outage.
    """
    return isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError, RuntimeError))


# What Postgres raises when it is shutting down, failing over, overloaded or unreachable: the request
# was fine and may succeed if retried (503 + Retry-After), as opposed to a bug or bad input (500/4xx).
# Server errors are classified by SQLSTATE, so every member of a class counts, including ones asyncpg
# adds later: 08 connection exception, 53 insufficient resources (too many connections, disk full),
# 57 operator intervention (admin/crash shutdown, cannot connect now, query cancelled), 58 system
# error (I/O). Single states from other classes: a failover leaves us on a read-only standby (25006),
# and serialization failures, deadlocks and lock timeouts are transient by definition.
_PG_DOWN_CLASSES = frozenset({"08", "53", "57", "58"})
_PG_DOWN_STATES = frozenset({"25006", "40001", "40P01", "55P03"})
# The exception families a Postgres call can fail with; `postgres_is_down` tells which members mean "down".
POSTGRES_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)


def postgres_is_down(exc: BaseException) -> bool:
    """Does this exception from a Postgres call mean "unavailable right now", not "this request is wrong"?"""
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = str(getattr(exc, "sqlstate", "") or "")
        return sqlstate[:2] in _PG_DOWN_CLASSES or sqlstate in _PG_DOWN_STATES
    if isinstance(exc, asyncpg.InterfaceError):
        # Client-side: "connection is closed", "pool is closing", a connection lost mid-query. Its
        # DataError subclass is different: a query argument asyncpg could not encode is bad input.
        return not isinstance(exc, ValueError)
    if isinstance(exc, asyncpg.InternalClientError):
        # "cannot switch to state N; another operation is in progress": what asyncpg raises on a pooled
        # connection whose backend was terminated under it (MagicStack/asyncpg#1069). The pool
        # discards that connection, and the next one works.
        return True
    # Refused, reset or unreachable sockets (ConnectionError is an OSError), and connect, pool-acquire
    # and command timeouts.
    return isinstance(exc, (OSError, TimeoutError))
