"""blocking-call: blocking I/O reached from an `async def` entry point, through the app's own helpers.

An `async def` entry point runs on the event loop: any blocking call it reaches holds every request. So
does a `def` route that an own decorator wraps in an `async def`: the wrapper calls it on the loop. A
`def` route or dependency runs in FastAPI's thread pool instead, where blocking is what it is for; the
clients there that have an async API are one note about the app (rules/sync_routes.py). What blocks is
the table in `_libraries`. A blocking call the lifespan makes holds no request (it runs before the first
and after the last): a note. So is one made once per process: in a `functools.cache`/`lru_cache`
function, or under `if self._client is None:` (or `if _cache is None:`, a `global`) whose body assigns
what it tests, or after `if X is not None: return X` that then assigns X. The first request pays for it,
not every one.
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
        found: list[tuple[int, bool, Finding]] = []
        # Calls reached on a path that runs every time: one reached once per process as well is not a note.
        every_time: set[int] = set()
        for reached in graph.reach(root, context.depth, into_cached=True):
            function, chain = reached.function, reached.chain
            guarded = graph.once_guarded(function)
            for site in reached.sites:
                if not isinstance(site.callee, str) or site.awaited:
                    continue
                family = blocking_family(site.callee)
                if family is None:
                    continue
                if isinstance(site.node, ast.Call) and graph.scope(function).in_memory(site.node, site.callee):
                    continue
                once = reached.once or id(site.node) in guarded
                if not once:
                    every_time.add(id(site.node))
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
                # The lifespan runs before the first request and after the last: it holds none of them. Work
                # a cache or a `None` guard makes once per process holds the first request only.
                severity: Severity | None = "note" if entry.kind == "lifespan" or once else None
                if once and entry.kind != "lifespan":
                    message += (
                        "; once per process (a cached function, or a guard that keeps what it makes): "
                        "the first request pays, not every one"
                    )
                found.append(
                    (
                        id(site.node),
                        once,
                        finding(
                            "blocking-call",
                            function.module,
                            site.node,
                            message,
                            (*entry.declared, *chain),
                            fix=fix,
                            severity=severity,
                        ),
                    )
                )
        yield from (item for node, once, item in found if not once or node not in every_time)
