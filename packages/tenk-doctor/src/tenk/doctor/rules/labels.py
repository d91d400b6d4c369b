"""metric-label: a metric's label value taken from something the client chose.

Client-controlled: the request's URL, path, headers, query, cookies and client address; the ASGI scope's
`path`, `raw_path`, `query_string` and `headers`; and a route's own parameters (path and query values).
Values derived from these inside the function (`path = request.url.path`) are followed. The route's
template (`request.scope["route"].path`) and the method are not client-chosen series.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tenk.doctor._context import Context, finding
from tenk.doctor._findings import Finding
from tenk.doctor._names import Scope
from tenk.doctor._project import Function

REQUEST_TYPES = {"starlette.requests.Request", "starlette.requests.HTTPConnection", "starlette.websockets.WebSocket"}
CLIENT_ATTRIBUTES = {"url", "headers", "query_params", "path_params", "cookies", "client", "base_url"}
CLIENT_SCOPE_KEYS = {"path", "raw_path", "query_string", "headers", "client"}
NOT_CLIENT_VALUES = REQUEST_TYPES | {"fastapi.background.BackgroundTasks", "starlette.background.BackgroundTasks"}


def check(context: Context) -> Iterator[Finding]:
    routes = {id(entry.function) for entry in context.entries.of_kind("route")}
    with_labels = {
        id(function): function
        for module in context.target.modules
        for node, function in module.calls
        if function is not None and isinstance(node.func, ast.Attribute) and node.func.attr == "labels"
    }
    for function in with_labels.values():
        yield from _check_function(context, function, id(function) in routes)


def _check_function(context: Context, function: Function, is_route: bool) -> Iterator[Finding]:
    scope = context.graph.scope(function)
    requests, scopes, tainted = _sources(scope, function, is_route)
    body = function.nodes
    for _ in range(2):  # twice, for a value assigned after its first use in a loop
        for node in body:
            if isinstance(node, ast.Assign) and _tainted(node.value, requests, scopes, tainted):
                tainted.update(t.id for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name))
            elif (
                isinstance(node, ast.AnnAssign | ast.AugAssign)
                and node.value is not None
                and isinstance(node.target, ast.Name)
                and _tainted(node.value, requests, scopes, tainted)
            ):
                tainted.add(node.target.id)
    for node in body:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "labels":
            values = [*node.args, *(kw.value for kw in node.keywords)]
            if any(_tainted(value, requests, scopes, tainted) for value in values):
                message = (
                    f"`{ast.unparse(node)[:80]}` takes a label from a client-controlled value: "
                    "one time series per distinct value"
                )
                yield finding("metric-label", function.module, node, message)


def _sources(scope: Scope, function: Function, is_route: bool) -> tuple[set[str], set[str], set[str]]:
    requests: set[str] = set()
    scopes: set[str] = set()
    tainted: set[str] = set()
    args = function.node.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        kind = scope.annotation_type(arg.annotation) if arg.annotation is not None else None
        if kind in REQUEST_TYPES or (arg.annotation is None and arg.arg in ("request", "req", "websocket")):
            requests.add(arg.arg)
        elif arg.arg == "scope":
            scopes.add(arg.arg)
        elif (
            is_route
            and arg.arg not in ("self", "cls")
            and kind not in NOT_CLIENT_VALUES
            and not _is_dependency(scope, arg.annotation, _default(function, arg))
        ):
            tainted.add(arg.arg)
    return requests, scopes, tainted


def _default(function: Function, arg: ast.arg) -> ast.expr | None:
    args = function.node.args
    positional = [*args.posonlyargs, *args.args]
    if arg in positional:
        index = positional.index(arg) - (len(positional) - len(args.defaults))
        return args.defaults[index] if index >= 0 else None
    return args.kw_defaults[args.kwonlyargs.index(arg)]


def _is_dependency(scope: Scope, annotation: ast.expr | None, default: ast.expr | None) -> bool:
    """`Depends(...)` as the default, or in the annotation (through a module-level alias)."""
    exprs: list[ast.expr] = [e for e in (annotation, default) if e is not None]
    seen = 0
    while exprs and seen < 20:
        expr = exprs.pop()
        seen += 1
        for node in ast.walk(expr):
            if isinstance(node, ast.Call) and _name(node.func) in ("Depends", "Security"):
                return True
            if isinstance(node, ast.Name | ast.Attribute):
                alias = scope._alias(node, 0)
                if alias is not None:
                    exprs.append(alias[1])
    return False


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _tainted(expr: ast.expr, requests: set[str], scopes: set[str], tainted: set[str]) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and node.id in tainted:
            return True
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in requests
            and node.attr in CLIENT_ATTRIBUTES
        ):
            return True
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key, holder = node.slice.value, node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            first = node.args[0] if node.args else None
            key, holder = (first.value if isinstance(first, ast.Constant) else None), node.func.value
        if key in CLIENT_SCOPE_KEYS and _is_scope(holder, requests, scopes):
            return True
    return False


def _is_scope(holder: ast.expr, requests: set[str], scopes: set[str]) -> bool:
    if isinstance(holder, ast.Name):
        return holder.id in scopes
    return (
        isinstance(holder, ast.Attribute)
        and holder.attr == "scope"
        and isinstance(holder.value, ast.Name)
        and holder.value.id in requests
    )
