"""blocking-call: blocking I/O reached from an `async def` entry point, through the app's own helpers.

An `async def` entry point runs on the event loop: any blocking call it reaches holds every request. So
does a `def` route that an own decorator wraps in an `async def`: the wrapper calls it on the loop. A
`def` route or dependency runs in FastAPI's thread pool instead, where blocking is what it is for; the
clients there that have an async API are one note about the app (rules/sync_routes.py). What blocks is
the table in `_libraries`. A blocking call the lifespan makes holds no request (it runs before the first
and after the last): a note.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tenk.doctor._context import Context, finding, offloaded, short
from tenk.doctor._findings import Finding, Severity
from tenk.doctor._libraries import blocking_family


def check(context: Context) -> Iterator[Finding]:
    graph = context.graph
    for entry in context.entries.entries:
        root = entry.function
        if not graph.runs_on_loop(root):
            # A `def` route or dependency runs in the thread pool: the app-wide note of rules/sync_routes.
            continue
        for function, chain, sites in graph.reach(root, context.depth):
            for site in sites:
                if not isinstance(site.callee, str) or site.awaited:
                    continue
                family = blocking_family(site.callee)
                if family is None:
                    continue
                if isinstance(site.node, ast.Call) and graph.scope(function).in_memory(site.node, site.callee):
                    continue
                where = f"{entry.kind} `{root.qualname}`"
                if not root.is_async:
                    where += " (a `def` that its decorator's `async def` wrapper calls on the loop)"
                if family == "sync-over-async":
                    message = (
                        f"`{short(site.node)}` ({site.callee}) runs a coroutine to completion on the event loop's "
                        f"thread, in {where}: it raises there, or blocks the loop under nest_asyncio; await it"
                    )
                    fix = None
                else:
                    when = " at start-up" if entry.kind == "lifespan" else ""
                    message = f"`{short(site.node)}` ({site.callee}) blocks the event loop{when}, in {where}"
                    fix = offloaded(function.module, site.node) if isinstance(site.node, ast.Call) else None
                # The lifespan runs before the first request and after the last: it holds none of them.
                severity: Severity | None = "note" if entry.kind == "lifespan" else None
                yield finding(
                    "blocking-call",
                    function.module,
                    site.node,
                    message,
                    (*entry.declared, *chain),
                    fix=fix,
                    severity=severity,
                )
