"""per-request-client, no-timeout and unbounded-pool: how the app makes its clients and pools.

A client, pool or connection built under a route, a request-scoped dependency or a middleware is built
again for every request (per-request-client). One stored where it outlives the call (a global, an
attribute such as `app.state.x`) is a lazily made singleton and is not flagged.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tenk.doctor._context import Context, ResolvedCall, finding, short
from tenk.doctor._findings import Finding
from tenk.doctor._follow import CallSite
from tenk.doctor._project import Function

REDIS_CLIENTS = {
    "redis.Redis",
    "redis.Redis.from_url",
    "redis.from_url",
    "redis.asyncio.Redis",
    "redis.asyncio.Redis.from_url",
    "redis.asyncio.from_url",
    "aioredis.Redis",
    "aioredis.from_url",
}
REDIS_POOLS = {
    "redis.ConnectionPool",
    "redis.ConnectionPool.from_url",
    "redis.asyncio.ConnectionPool",
    "redis.asyncio.ConnectionPool.from_url",
    "aioredis.ConnectionPool",
    "aioredis.ConnectionPool.from_url",
}
# A sync client used from one thread holds one connection; the asyncio one opens one per concurrent command.
ASYNC_REDIS = {name for name in REDIS_CLIENTS | REDIS_POOLS if name.startswith(("redis.asyncio.", "aioredis."))}
PER_REQUEST = (
    REDIS_CLIENTS
    | REDIS_POOLS
    | {
        "aioredis.create_redis_pool",
        "asyncpg.connect",
        "asyncpg.create_pool",
        "httpx.AsyncClient",
        "httpx.Client",
        "requests.Session",
        "aiohttp.ClientSession",
        "sqlalchemy.create_engine",
        "sqlalchemy.ext.asyncio.create_async_engine",
        "psycopg.connect",
        "psycopg.Connection.connect",
        "psycopg.AsyncConnection.connect",
        "psycopg_pool.ConnectionPool",
        "psycopg_pool.AsyncConnectionPool",
        "psycopg2.connect",
        "pymysql.connect",
        "aiomysql.connect",
        "aiomysql.create_pool",
        "motor.motor_asyncio.AsyncIOMotorClient",
        "pymongo.MongoClient",
    }
)
REQUESTS_CALLS = {
    f"requests.{verb}" for verb in ("get", "post", "put", "patch", "delete", "head", "options", "request")
}
SESSION_CALLS = {
    f"requests.Session().{verb}" for verb in ("get", "post", "put", "patch", "delete", "head", "options", "request")
}
HTTPX_TIMEOUT_NONE = {
    "httpx.Client",
    "httpx.AsyncClient",
    *(f"httpx.{v}" for v in ("get", "post", "put", "patch", "delete", "request", "stream")),
}


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _splats(call: ast.Call) -> bool:
    """`**kwargs` passed on: what it holds cannot be told, so the call is given the benefit of the doubt."""
    return any(kw.arg is None for kw in call.keywords)


def _is_none(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _stored(function: Function) -> set[int]:
    """Calls whose result is kept beyond the call: assigned to a global, nonlocal or attribute, directly
    or through a local (`new = make(); module.shared = new`)."""
    body = function.nodes
    kept_names = {name for node in body if isinstance(node, ast.Global | ast.Nonlocal) for name in node.names}
    assignments = [
        (node.targets if isinstance(node, ast.Assign) else [node.target], node.value)
        for node in body
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
    ]
    kept_locals = {
        value.id
        for targets, value in assignments
        if isinstance(value, ast.Name) and any(_keeps(t, kept_names) for t in targets)
    }
    stored: set[int] = set()
    for targets, value in assignments:
        kept = any(_keeps(t, kept_names) or (isinstance(t, ast.Name) and t.id in kept_locals) for t in targets)
        if kept:
            stored.update(id(n) for n in ast.walk(value) if isinstance(n, ast.Call))
    return stored


def _keeps(target: ast.expr, kept_names: set[str]) -> bool:
    return isinstance(target, ast.Attribute | ast.Subscript) or (
        isinstance(target, ast.Name) and target.id in kept_names
    )


def check_per_request(context: Context) -> Iterator[Finding]:
    graph = context.graph
    kept: dict[int, set[int]] = {}

    def not_kept(caller: Function, site: CallSite) -> bool:
        """A helper whose result the caller keeps (`self.session = make_session()`) makes a singleton."""
        if id(caller) not in kept:
            kept[id(caller)] = _stored(caller)
        return id(site.node) not in kept[id(caller)]

    for entry in context.entries.of_kind("route", "dependency", "middleware"):
        root = entry.function
        for function, chain in graph.walk(root, context.depth, follow=not_kept):
            stored: set[int] | None = None
            for site in graph.calls(function):
                if site.callee not in PER_REQUEST or not isinstance(site.callee, str):
                    continue
                if site.callee in REDIS_CLIENTS and _keyword(site.node, "connection_pool") is not None:
                    continue
                stored = kept.setdefault(id(function), _stored(function)) if stored is None else stored
                if id(site.node) in stored:
                    continue
                message = (
                    f"`{short(site.node)}` ({site.callee}) is made for every request, in {entry.kind} "
                    f"`{root.qualname}`: make it once in the lifespan and share it"
                )
                yield finding("per-request-client", function.module, site.node, message, chain)


def check_timeouts_and_limits(context: Context) -> Iterator[Finding]:
    for call in context.calls:
        if not isinstance(call.callee, str):
            continue
        found = _no_timeout(call) or _unbounded(call)
        if found is not None:
            yield found


def _no_timeout(call: ResolvedCall) -> Finding | None:
    callee, node = call.callee, call.node
    assert isinstance(callee, str)
    if _splats(node):
        return None
    timeout = _keyword(node, "timeout")
    missing = False
    if callee in REQUESTS_CALLS or callee in SESSION_CALLS:
        missing = timeout is None or _is_none(timeout)
        why = "requests waits forever by default"
    elif callee == "urllib.request.urlopen":
        missing = timeout is None and len(node.args) < 3
        why = "urlopen waits forever by default"
    elif callee == "aiohttp.ClientSession":
        missing = timeout is None
        why = "aiohttp's default is 5 minutes in total"
    elif callee in HTTPX_TIMEOUT_NONE:
        missing = _is_none(timeout)
        why = "timeout=None turns httpx's 5 s default off"
    if not missing:
        return None
    return finding("no-timeout", call.module, node, f"`{short(node)}` ({callee}) has no timeout: {why}")


def _unbounded(call: ResolvedCall) -> Finding | None:
    callee, node = call.callee, call.node
    assert isinstance(callee, str)
    if _splats(node):
        return None
    message = None
    if callee in ASYNC_REDIS:
        if _keyword(node, "max_connections") is None and _keyword(node, "connection_pool") is None:
            message = "redis-py's asyncio pool has no ceiling by default (2**31 connections): pass max_connections"
    elif callee == "httpx.Limits" and _is_none(_keyword(node, "max_connections")):
        message = "max_connections=None lets httpx open a connection per concurrent request"
    elif callee == "aiohttp.TCPConnector":
        limit = _keyword(node, "limit")
        if isinstance(limit, ast.Constant) and limit.value == 0:
            message = "limit=0 lets aiohttp open a connection per concurrent request"
    if message is None:
        return None
    return finding("unbounded-pool", call.module, node, f"`{short(node)}` ({callee}): {message}")
