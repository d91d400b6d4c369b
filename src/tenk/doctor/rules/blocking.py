"""blocking-call and sync-route: blocking I/O reached from an entry point, through the app's own helpers.

An `async def` entry point runs on the event loop: any blocking call it reaches holds every request
(blocking-call). A `def` route or dependency runs in FastAPI's thread pool: a client with an async API
called through its sync one holds one of the 40 threads for the whole wait (sync-route).
"""

from __future__ import annotations

from collections.abc import Iterator

from tenk.doctor._context import Context, finding, short
from tenk.doctor._findings import Finding

HTTP_VERBS = frozenset({"get", "post", "put", "patch", "delete", "head", "options", "request", "send", "stream"})
# A call that blocks, and whether the library has an async API ("client") or not (sleep, file, process).
BLOCKING_CALLS: dict[str, str] = {
    "time.sleep": "sleep",
    "builtins.open": "file",
    "builtins.input": "file",
    "urllib.request.urlopen": "client",
    "psycopg.connect": "client",
    "psycopg.Connection.connect": "client",
    "psycopg2.connect": "client",
    "sqlite3.connect": "client",
    "pymysql.connect": "client",
    "MySQLdb.connect": "client",
    "subprocess.run": "process",
    "subprocess.call": "process",
    "subprocess.check_call": "process",
    "subprocess.check_output": "process",
    "subprocess.Popen": "process",
    "os.system": "process",
    "os.popen": "process",
    **{f"requests.{verb}": "client" for verb in HTTP_VERBS - {"send", "stream"}},
    **{f"httpx.{verb}": "client" for verb in HTTP_VERBS - {"send"}},
}
ANY = frozenset({"*"})
# Methods that block on an instance of a sync client: type -> (methods, or ANY; the exceptions to ANY).
BLOCKING_METHODS: dict[str, tuple[frozenset[str], frozenset[str], str]] = {
    "redis.Redis": (ANY, frozenset({"pipeline", "lock", "pubsub", "register_script", "from_url"}), "client"),
    "redis.client.Pipeline": (frozenset({"execute"}), frozenset(), "client"),
    "httpx.Client": (HTTP_VERBS, frozenset(), "client"),
    "requests.Session": (HTTP_VERBS, frozenset(), "client"),
    "psycopg.Connection": (frozenset({"execute", "commit", "rollback", "connect"}), frozenset(), "client"),
    "psycopg.Cursor": (
        frozenset({"execute", "executemany", "fetchone", "fetchall", "fetchmany"}),
        frozenset(),
        "client",
    ),
    "psycopg_pool.ConnectionPool": (frozenset({"connection", "getconn", "wait", "open"}), frozenset(), "client"),
    "psycopg2.connection": (frozenset({"commit", "rollback"}), frozenset(), "client"),
    "psycopg2.cursor": (
        frozenset({"execute", "executemany", "fetchone", "fetchall", "fetchmany"}),
        frozenset(),
        "client",
    ),
    "sqlite3.Connection": (frozenset({"execute", "executemany", "executescript", "commit"}), frozenset(), "client"),
    "sqlite3.Cursor": (
        frozenset({"execute", "executemany", "fetchone", "fetchall", "fetchmany"}),
        frozenset(),
        "client",
    ),
    "pymysql.Connection": (frozenset({"commit", "rollback", "query", "ping"}), frozenset(), "client"),
    "pymysql.cursors.Cursor": (frozenset({"execute", "executemany", "fetchone", "fetchall"}), frozenset(), "client"),
    "sqlalchemy.orm.Session": (
        frozenset({"execute", "query", "commit", "get", "scalar", "scalars", "flush", "refresh", "merge"}),
        frozenset(),
        "client",
    ),
    "sqlalchemy.Engine": (frozenset({"connect", "begin", "execute"}), frozenset(), "client"),
    "sqlalchemy.Connection": (frozenset({"execute", "commit", "scalar", "scalars"}), frozenset(), "client"),
    "pathlib.Path": (
        frozenset({"read_text", "write_text", "read_bytes", "write_bytes", "open"}),
        frozenset(),
        "file",
    ),
}


def blocking_family(callee: str) -> str | None:
    if callee in BLOCKING_CALLS:
        return BLOCKING_CALLS[callee]
    kind, sep, method = callee.rpartition("().")
    if not sep or kind not in BLOCKING_METHODS:
        return None
    methods, exceptions, family = BLOCKING_METHODS[kind]
    if method in exceptions or (methods is not ANY and method not in methods) or method.startswith("_"):
        return None
    return family


def check(context: Context) -> Iterator[Finding]:
    graph = context.graph
    for entry in context.entries.entries:
        root = entry.function
        on_loop = root.is_async
        if not on_loop and entry.kind not in ("route", "dependency"):
            continue
        rule = "blocking-call" if on_loop else "sync-route"
        for function, chain in graph.walk(root, context.depth, into_async=on_loop):
            for site in graph.calls(function):
                if not isinstance(site.callee, str) or site.awaited:
                    continue
                family = blocking_family(site.callee)
                if family is None or (not on_loop and family != "client"):
                    continue
                where = f"{entry.kind} `{root.qualname}`"
                if on_loop:
                    when = " at start-up" if entry.kind == "lifespan" else ""
                    message = f"`{short(site.node)}` ({site.callee}) blocks the event loop{when}, in {where}"
                else:
                    message = (
                        f"`{short(site.node)}` ({site.callee}) holds one of the 40 threads of the pool for its wait, "
                        f"in sync {where}; the library has an async API"
                    )
                yield finding(rule, function.module, site.node, message, chain)
