"""The rules: what each finds, why it costs, and the fix.

What each pattern costs is not written here: `costs.toml` holds what tenk counted, the lab's verdicts
and the studies' figures, and every finding quotes it from there (`Rule.cost`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tenk.doctor._costs import Cost, table
from tenk.doctor._findings import Finding, Severity


@dataclass(frozen=True)
class Rule:
    id: str
    # Where the pattern costs a served request something at that line: `warning` or `error`. `note`: advice
    # about the app as a whole (its server's configuration), reported once. A finding may say `note` where
    # its rule says more (`Finding.severity`): no served request pays for that line.
    severity: Severity
    title: str
    why: str
    fix: str

    @property
    def cost(self) -> Cost:
        return table().costs[self.id]


# Fixed by how the app is served, not by its code: the ladder gives each a rung of its own.
CONFIGURATION_RULES = frozenset({"access-log", "h11-parser", "no-uvloop", "one-worker"})

RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "blocking-call",
            "error",
            "blocking call on the event loop",
            "an `async def` route, dependency, middleware or lifespan runs on the event loop; a blocking call "
            "there stops every other request until it returns",
            "-    row = conn.execute(sql)\n+    row = await asyncio.to_thread(conn.execute, sql)  # or an async driver",
        ),
        Rule(
            "per-request-client",
            "warning",
            "client, pool or connection made per request",
            "each request pays a TCP (and TLS, auth) handshake and leaves sockets to close; under load the "
            "server's connection limit or the host's ports run out",
            "-    pool = ConnectionPool.from_url(url)  # in the handler or dependency\n"
            "+    app.state.pool = ConnectionPool.from_url(url)  # once, in the lifespan; handlers reuse it",
        ),
        Rule(
            "no-timeout",
            "warning",
            "outbound HTTP with no timeout",
            "a slow or hung upstream parks the request (and its worker, thread or connection) for as long as "
            "the upstream likes",
            "-    requests.get(url)\n+    requests.get(url, timeout=5)",
        ),
        Rule(
            "unbounded-pool",
            "warning",
            "connection pool with no limit",
            "a pool without a ceiling opens a new connection for every concurrent request in a spike, until "
            "the server or the host's ports refuse",
            "-    ConnectionPool.from_url(url)\n+    ConnectionPool.from_url(url, max_connections=50)",
        ),
        Rule(
            "base-http-middleware",
            "warning",
            "BaseHTTPMiddleware or @app.middleware('http') on the request path",
            "each request through it costs a task group and a pair of memory streams; starlette's and "
            "FastAPI's maintainers advise pure ASGI middleware",
            "-class Timing(BaseHTTPMiddleware):\n-    async def dispatch(self, request, call_next): ...\n"
            "+class Timing:\n+    async def __call__(self, scope, receive, send): ...  # wrap `send`",
        ),
        Rule(
            "metric-label",
            "error",
            "metric label from a client-controlled value",
            "every distinct path or header value makes a new time series: memory and scrape time grow "
            "without bound, and any client can make them grow",
            '-    LATENCY.labels(request.url.path)\n+    LATENCY.labels(request.scope["route"].path)  # the template',
        ),
        Rule(
            "access-log",
            "note",
            "server access log on",
            "a formatted, written line per request on the event loop's thread",
            "-    uvicorn app:app\n+    uvicorn app:app --no-access-log",
        ),
        Rule(
            "h11-parser",
            "note",
            "pure-Python HTTP parser (h11)",
            "h11 parses every request in Python; httptools does it in C (the studies did not isolate this: "
            "the ladder measures it)",
            "-    uvicorn app:app --http h11\n+    uvicorn app:app --http httptools  # pip install 'uvicorn[standard]'",
        ),
        Rule(
            "no-uvloop",
            "note",
            "asyncio's default event loop instead of uvloop",
            "the default loop's I/O is slower than uvloop's (the product-API study ran uvicorn[uvloop]; no study "
            "isolated it: the ladder measures it)",
            "-    uvicorn app:app --loop asyncio\n+    uvicorn app:app --loop uvloop  # uvicorn[standard] has it",
        ),
        Rule(
            "one-worker",
            "note",
            "one worker where the deployment has more cores",
            "one Python process uses one core for its CPU work; the others idle",
            "-    uvicorn app:app\n+    uvicorn app:app --workers 2  # one per core the deployment gives",
        ),
        Rule(
            "sync-route",
            "note",
            "sync `def` routes and dependencies waiting on clients that have an async API (app-wide)",
            "FastAPI runs `def` routes and dependencies in a thread pool of 40 threads (anyio's default): each "
            "holds a thread for its wait, and the 41st request waiting at once waits for a thread; the fix is "
            "the same library's async client in an `async def`, where the wait holds no thread",
            "-def get_item(r: redis.Redis): return r.get(key)\n"
            "+async def get_item(r: redis.asyncio.Redis): return await r.get(key)",
        ),
        Rule(
            "thread-hop",
            "warning",
            "`def` route or dependency that waits on nothing, run in the thread pool",
            "FastAPI sends every `def` route and dependency to a worker thread and back, on every request (a "
            "`def` route with a response model twice: its validation goes to the pool too); code that makes no "
            "call that can wait gains nothing there",
            "-def current_settings(request: Request): return request.app.state.settings\n"
            "+async def current_settings(request: Request): return request.app.state.settings",
        ),
        Rule(
            "double-validation",
            "warning",
            "response model validated twice (pydantic 1)",
            "on pydantic 1, FastAPI dumps a returned model to a dict and validates the dict again against the "
            "response model; the route had just validated it, building it",
            "-    return Product(**row)  # under response_model=Product\n"
            "+    return row  # FastAPI validates it once, against the response model",
        ),
        Rule(
            "dump-only-model",
            "warning",
            "pydantic model built only to be dumped back to the mapping it came from",
            "building the model validates every field, and the dump walks them again, to produce the very "
            "mapping it was built from (its fields are the mapping's)",
            "-    return Product(**product.model_dump()).model_dump()\n"
            "+    return product.model_dump()  # the same fields: the dump it was built from",
        ),
        Rule(
            "suppression-reason",
            "error",
            "suppression without a reason",
            "a `# tenk: ignore[rule]` comment must say why, after a colon; without a reason it does not apply",
            "-    x()  # tenk: ignore[blocking-call]\n+    x()  # tenk: ignore[blocking-call]: runs once at start-up",
        ),
    )
}


def severity_of(finding: Finding) -> Severity:
    """The finding's own severity where it has one (a note where no served request pays), else its rule's."""
    return finding.severity or RULES[finding.rule].severity
