"""The rules: what each finds, why it costs, which study measured it, and the fix.

A figure is quoted only where a study measured it; the others say so, and the ladder
(`tenk doctor --ladder`) is how to measure them on your own machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenk.doctor._findings import Severity


@dataclass(frozen=True)
class Study:
    seed: str
    figure: str


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    title: str
    why: str
    study: Study | None
    fix: str


LADDER = Study(
    "001_1f6846444dcf4a5a.txt",
    "sync handlers doing blocking I/O: 1.68 RPS; the same handlers async: 69.6 RPS (41x) on 1 vCPU",
)
PRODUCT_API = Study(
    "000_47bb144eb86ea611.txt",
    "legacy sync Redis client per request: 4.2k RPS collapsing to p99 11.7 s and 34 % errors; "
    "async client and pool: 10.4k RPS at p99 118 ms (with other changes, on 12 nodes)",
)
POOLING = Study(
    "003_15a8e742bae16626.txt",
    "a psycopg connection per request: ~200 RPS, then 'too many clients' crashes; a pool: 900 RPS, no errors",
)
ACCESS_LOG = Study(
    "003_15a8e742bae16626.txt",
    "ping with uvicorn's access log: 800-1200 RPS; without: 3100 RPS; --log-level error: 4700 RPS",
)
WORKERS = Study("001_1f6846444dcf4a5a.txt", "1 -> 2 uvicorn workers: 69.6 -> 81 RPS (+16 %); gunicorn: 90 RPS")
SOCKETS = Study(
    "004_8c05b7194527e36c.txt",
    "new asyncpg and Redis connections per request exhausted TCP ports; pooling was one step of 1.2k RPS",
)
SLOW_UPSTREAM = Study(
    "001_1f6846444dcf4a5a.txt",
    "upstream at P50 4 s / P99 22 s: 'your real limits become semaphores, timeouts and connection ceilings'",
)
SYNC_VS_ASYNC = Study("002_de999b1052d1e64f.txt", "sync WSGI 274 RPS -> async FastAPI 909 RPS on 2 vCPU")
LABELS = Study(
    "000_47bb144eb86ea611.txt",
    "the published 'optimized' code labels errors with f'/products/{product_id}' over 10k products "
    "(a series per product; the cost was not measured)",
)

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
            LADDER,
            "-    row = conn.execute(sql)\n+    row = await asyncio.to_thread(conn.execute, sql)  # or an async driver",
        ),
        Rule(
            "per-request-client",
            "error",
            "client, pool or connection made per request",
            "each request pays a TCP (and TLS, auth) handshake and leaves sockets to close; under load the "
            "server's connection limit or the host's ports run out",
            POOLING,
            "-    pool = ConnectionPool.from_url(url)  # in the handler or dependency\n"
            "+    app.state.pool = ConnectionPool.from_url(url)  # once, in the lifespan; handlers reuse it",
        ),
        Rule(
            "no-timeout",
            "warning",
            "outbound HTTP with no timeout",
            "a slow or hung upstream parks the request (and its worker, thread or connection) for as long as "
            "the upstream likes",
            SLOW_UPSTREAM,
            "-    requests.get(url)\n+    requests.get(url, timeout=5)",
        ),
        Rule(
            "unbounded-pool",
            "warning",
            "connection pool with no limit",
            "a pool without a ceiling opens a new connection for every concurrent request in a spike, until "
            "the server or the host's ports refuse",
            SOCKETS,
            "-    ConnectionPool.from_url(url)\n+    ConnectionPool.from_url(url, max_connections=50)",
        ),
        Rule(
            "base-http-middleware",
            "warning",
            "BaseHTTPMiddleware or @app.middleware('http') on the request path",
            "each request through it costs a task group and a pair of memory streams; starlette's and "
            "FastAPI's maintainers advise pure ASGI middleware",
            None,
            "-class Timing(BaseHTTPMiddleware):\n-    async def dispatch(self, request, call_next): ...\n"
            "+class Timing:\n+    async def __call__(self, scope, receive, send): ...  # wrap `send`",
        ),
        Rule(
            "metric-label",
            "error",
            "metric label from a client-controlled value",
            "every distinct path or header value makes a new time series: memory and scrape time grow "
            "without bound, and any client can make them grow",
            LABELS,
            '-    LATENCY.labels(request.url.path)\n+    LATENCY.labels(request.scope["route"].path)  # the template',
        ),
        Rule(
            "access-log",
            "warning",
            "server access log on",
            "a formatted, written line per request on the event loop's thread",
            ACCESS_LOG,
            "-    uvicorn app:app\n+    uvicorn app:app --no-access-log",
        ),
        Rule(
            "h11-parser",
            "warning",
            "pure-Python HTTP parser (h11)",
            "h11 parses every request in Python; httptools does it in C (the studies did not isolate this: "
            "the ladder measures it)",
            None,
            "-    uvicorn app:app --http h11\n+    uvicorn app:app --http httptools  # pip install 'uvicorn[standard]'",
        ),
        Rule(
            "no-uvloop",
            "warning",
            "asyncio's default event loop instead of uvloop",
            "the default loop's I/O is slower than uvloop's (the product-API study ran uvicorn[uvloop]; no study "
            "isolated it: the ladder measures it)",
            None,
            "-    uvicorn app:app --loop asyncio\n+    uvicorn app:app --loop uvloop  # uvicorn[standard] has it",
        ),
        Rule(
            "one-worker",
            "warning",
            "one worker where the deployment has more cores",
            "one Python process uses one core for its CPU work; the others idle",
            WORKERS,
            "-    uvicorn app:app\n+    uvicorn app:app --workers 2  # one per core the deployment gives",
        ),
        Rule(
            "sync-route",
            "warning",
            "sync `def` route calling a client that has an async API",
            "FastAPI runs `def` routes and dependencies in a thread pool of 40 threads (anyio's default): the "
            "41st concurrent request waits for a thread, and each thread holds a connection while it waits",
            SYNC_VS_ASYNC,
            "-def get_item(r: redis.Redis): return r.get(key)\n"
            "+async def get_item(r: redis.asyncio.Redis): return await r.get(key)",
        ),
        Rule(
            "thread-hop",
            "warning",
            "`def` route or dependency that waits on nothing, run in the thread pool",
            "FastAPI sends every `def` route and dependency to a worker thread and back, on every request; code "
            "that makes no call that can wait gains nothing there (in process, FastAPI 0.165, pinned to one core: "
            "168 µs of CPU a request for a `def` route, 122 µs for a `def` dependency, against their `async def` "
            "twins; `python -m benchmarks.thread_hop`)",
            None,
            "-def current_settings(request: Request): return request.app.state.settings\n"
            "+async def current_settings(request: Request): return request.app.state.settings",
        ),
        Rule(
            "double-validation",
            "warning",
            "response model validated twice",
            "the route returns a model it has just validated, and FastAPI validates it again against the "
            "response model before serialising it",
            None,
            "-@app.get('/p', response_model=Product)\n-def get(): return Product(**row)\n"
            "+@app.get('/p', response_class=Response)\n"
            "+def get(): return Response(Product(**row).model_dump_json(), media_type='application/json')",
        ),
        Rule(
            "dump-only-model",
            "warning",
            "pydantic model built only to be dumped",
            "building the model validates every field, and the dump walks them again, to produce the dict or "
            "JSON the data already was",
            None,
            "-    return Product(**row).model_dump()\n+    return row  # or validate once, where the data comes in",
        ),
        Rule(
            "suppression-reason",
            "error",
            "suppression without a reason",
            "a `# tenk: ignore[rule]` comment must say why, after a colon; without a reason it does not apply",
            None,
            "-    x()  # tenk: ignore[blocking-call]\n+    x()  # tenk: ignore[blocking-call]: runs once at start-up",
        ),
    )
}
