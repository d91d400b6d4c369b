"""The app's entry points: what the framework calls per request (routes, dependencies, middleware) and
at start-up (lifespans), found from decorators and registration calls in FastAPI's and Starlette's styles.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

from tenk.doctor._follow import Graph, called_name, is_cached
from tenk.doctor._names import Scope
from tenk.doctor._project import ClassInfo, Function, Module

Kind = Literal["route", "dependency", "middleware", "lifespan"]
ROUTE_DECORATORS = {
    "get",
    "post",
    "put",
    "patch",
    "delete",
    "options",
    "head",
    "trace",
    "api_route",
    "route",
    "websocket",
}
ROUTE_CALLS = {"add_api_route", "add_route", "add_websocket_route", "add_api_websocket_route"}
ROUTE_CLASSES = {"Route", "APIRoute", "WebSocketRoute", "APIWebSocketRoute"}
APP_CLASSES = {"FastAPI", "Starlette", "APIRouter", "Router"}
REGISTRATIONS = {
    "Depends",
    "Security",
    *ROUTE_CALLS,
    *ROUTE_CLASSES,
    *APP_CLASSES,
    "add_event_handler",
    "add_middleware",
    "Middleware",
}
BASE_HTTP_MIDDLEWARE = "starlette.middleware.base.BaseHTTPMiddleware"


@dataclass(frozen=True)
class Entry:
    function: Function
    kind: Kind
    # The decorator or registration call, for what it says about the route (`response_model`).
    registration: ast.Call | None = None


@dataclass(frozen=True)
class HttpMiddleware:
    """A `BaseHTTPMiddleware` subclass or an `@app.middleware("http")` function (rule base-http-middleware)."""

    module: Module
    node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.Call


@dataclass
class EntryPoints:
    entries: list[Entry]
    http_middleware: list[HttpMiddleware]

    def of_kind(self, *kinds: Kind) -> Iterator[Entry]:
        return (entry for entry in self.entries if entry.kind in kinds)


def _string(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _argument(call: ast.Call, index: int, name: str) -> ast.expr | None:
    if len(call.args) > index and not isinstance(call.args[index], ast.Starred):
        return call.args[index]
    return _keyword(call, name)


def find_entry_points(graph: Graph, modules: list[Module]) -> EntryPoints:
    found = EntryPoints([], [])
    seen: set[tuple[int, str]] = set()

    def add(function: Function | None, kind: Kind, registration: ast.Call | None = None) -> None:
        if function is None or (id(function), kind) in seen:
            return
        if kind == "dependency" and is_cached(function):
            return
        seen.add((id(function), kind))
        found.entries.append(Entry(function, kind, registration))

    for module in modules:
        for defined in module.all_functions:
            for decorator in defined.node.decorator_list:
                if not isinstance(decorator, ast.Call) or not isinstance(decorator.func, ast.Attribute):
                    continue
                name = decorator.func.attr
                if name in ROUTE_DECORATORS and (_string(_argument(decorator, 0, "path"))):
                    add(defined, "route", decorator)
                elif name == "middleware" and decorator.args and _string(decorator.args[0]):
                    add(defined, "middleware")
                    found.http_middleware.append(HttpMiddleware(module, defined.node))
                elif name == "on_event":
                    add(defined, "lifespan")
        for info in module.all_classes:
            scope = graph.module_scope(module)
            if BASE_HTTP_MIDDLEWARE in scope.bases(info):
                found.http_middleware.append(HttpMiddleware(module, info.node))
                add(scope.method(info, "dispatch"), "middleware")
        top = graph.module_scope(module)
        for node, function in module.calls:
            if called_name(node) in REGISTRATIONS:
                _registration(graph.scope(function) if function is not None else top, node, add, found)
    return found


def _function(scope: Scope, expr: ast.expr | None) -> Function | None:
    if expr is None:
        return None
    resolved = scope.resolve(expr)
    return resolved if isinstance(resolved, Function) else None


def _registration(scope: Scope, call: ast.Call, add: _Add, found: EntryPoints) -> None:
    name = called_name(call)
    if name in ("Depends", "Security"):
        dependency = _argument(call, 0, "dependency")
        # `Depends(a if flag else b)`: either may be the dependency.
        choices = [dependency.body, dependency.orelse] if isinstance(dependency, ast.IfExp) else [dependency]
        for choice in choices:
            resolved = scope.resolve(choice) if choice is not None else None
            if isinstance(resolved, Function):
                add(resolved, "dependency")
            elif isinstance(resolved, ClassInfo):
                add(resolved.methods.get("__call__") or resolved.methods.get("__init__"), "dependency")
    elif name in ROUTE_CALLS or name in ROUTE_CLASSES:
        add(_function(scope, _argument(call, 1, "endpoint")), "route", call)
    elif name in APP_CLASSES:
        add(_function(scope, _keyword(call, "lifespan")), "lifespan")
        for key in ("on_startup", "on_shutdown"):
            handlers = _keyword(call, key)
            if isinstance(handlers, ast.List | ast.Tuple):
                for handler in handlers.elts:
                    add(_function(scope, handler), "lifespan")
    elif name == "add_event_handler":
        add(_function(scope, _argument(call, 1, "func")), "lifespan")
    elif name in ("add_middleware", "Middleware"):
        _middleware(scope, call, add, found)


def _middleware(scope: Scope, call: ast.Call, add: _Add, found: EntryPoints) -> None:
    cls = _argument(call, 0, "middleware_class") or _argument(call, 0, "cls")
    resolved = scope.resolve(cls) if cls is not None else None
    if resolved == BASE_HTTP_MIDDLEWARE:
        found.http_middleware.append(HttpMiddleware(scope.module, call))
        add(_function(scope, _keyword(call, "dispatch")), "middleware")
    elif isinstance(resolved, ClassInfo) and BASE_HTTP_MIDDLEWARE not in scope.bases(resolved):
        add(scope.method(resolved, "__call__"), "middleware")


class _Add(Protocol):
    def __call__(self, function: Function | None, kind: Kind, registration: ast.Call | None = None) -> None: ...
