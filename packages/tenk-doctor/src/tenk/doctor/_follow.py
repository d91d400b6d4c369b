"""Following calls from an entry point through the app's own functions, across modules.

Only calls are followed, never references: `asyncio.to_thread(fetch, url)`, `run_in_threadpool(fetch)`
and `loop.run_in_executor(None, fetch)` hand `fetch` to a thread, and it is not examined. Their
arguments are evaluated on the loop, though: `to_thread(json.loads, open(p).read())` blocks.
Functions cached with `functools.cache`/`lru_cache` are not followed: what they build, they build once.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from tenk.doctor._findings import Step
from tenk.doctor._libraries import blocking_family
from tenk.doctor._names import Instance, Layer, Resolved, Scope, Wrapped, dotted, is_property, scope_of
from tenk.doctor._project import ClassInfo, Function, Module, Project, children

DEFAULT_DEPTH = 4
CACHES = {"lru_cache", "cache", "cached", "alru_cache", "cached_property"}


@dataclass(frozen=True)
class CallSite:
    # The call, or the expression that calls a method implicitly: `obj[key]`, `key in obj`, the `obj` of
    # `with obj:` and `for x in obj:`, `len(obj)`, a property read (`obj.name`).
    node: ast.expr
    callee: Resolved | None
    # `await call(...)`: whatever the annotation says, a sync client's method cannot be awaited, so an
    # awaited call is an async client's (prefect annotates its AsyncSession as `sa.orm.Session`). So is
    # what `async with` enters and `async for` iterates.
    awaited: bool = False


def called_name(call: ast.Call) -> str:
    """The last name of what is called: `to_thread` for `asyncio.to_thread(...)`."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def is_static(function: Function) -> bool:
    return any(dotted(decorator) == "staticmethod" for decorator in function.node.decorator_list)


def is_cached(function: Function) -> bool:
    for decorator in function.node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = dotted(target) or ""
        if name.rsplit(".", 1)[-1] in CACHES:
            return True
    return False


_SUBSCRIPT = {ast.Load: "__getitem__", ast.Store: "__setitem__", ast.Del: "__delitem__"}
_BUILTIN_DUNDERS = {"len": "__len__", "iter": "__iter__", "next": "__next__"}


@dataclass
class _Sites:
    calls: list[ast.Call] = field(default_factory=list)
    # (where, the object whose dunder runs, the dunder)
    implicit: list[tuple[ast.expr, ast.expr, str]] = field(default_factory=list)
    awaited: set[int] = field(default_factory=set)
    # `obj.name` read, not called: a property's getter, if `name` is one.
    reads: list[ast.Attribute] = field(default_factory=list)


def sites_in(body: list[ast.stmt]) -> _Sites:
    """The calls a body makes itself, written or implied by syntax: not those of the functions or
    lambdas it defines."""
    found = _Sites()
    called: set[int] = set()
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Call):
            found.calls.append(node)
            called.add(id(node.func))
            if isinstance(node.func, ast.Name) and node.func.id in _BUILTIN_DUNDERS and len(node.args) == 1:
                found.implicit.append((node, node.args[0], _BUILTIN_DUNDERS[node.func.id]))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and id(node) not in called:
            found.reads.append(node)
        elif isinstance(node, ast.Await):
            found.awaited.add(id(node.value))
        elif isinstance(node, ast.Subscript):
            found.implicit.append((node, node.value, _SUBSCRIPT.get(type(node.ctx), "__getitem__")))
        elif isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, ast.In | ast.NotIn):
                    found.implicit.append((node, right, "__contains__"))
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            is_async = isinstance(node, ast.AsyncFor) or (isinstance(node, ast.comprehension) and node.is_async)
            found.implicit.append((node.iter, node.iter, "__aiter__" if is_async else "__iter__"))
            if is_async:
                found.awaited.add(id(node.iter))
        elif isinstance(node, ast.With | ast.AsyncWith):
            is_async = isinstance(node, ast.AsyncWith)
            for item in node.items:
                found.implicit.append((item.context_expr, item.context_expr, "__aenter__" if is_async else "__enter__"))
                if is_async:
                    found.awaited.add(id(item.context_expr))
        stack.extend(reversed(children(node)))
    return found


def step(function: Function, node: ast.expr | ast.stmt) -> Step:
    return Step(
        function.module.path, node.lineno, node.col_offset + 1, function.qualname, function.module.code(node.lineno)
    )


class Graph:
    """Per-function call lists, resolved once and shared by every walk."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._calls: dict[int, list[CallSite]] = {}
        self._parameter_calls: dict[int, dict[str, list[ast.Call]]] = {}

    def scope(self, function: Function) -> Scope:
        return scope_of(self.project, function.module, function)

    def module_scope(self, module: Module) -> Scope:
        return scope_of(self.project, module)

    def calls(self, function: Function) -> list[CallSite]:
        """What `function` calls: each call with its callee, an abstract method's call once for each
        implementation in a subclass, and the dunder methods of own classes that its syntax runs."""
        key = id(function)
        if key in self._calls:
            return self._calls[key]
        scope = self.scope(function)
        found = sites_in(function.node.body)
        sites: list[CallSite] = []
        for call in found.calls:
            callee = scope.resolve(call.func)
            awaited = id(call) in found.awaited
            sites.append(CallSite(call, callee, awaited))
            if isinstance(callee, Function):
                sites.extend(CallSite(call, override, awaited) for override in scope.overrides(callee))
        for read in found.reads:
            owner = scope.type_of(read.value)
            getter = scope.method(owner, read.attr) if isinstance(owner, ClassInfo) else None
            if getter is not None and is_property(getter):
                sites.append(CallSite(read, getter))
        for node, operand, dunder in found.implicit:
            kind = scope.type_of(operand)
            awaited = id(operand) in found.awaited
            if isinstance(kind, ClassInfo):
                method = scope.method(kind, dunder)
                if method is not None:
                    sites.extend(CallSite(node, m, awaited) for m in [method, *scope.overrides(method)])
            elif isinstance(kind, str) and blocking_family(f"{kind}().{dunder}") is not None:
                sites.append(CallSite(node, f"{kind}().{dunder}", awaited))
        self._calls[key] = sites
        return sites

    def runs_on_loop(self, function: Function) -> bool:
        """Whether the framework's call of `function` runs on the event loop: an `async def`, or one
        that an own decorator wraps in an `async def` (which calls it there)."""
        layers = self.scope(function).wrappers(function)
        return function.is_async or bool(layers and layers[0].wrapper.is_async)

    def walk(
        self,
        root: Function,
        depth: int,
        *,
        into_async: bool = True,
        follow: Callable[[Function, CallSite], bool] | None = None,
    ) -> Iterator[tuple[Function, tuple[Step, ...]]]:
        """Every own function `root` reaches within `depth` calls, with the shortest chain to it.

        The chain starts with the root's definition, then each call site on the way. The wrappers the
        app's own decorators put around the root run too: each is reached from its decorator's line."""
        start = (step(root, root.node),)
        seen = {id(root)}
        queue: deque[tuple[Function, tuple[Step, ...], int]] = deque([(root, start, 0)])
        for layer in self.scope(root).wrappers(root):
            if id(layer.wrapper) not in seen and (into_async or not layer.wrapper.is_async):
                seen.add(id(layer.wrapper))
                queue.append((layer.wrapper, (*start, step(root, layer.decorator)), 1))
        while queue:
            function, chain, level = queue.popleft()
            yield function, chain
            if level >= depth:
                continue
            for site in self.calls(function):
                if follow is not None and not follow(function, site):
                    continue
                for callee, via in self.callees(site.callee):
                    if id(callee) in seen or is_cached(callee) or (callee.is_async and not into_async):
                        continue
                    seen.add(id(callee))
                    reached = (*chain, step(function, site.node), *via)
                    queue.append((callee, reached, level + 1))
                    if level + 1 >= depth or not isinstance(site.node, ast.Call):
                        continue
                    # `in_session(Orders.shipped)`: what the callee calls through its parameter.
                    for handed, inner, call in self.handed(function, site.node, callee):
                        if id(handed) in seen or is_cached(handed) or (handed.is_async and not into_async):
                            continue
                        seen.add(id(handed))
                        queue.append((handed, (*reached, step(callee, call), *inner), level + 2))

    def parameter_calls(self, function: Function) -> dict[str, list[ast.Call]]:
        """The calls `function` makes of its own parameters (`query(session)`), by parameter."""
        key = id(function)
        if key not in self._parameter_calls:
            params = {arg.arg for arg in (*function.node.args.posonlyargs, *function.node.args.args)}
            params.update(arg.arg for arg in function.node.args.kwonlyargs)
            found: dict[str, list[ast.Call]] = {}
            for call in sites_in(function.node.body).calls:
                if isinstance(call.func, ast.Name) and call.func.id in params:
                    found.setdefault(call.func.id, []).append(call)
            self._parameter_calls[key] = found
        return self._parameter_calls[key]

    def handed(
        self, caller: Function, call: ast.Call, callee: Function
    ) -> Iterator[tuple[Function, tuple[Step, ...], ast.Call]]:
        """The own functions `call` passes to `callee` that `callee` calls: each with the steps inside
        its wrappers, and the callee's call of it."""
        called = self.parameter_calls(callee)
        if not called:
            return
        args = callee.node.args
        positional = [arg.arg for arg in (*args.posonlyargs, *args.args)]
        # A method reached as `obj.run(...)` or `cls.run(...)` is bound: its first parameter is given.
        if callee.owner is not None and isinstance(call.func, ast.Attribute) and not is_static(callee):
            positional = positional[1:]
        given = [(name, arg) for name, arg in zip(positional, call.args, strict=False)]
        given += [(kw.arg, kw.value) for kw in call.keywords if kw.arg is not None]
        scope = self.scope(caller)
        for name, arg in given:
            if name not in called or isinstance(arg, ast.Starred):
                continue
            for handed, via in self.callees(scope.resolve(arg)):
                for inner in called[name]:
                    yield handed, via, inner

    def callees(self, resolved: Resolved | None) -> list[tuple[Function, tuple[Step, ...]]]:
        """The app's own functions a call runs, each with the steps inside wrappers on the way: a
        function (through the wrappers its decorators put around it), a class's `__init__`, an
        instance's `__call__`."""
        if isinstance(resolved, Wrapped):
            return _through(resolved.layers, resolved.wrapped)
        if isinstance(resolved, Function):
            return _through(self.scope(resolved).wrappers(resolved), resolved)
        if isinstance(resolved, ClassInfo):
            method = self.module_scope(resolved.module).method(resolved, "__init__")
        elif isinstance(resolved, Instance):
            method = self.module_scope(resolved.cls.module).method(resolved.cls, "__call__")
        else:
            return []
        return [(method, ())] if method is not None else []


def _through(layers: tuple[Layer, ...], function: Function) -> list[tuple[Function, tuple[Step, ...]]]:
    """Each wrapper, then the wrapped function reached through each wrapper's call of the next."""
    found: list[tuple[Function, tuple[Step, ...]]] = []
    via: tuple[Step, ...] = ()
    for layer in layers:
        found.append((layer.wrapper, via))
        if layer.call is None:
            # Where a wrapper calls what it wraps cannot be told: the function, as if called directly.
            via = ()
            break
        via = (*via, step(layer.wrapper, layer.call))
    found.append((function, via))
    return found
