"""thread-hop: a `def` route or dependency that waits on nothing, handed to a thread on every request.

FastAPI awaits an `async def` route or dependency on the event loop and sends a plain `def` one to
anyio's thread pool: a hand-off to a worker thread and back, on every request, which the code itself
never needed if it makes no call that can wait. Only what is known never to wait is let through: the
app's own functions, followed to the usual depth, and a short list of builtins. Anything else may block
(a client, a file, a settings class that reads `.env`), and blocking code belongs in the thread, so the
rule stays silent on it. Methods are left alone: `Depends(SomeClass)` constructs the class, which FastAPI
always runs in the pool, whatever the methods are.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tenk.doctor._context import Context, finding
from tenk.doctor._entrypoints import Entry
from tenk.doctor._findings import Finding
from tenk.doctor._follow import CallSite, Graph, step

# Calls that never wait: computing with values the function already has.
NEVER_WAIT = frozenset(
    f"builtins.{name}"
    for name in (
        "abs",
        "all",
        "any",
        "bool",
        "bytes",
        "dict",
        "divmod",
        "enumerate",
        "float",
        "frozenset",
        "getattr",
        "hasattr",
        "int",
        "isinstance",
        "issubclass",
        "len",
        "list",
        "max",
        "min",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
    )
) | frozenset({"fastapi.HTTPException", "fastapi.exceptions.HTTPException", "starlette.exceptions.HTTPException"})


def _never_waits(graph: Graph, site: CallSite, walked: set[int]) -> bool:
    own = graph.callees(site.callee)
    if own:
        return all(id(function) in walked for function, _ in own)
    return isinstance(site.callee, str) and site.callee in NEVER_WAIT


def check(context: Context) -> Iterator[Finding]:
    graph = context.graph
    for entry in context.entries.of_kind("route", "dependency"):
        root = entry.function
        if graph.runs_on_loop(root) or root.owner is not None:
            continue
        reached = [function for function, _ in graph.walk(root, context.depth, into_async=False)]
        walked = {id(function) for function in reached}
        if all(_never_waits(graph, site, walked) for function in reached for site in graph.calls(function)):
            message = (
                f"sync {entry.kind} `{root.qualname}` makes no call that can wait, yet FastAPI hands it to its "
                "thread pool on every request: declare it `async def`"
            )
            case = entry.kind if entry.kind == "dependency" or _validates(entry) else "route-bare"
            yield finding("thread-hop", root.module, root.node, message, (step(root, root.node),), case=case)


def _validates(entry: Entry) -> bool:
    """Whether FastAPI validates what the route returns (a response model, given or from the annotation),
    which for a `def` route is a second hand-off to the pool."""
    registration = entry.registration
    model = (
        next((kw.value for kw in registration.keywords if kw.arg == "response_model"), None) if registration else None
    )
    if model is not None:
        return not (isinstance(model, ast.Constant) and model.value is None)
    return entry.function.node.returns is not None
