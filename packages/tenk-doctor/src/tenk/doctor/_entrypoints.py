"""The app's entry points: what the framework calls per request (routes, dependencies, middleware) and
at start-up (lifespans), found from decorators and registration calls in FastAPI's and Starlette's styles.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, Protocol

from tenk.doctor._findings import Step
from tenk.doctor._follow import Graph, called_name, is_cached, step
from tenk.doctor._libraries import is_base_http_middleware
from tenk.doctor._names import Instance, Scope
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


def _subclasses_base_http_middleware(scope: Scope, info: ClassInfo) -> bool:
    """Derives from BaseHTTPMiddleware, directly or through a known third-party subclass of it."""
    return any(is_base_http_middleware(base) for base in scope.bases(info))


@dataclass(frozen=True)
class Entry:
    function: Function
    kind: Kind
    # The decorator or registration call, for what it says about the route (`response_model`).
    registration: ast.Call | None = None
    # For a dependency, where it is declared: the route (or dependency) whose signature or decorator
    # names it, and the `Depends(...)` there; the first one found. Its findings' chains start there.
    declared: tuple[Step, ...] = ()


@dataclass(frozen=True)
class HttpMiddleware:
    """A `BaseHTTPMiddleware` subclass or an `@app.middleware("http")` function (rule base-http-middleware);
    a call, where a third-party subclass of it is added (`app.add_middleware(SlowAPIMiddleware)`)."""

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

    def add(
        function: Function | None, kind: Kind, registration: ast.Call | None = None, declared: tuple[Step, ...] = ()
    ) -> None:
        if function is None or (id(function), kind) in seen:
            return
        if kind == "dependency" and is_cached(function):
            return
        seen.add((id(function), kind))
        found.entries.append(Entry(function, kind, registration, declared))

    declarers = _declarers(modules)
    loop_bindings: dict[int, dict[int, _Loop]] = {}

    def loop_names(module: Module) -> dict[int, _Loop]:
        if id(module) not in loop_bindings:
            loop_bindings[id(module)] = _loop_bindings(module)
        return loop_bindings[id(module)]

    names: set[str] = set()

    def referenced(scope: Scope) -> set[str]:
        if not names:
            names.update(_referenced_names(scope.project.modules.values()))
        return names

    # By path, so that a directory and `module:app` meet each dependency at the same first declaration.
    for module in sorted(modules, key=lambda module: str(module.path)):
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
            if _subclasses_base_http_middleware(scope, info) and info.node.name in referenced(scope):
                found.http_middleware.append(HttpMiddleware(module, info.node))
                add(scope.method(info, "dispatch"), "middleware")
        top = graph.module_scope(module)
        # In source order: a dependency declared in several places is reached from its first.
        for node, function in sorted(module.calls, key=lambda pair: (pair[0].lineno, pair[0].col_offset)):
            if called_name(node) in REGISTRATIONS:
                scope = graph.scope(function) if function is not None else top
                _registration(scope, node, add, found, declarers.get(id(node)), loop_names)
    return found


def _referenced_names(modules: Iterable[Module]) -> set[str]:
    """Every name read, attribute named, and last part of a dotted string, in the modules: a class none
    of them names (`RequestCancelledMiddleware` defined and never added) is never added to an app."""
    found = {""}
    for module in modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                found.add(node.id)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
                found.add(node.value.rsplit(".", 1)[-1].rsplit(":", 1)[-1])
            elif isinstance(node, ast.alias) and node.asname is not None:
                # `from m import X as Y`: what is read later is `Y`.
                found.add(node.name.rsplit(".", 1)[-1])
    return found


def _function(scope: Scope, expr: ast.expr | None) -> Function | None:
    if expr is None:
        return None
    resolved = scope.resolve(expr)
    return resolved if isinstance(resolved, Function) else None


def _declarers(modules: list[Module]) -> dict[int, Function]:
    """The function in whose signature or decorators each call is written: a route's `Depends(...)`."""
    found: dict[int, Function] = {}
    for module in modules:
        for function in module.all_functions:
            for part in (function.node.args, *function.node.decorator_list):
                for node in ast.walk(part):
                    if isinstance(node, ast.Call):
                        found.setdefault(id(node), function)
    return found


def _registration(
    scope: Scope,
    call: ast.Call,
    add: _Add,
    found: EntryPoints,
    declarer: Function | None = None,
    loops: Callable[[Module], dict[int, _Loop]] | None = None,
) -> None:
    name = called_name(call)
    if name in ("Depends", "Security"):
        declared = (step(declarer, declarer.node), step(declarer, call)) if declarer is not None else ()
        dependency = _argument(call, 0, "dependency")
        # `Depends(a if flag else b)`: either may be the dependency.
        choices = [dependency.body, dependency.orelse] if isinstance(dependency, ast.IfExp) else [dependency]
        for choice in choices:
            resolved = scope.resolve(choice) if choice is not None else None
            if isinstance(resolved, Function):
                add(resolved, "dependency", call, declared)
            elif isinstance(resolved, ClassInfo):
                add(resolved.methods.get("__call__") or resolved.methods.get("__init__"), "dependency", call, declared)
            elif isinstance(resolved, Instance):
                # `Depends(RateLimit(60))`: FastAPI calls the instance.
                add(scope.method(resolved.cls, "__call__"), "dependency", call, declared)
    elif name in ROUTE_CALLS or name in ROUTE_CLASSES:
        endpoint = _argument(call, 1, "endpoint")
        runs = _endpoints(scope, endpoint)
        if not runs and isinstance(endpoint, ast.Name) and loops is not None:
            # `[Route(path, endpoint) for path, endpoint in ENDPOINTS]`, `add_api_route` in a loop.
            for where, value in _looped(scope, endpoint.id, loops(scope.module).get(id(endpoint))):
                runs.extend(_endpoints(where, value))
        for run in runs:
            add(run, "route", call)
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


HTTP_METHODS = ("get", "head", "post", "put", "patch", "delete", "options")


def _endpoints(scope: Scope, expr: ast.expr | None) -> list[Function]:
    """What a route's endpoint runs: the function, or each HTTP method of a class endpoint (Starlette's
    `HTTPEndpoint` subclasses, `Route("/items", Items)`)."""
    resolved = scope.resolve(expr) if expr is not None else None
    if isinstance(resolved, Function):
        return [resolved]
    if isinstance(resolved, ClassInfo):
        methods = (scope.method(resolved, verb) for verb in HTTP_METHODS)
        return [method for method in methods if method is not None]
    return []


# A loop's target, and what it iterates.
_Loop = tuple[ast.expr, ast.expr]
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _loop_bindings(module: Module) -> dict[int, _Loop]:
    """Each name read in the body of a `for` loop or a comprehension that binds it (the innermost
    one): the loop's target and what it iterates."""
    found: dict[int, _Loop] = {}
    # Breadth first: an inner loop is met after the loops around it, and its binding wins.
    for node in ast.walk(module.tree):
        if isinstance(node, ast.For | ast.AsyncFor):
            loops: list[tuple[ast.expr, ast.expr, list[ast.AST]]] = [(node.target, node.iter, list(node.body))]
        elif isinstance(node, _COMPREHENSIONS):
            body: list[ast.AST] = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            loops = [(each.target, each.iter, body) for each in node.generators]
        else:
            continue
        for target, iterable, parts in loops:
            names = {name.id for name in ast.walk(target) if isinstance(name, ast.Name)}
            for part in parts:
                for inner in ast.walk(part):
                    if isinstance(inner, ast.Name) and inner.id in names:
                        found[id(inner)] = (target, iterable)
    return found


def _looped(scope: Scope, name: str, loop: _Loop | None) -> Iterator[tuple[Scope, ast.expr]]:
    """The values the loop variable `name` takes, from the list, tuple or dict its loop iterates
    (`.items()` and `.values()` of one too), where the target is the name or a tuple of names."""
    if loop is None:
        return
    target, iterable = loop
    method = ""
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) and not iterable.args:
        method, iterable = iterable.func.attr, iterable.func.value
    for where, display in scope.displays(iterable):
        yield from _rows(where, display, target, name, method)


def _rows(
    where: Scope, display: ast.List | ast.Tuple | ast.Set | ast.Dict, target: ast.expr, name: str, method: str
) -> Iterator[tuple[Scope, ast.expr]]:
    if isinstance(display, ast.Dict):
        if method == "items":
            rows: list[list[ast.expr]] = [
                [key, value] for key, value in zip(display.keys, display.values, strict=True) if key is not None
            ]
        else:
            rows = [[value] for value in display.values] if method == "values" else []
    else:
        rows = [element.elts if isinstance(element, ast.Tuple | ast.List) else [element] for element in display.elts]
    if isinstance(target, ast.Name):
        yield from ((where, row[0]) for row in rows if len(row) == 1)
        return
    names = [part.id if isinstance(part, ast.Name) else "" for part in getattr(target, "elts", [])]
    if name in names:
        position = names.index(name)
        yield from ((where, row[position]) for row in rows if len(row) == len(names))


def _middleware(scope: Scope, call: ast.Call, add: _Add, found: EntryPoints) -> None:
    cls = _argument(call, 0, "middleware_class") or _argument(call, 0, "cls")
    resolved = scope.resolve(cls) if cls is not None else None
    if resolved == BASE_HTTP_MIDDLEWARE:
        found.http_middleware.append(HttpMiddleware(scope.module, call))
        add(_function(scope, _keyword(call, "dispatch")), "middleware")
    elif isinstance(resolved, str) and is_base_http_middleware(resolved):
        found.http_middleware.append(HttpMiddleware(scope.module, call))
    elif isinstance(resolved, ClassInfo) and not _subclasses_base_http_middleware(scope, resolved):
        add(scope.method(resolved, "__call__"), "middleware")


class _Add(Protocol):
    def __call__(
        self,
        function: Function | None,
        kind: Kind,
        registration: ast.Call | None = None,
        declared: tuple[Step, ...] = (),
    ) -> None: ...
