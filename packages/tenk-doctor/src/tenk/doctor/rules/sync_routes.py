"""sync-route: the app's `def` routes and dependencies that wait on a client with an async API, as one note.

FastAPI runs a `def` route or dependency in anyio's thread pool (40 threads by default): a blocking call
there holds a thread for its wait, which is what the pool is for, and FastAPI's documented pattern for a
sync session. It costs something only app-wide: the 41st request waiting at once waits for a thread. So
this is advice about the app, reported once with a count, at the first place and with every other listed;
a client whose library has no async API of its own (requests, urllib, psycopg2, sqlite3) is not counted,
since the fix would be another library.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace

from tenk.doctor._context import Context, finding, rewritten, segment
from tenk.doctor._findings import Finding, Step
from tenk.doctor._follow import CallSite, step
from tenk.doctor._libraries import blocking_family
from tenk.doctor._project import Function

# A sync client's name (a prefix of what a call resolves to) and its own library's async counterpart.
ASYNC_APIS: dict[str, str] = {
    "redis.Redis": "redis.asyncio.Redis",
    "redis.client.Pipeline": "redis.asyncio.Redis().pipeline",
    "httpx.Client": "httpx.AsyncClient",
    "httpx": "httpx.AsyncClient",
    "psycopg_pool.ConnectionPool": "psycopg_pool.AsyncConnectionPool",
    "psycopg": "psycopg.AsyncConnection",
    "sqlalchemy.orm.Session": "sqlalchemy.ext.asyncio.AsyncSession",
    "sqlalchemy.Engine": "sqlalchemy.ext.asyncio.AsyncEngine",
    "sqlalchemy.Connection": "sqlalchemy.ext.asyncio.AsyncConnection",
    "pymongo": "pymongo.AsyncMongoClient",
}


def async_api(callee: str) -> tuple[str, str] | None:
    """The sync client a call is made on and its library's async counterpart, where it has one."""
    for client in sorted(ASYNC_APIS, key=len, reverse=True):
        if callee == client or callee.startswith((f"{client}.", f"{client}(")):
            return client, ASYNC_APIS[client]
    return None


@dataclass(frozen=True)
class _Site:
    function: Function
    site: CallSite
    client: str
    chain: tuple[Step, ...]
    entry: Function


def check(context: Context) -> Iterator[Finding]:
    graph = context.graph
    found: dict[int, _Site] = {}
    for entry in context.entries.of_kind("route", "dependency"):
        if graph.runs_on_loop(entry.function):
            continue
        for reached in graph.reach(entry.function, context.depth, into_async=False):
            function, chain = reached.function, reached.chain
            for site in reached.sites:
                if not isinstance(site.callee, str) or site.awaited or blocking_family(site.callee) is None:
                    continue
                if isinstance(site.node, ast.Call) and graph.scope(function).in_memory(site.node, site.callee):
                    continue
                api = async_api(site.callee)
                if api is not None and id(site.node) not in found:
                    found[id(site.node)] = _Site(function, site, api[0], (*entry.declared, *chain), entry.function)
    if not found:
        return
    sites = sorted(
        found.values(), key=lambda s: (str(s.function.module.path), s.site.node.lineno, s.site.node.col_offset)
    )
    clients = Counter(s.client for s in sites)
    entries = {id(s.entry) for s in sites}
    breakdown = ", ".join(
        f"{client} ({count} call{'s' if count > 1 else ''})" for client, count in clients.most_common()
    )
    counterparts = ", ".join(sorted({ASYNC_APIS[client] for client in clients}))
    message = (
        f"{len(entries)} sync routes and dependencies wait on clients in FastAPI's thread pool, each holding one of "
        f"its 40 threads for the wait: {breakdown}; their libraries have async APIs ({counterparts}). Advice about "
        "the app, not a defect here: it matters when more than 40 requests wait at once"
    )
    first = sites[0]
    module, node = first.function.module, first.site.node
    fix = rewritten(module, node, f"await {segment(module, node)}")
    if fix is not None:
        fix += f"  # in an async def, on {ASYNC_APIS[first.client]}"
    # One place a line: `conn.execute(sql).fetchall()` is two calls, one line to read.
    lines = {(module.path, node.lineno)}
    related = []
    for other in sites[1:]:
        place = (other.function.module.path, other.site.node.lineno)
        if place not in lines:
            lines.add(place)
            related.append(step(other.function, other.site.node))
    note = finding("sync-route", module, node, message, first.chain, fix=fix)
    yield replace(note, related=tuple(related))
