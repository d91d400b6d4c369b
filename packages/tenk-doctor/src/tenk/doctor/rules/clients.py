"""per-request-client, no-timeout and unbounded-pool: how the app makes its clients and pools.

A client, pool or connection built under a route, a request-scoped dependency or a middleware is built
again for every request (per-request-client). One stored where it outlives the call (a global, an
attribute such as `app.state.x`) is a lazily made singleton and is not flagged. One made on an admin
route (its path or a dependency it declares names `admin`) is a note: few requests take that path.

An outbound call without a timeout costs a served request only where one reaches it: the same call in a
CLI, a script, an SDK client or at start-up is a note. So is a pool left at its library's default
ceiling, which is about the app's configuration rather than a line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tenk.doctor._context import Context, ResolvedCall, finding, rewritten, segment, short
from tenk.doctor._entrypoints import Entry
from tenk.doctor._findings import Finding, Severity, Step
from tenk.doctor._follow import CallSite, called_name
from tenk.doctor._names import Scope, dotted
from tenk.doctor._project import Function
from tenk.doctor._rules import RULES

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
# What check_timeouts_and_limits looks at: every call is resolved, and only these are judged.
JUDGED = (
    REQUESTS_CALLS
    | SESSION_CALLS
    | HTTPX_TIMEOUT_NONE
    | ASYNC_REDIS
    | {"urllib.request.urlopen", "aiohttp.ClientSession", "httpx.Limits", "aiohttp.TCPConnector"}
)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


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
        for reached in graph.reach(root, context.depth, follow=not_kept):
            function, chain = reached.function, reached.chain
            stored: set[int] | None = None
            for site in reached.sites:
                if site.callee not in PER_REQUEST or not isinstance(site.node, ast.Call):
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
                fix = _shared(function, site.node)
                chain_ = (*entry.declared, *chain)
                rare = _admin_route(entry) if entry.kind == "route" else None
                severity: Severity | None = None
                if rare is not None:
                    # Made per call of a path only an administrator takes: a handshake a rare request pays.
                    severity = "note"
                    message += f"; {rare}, a path a few requests take"
                yield finding(
                    "per-request-client", function.module, site.node, message, chain_, fix=fix, severity=severity
                )


ADMIN = "admin"


def _admin_route(entry: Entry) -> str | None:
    """What says a route is an administrator's (its path, or a dependency it declares, names `admin`)."""
    registration = entry.registration
    path = registration.args[0] if registration is not None and registration.args else None
    if isinstance(path, ast.Constant) and isinstance(path.value, str) and ADMIN in path.value.lower():
        return f"an admin route (`{path.value}`)"
    arguments = entry.function.node.args
    for default in (*arguments.defaults, *arguments.kw_defaults):
        if isinstance(default, ast.Call) and default.args and called_name(default) in ("Depends", "Security"):
            guard = dotted(default.args[0]) or ""
            if ADMIN in guard.rsplit(".", 1)[-1].lower():
                return f"an admin route (`Depends({guard})`)"
    return None


def _shared(function: Function, node: ast.Call) -> str | None:
    """The flagged client taken from `app.state`, made once in the lifespan, as a diff of its line; a
    `with` that made it per request now names the shared one (closing it there would close it for all)."""
    made = segment(function.module, node)
    lifespan = f"  # in the lifespan, once: app.state.client = {made}"
    for statement in function.nodes:
        if not isinstance(statement, ast.With | ast.AsyncWith):
            continue
        for item in statement.items:
            if item.context_expr is node and isinstance(item.optional_vars, ast.Name) and len(statement.items) == 1:
                old = function.module.lines[statement.lineno - 1].strip()
                return f"-    {old}\n+    {item.optional_vars.id} = request.app.state.client{lifespan}"
    fix = rewritten(function.module, node, "request.app.state.client")
    return None if fix is None else fix + lifespan


def check_timeouts_and_limits(context: Context) -> Iterator[Finding]:
    for call in context.calls:
        if not isinstance(call.callee, str) or call.callee not in JUDGED:
            continue
        scope = context.scope(call.module, call.function)
        # `**options` is read where the code shows the dict; one it cannot read gets the benefit of the doubt.
        keywords = scope.keywords(call.node)
        if keywords is None:
            continue
        found = _no_timeout(call, keywords, context) or _unbounded(call, keywords, scope, context)
        if found is not None:
            yield found


SHARED_CLIENTS = {"aiohttp.ClientSession", "httpx.Client", "httpx.AsyncClient"}
UNSERVED = "; no route, dependency or middleware reaches this line (a CLI, a script, an SDK client or a job)"


def _served(call: ResolvedCall, context: Context) -> tuple[Step, ...] | None:
    """The chain from the entry point whose requests run the call, or None where no served request does."""
    reached = context.served.get(id(call.function)) if call.function is not None else None
    return None if reached is None else reached[1]


def _no_timeout(call: ResolvedCall, keywords: dict[str, ast.expr], context: Context) -> Finding | None:
    callee, node = call.callee, call.node
    assert isinstance(callee, str)
    timeout = keywords.get("timeout")
    missing = False
    if callee in REQUESTS_CALLS or callee in SESSION_CALLS:
        missing, case = timeout is None or _is_none(timeout), "requests"
        why = "requests waits forever by default"
    elif callee == "urllib.request.urlopen":
        missing, case = timeout is None and len(node.args) < 3, "urlopen"
        why = "urlopen waits forever by default"
    elif callee == "aiohttp.ClientSession":
        missing, case = timeout is None and not _requests_pass_timeouts(call), "aiohttp"
        why = "aiohttp's default is 5 minutes in total"
    elif callee in HTTPX_TIMEOUT_NONE:
        missing, case = _is_none(timeout), "httpx"
        why = "timeout=None turns httpx's 5 s default off"
    if not missing:
        return None
    message = f"`{short(node)}` ({callee}) has no timeout: {why}"
    chain = _served(call, context)
    severity: Severity | None = None
    if chain is None:
        severity, chain = "note", ()
        started = context.started.get(id(call.function)) if call.function is not None else None
        if started is not None:
            message += "; it runs at start-up or shut-down, on no request"
        elif call.function is None and callee in SHARED_CLIENTS:
            message += "; a client made at import is shared: the requests made through it may set their own"
        else:
            message += UNSERVED
    setting = "timeout=aiohttp.ClientTimeout(total=5)" if case == "aiohttp" else "timeout=5"
    fix = _with_keyword(call, "timeout", setting)
    return finding("no-timeout", call.module, node, message, chain, case=case, fix=fix, severity=severity)


AIOHTTP_REQUESTS = frozenset(["get", "post", "put", "patch", "delete", "head", "options", "request", "ws_connect"])


def _requests_pass_timeouts(call: ResolvedCall) -> bool:
    """Whether every request made through a session that never leaves its function passes a timeout of
    its own (`async with ClientSession() as s: await s.get(url, timeout=30)`, `ClientSession().get(url,
    timeout=5)`): the session's default then never applies. A session returned, stored or handed on
    may be used elsewhere, and is judged by its constructor alone."""
    function, node = call.function, call.node
    if function is None:
        return False
    names: set[str] = set()
    for statement in function.nodes:
        if isinstance(statement, ast.With | ast.AsyncWith):
            names.update(
                item.optional_vars.id
                for item in statement.items
                if item.context_expr is node and isinstance(item.optional_vars, ast.Name)
            )
        elif isinstance(statement, ast.Assign) and statement.value is node:
            if not (len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)):
                return False
            names.add(statement.targets[0].id)
    requests = 0
    for other in function.nodes:
        if isinstance(other, ast.Call) and isinstance(other.func, ast.Attribute):
            receiver = other.func.value
            if receiver is node or (isinstance(receiver, ast.Name) and receiver.id in names):
                if other.func.attr not in AIOHTTP_REQUESTS:
                    if other.func.attr == "close":
                        continue
                    return False
                given = next((k.value for k in other.keywords if k.arg == "timeout"), None)
                if given is None or _is_none(given) or any(k.arg is None for k in other.keywords):
                    return False
                requests += 1
                continue
        if isinstance(other, ast.Name) and other.id in names and not _receiver(other, function):
            # The session is passed, returned or stored: requests elsewhere may pass no timeout.
            return False
    return requests > 0


def _receiver(name: ast.Name, function: Function) -> bool:
    """Whether the name is only the receiver of an attribute call or the target of its own binding."""
    if isinstance(name.ctx, ast.Store):
        return True
    return any(
        isinstance(other, ast.Attribute) and other.value is name and other.attr in AIOHTTP_REQUESTS | {"close"}
        for other in function.nodes
    )


def _unbounded(call: ResolvedCall, keywords: dict[str, ast.expr], scope: Scope, context: Context) -> Finding | None:
    callee, node = call.callee, call.node
    assert isinstance(callee, str)
    message = None
    if callee in ASYNC_REDIS:
        # redis-py 8 gives the asyncio pool a ceiling of its own (`costs.toml`): nothing to say there.
        unbounded = RULES["unbounded-pool"].cost.exists_on(context.versions, "redis.asyncio")
        if unbounded and "max_connections" not in keywords and "connection_pool" not in keywords:
            message = "redis-py's asyncio pool before 8 has no ceiling by default (2**31 connections)"
            case, key, setting = "redis.asyncio", "max_connections", "max_connections=50"
    elif callee == "httpx.Limits" and _is_none(keywords.get("max_connections")):
        message = "max_connections=None lets httpx open a connection per concurrent request"
        case, key, setting = "httpx.Limits", "max_connections", "max_connections=100"
    elif callee == "aiohttp.TCPConnector" and "limit" in keywords:
        # aiohttp's default is limit=100 in all (and limit_per_host=0, no limit per host, within those
        # 100); a limit of 0 or None is no limit at all, whether written here or a default it is given.
        limit = keywords["limit"]
        value = scope.constant(limit)
        if value is None or value == 0:
            written = "" if isinstance(limit, ast.Constant) else f" (`{ast.unparse(limit)}` is {value!r})"
            message = f"limit={value!r}{written} lets aiohttp open a connection per concurrent request"
            case, key, setting = "aiohttp.TCPConnector", "limit", "limit=100"
    if message is None:
        return None
    fix = _with_keyword(call, key, setting)
    # A pool is made once and shared: it costs where the app serves, whether a request, the lifespan or
    # the import makes it. One left at its library's default is the app's configuration: a note.
    severity: Severity | None = None
    if case == "redis.asyncio":
        severity = "note"
    elif call.function is not None and all(id(call.function) not in r for r in (context.served, context.started)):
        severity = "note"
        message += UNSERVED
    message = f"`{short(node)}` ({callee}): {message}"
    return finding("unbounded-pool", call.module, node, message, case=case, fix=fix, severity=severity)


def _with_keyword(call: ResolvedCall, key: str, setting: str) -> str | None:
    """The flagged call with `key` set (replaced where it is given, added where not), as a diff of its line."""
    node = call.node
    parts = [segment(call.module, arg) for arg in node.args]
    parts += [
        setting if kw.arg == key else f"{kw.arg}={segment(call.module, kw.value)}" for kw in node.keywords if kw.arg
    ]
    if all(kw.arg != key for kw in node.keywords):
        parts.append(setting)
    return rewritten(call.module, node, f"{segment(call.module, node.func)}({', '.join(parts)})")
