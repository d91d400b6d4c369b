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
from tenk.doctor._names import (
    Instance,
    Layer,
    Resolved,
    Scope,
    Wrapped,
    dispatched_by_name,
    dotted,
    is_property,
    is_stub,
    scope_of,
)
from tenk.doctor._project import ClassInfo, Function, Module, Project, children

DEFAULT_DEPTH = 4
# The parameters a call fixes to a literal, by name, sorted: `(("sync", False),)`.
Fixed = tuple[tuple[str, object], ...]
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
    # The callee is a subclass's implementation of the method the call names on a base type: the chain
    # names it, with its definition, as the class that runs is chosen at run time.
    overriding: bool = False


@dataclass(frozen=True)
class Reached:
    """An own function a walk reaches: the shortest chain to it, the calls it makes on that path, and
    whether that path runs once per process (through a cached function, or under a guard such as
    `if self._client is None:` that assigns what it tests)."""

    function: Function
    chain: tuple[Step, ...]
    sites: list[CallSite]
    once: bool = False


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
        self._once: dict[int, set[int]] = {}
        # By function: the parameter names its `if` tests read and its body never rebinds.
        self._deciding: dict[int, set[str]] = {}

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
                sites.extend(CallSite(call, override, awaited, True) for override in scope.overrides(callee))
            elif function.owner is not None and dispatched_by_name(function, call):
                # `getattr(self, kind)(...)`: any of the class's abstract methods, as each subclass
                # implements it.
                for stub in function.owner.methods.values():
                    if stub is not function and is_stub(stub):
                        sites.extend(CallSite(call, m, awaited, True) for m in self._dispatched(scope, stub, call))
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
                    sites.append(CallSite(node, method, awaited))
                    sites.extend(CallSite(node, m, awaited, True) for m in scope.overrides(method))
            elif isinstance(kind, str) and blocking_family(f"{kind}().{dunder}") is not None:
                sites.append(CallSite(node, f"{kind}().{dunder}", awaited))
        self._calls[key] = sites
        return sites

    def _dispatched(self, scope: Scope, stub: Function, call: ast.Call) -> list[Function]:
        """The implementations of an abstract method that `getattr(self, name)(...)` may call: only those
        of one that takes the call's positional arguments (`run_action`'s `getattr(self, kind)(action)`
        runs `read(self, action)`, never `close(self)`)."""
        args = stub.node.args
        positional = len(args.posonlyargs) + len(args.args) - 1
        given = len(call.args)
        if any(isinstance(a, ast.Starred) for a in call.args):
            return scope.overrides(stub)
        if given > positional and args.vararg is None:
            return []
        if given < positional - len(args.defaults):
            return []
        return scope.overrides(stub)

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
        """Every own function `root` reaches within `depth` calls, once each, with the shortest chain to it."""
        yielded: set[int] = set()
        for reached in self.reach(root, depth, into_async=into_async, follow=follow):
            if id(reached.function) not in yielded:
                yielded.add(id(reached.function))
                yield reached.function, reached.chain

    def reach(
        self,
        root: Function,
        depth: int,
        *,
        into_async: bool = True,
        follow: Callable[[Function, CallSite], bool] | None = None,
        into_cached: bool = False,
    ) -> Iterator[Reached]:
        """Every own function `root` reaches within `depth` calls, with the shortest chain to it and the
        calls it makes on that path.

        The chain starts with the root's definition, then each call site on the way. The wrappers the
        app's own decorators put around the root run too: each is reached from its decorator's line.

        A call that fixes a parameter (a literal argument, or the default of one not passed) rules out
        the branches that parameter's test excludes: `def f(x, sync=False): if sync: ...` called as `f(x)`
        never runs the `if` body, so its calls are not made on that path. A function reached again with
        other fixed parameters is walked again, and yields only the calls no earlier path made.

        Cached functions are not entered unless `into_cached`: then they are, on a path marked `once`,
        as is every call made under a once-per-process guard (`once_guarded`)."""
        start = (step(root, root.node),)
        seen: set[tuple[int, Fixed, bool]] = {(id(root), (), False)}
        given: dict[tuple[int, bool], set[int]] = {}
        queue: deque[tuple[Function, tuple[Step, ...], int, Fixed, bool]] = deque([(root, start, 0, (), False)])
        for layer in self.scope(root).wrappers(root):
            if (id(layer.wrapper), (), False) not in seen and (into_async or not layer.wrapper.is_async):
                seen.add((id(layer.wrapper), (), False))
                queue.append((layer.wrapper, (*start, step(root, layer.decorator)), 1, (), False))

        def skipped(callee: Function) -> bool:
            return (is_cached(callee) and not into_cached) or (callee.is_async and not into_async)

        while queue:
            function, chain, level, fixed, once = queue.popleft()
            dead = self.ruled_out(function, fixed)
            live = [site for site in self.calls(function) if id(site.node) not in dead]
            made = given.setdefault((id(function), once), set())
            new = [site for site in live if id(site) not in made]
            made.update(id(site) for site in new)
            yield Reached(function, chain, new, once)
            if level >= depth:
                continue
            guarded = self.once_guarded(function) if into_cached else set()
            for site in live:
                if follow is not None and not follow(function, site):
                    continue
                for callee, via in self.callees(site.callee):
                    passed = self.fixed(site, callee) if not via and site.callee is callee else ()
                    then = once or id(site.node) in guarded or is_cached(callee)
                    if (id(callee), passed, then) in seen or skipped(callee):
                        continue
                    seen.add((id(callee), passed, then))
                    entered = (step(callee, callee.node),) if site.overriding else ()
                    reached = (*_calling(chain, function), step(function, site.node), *entered, *via)
                    queue.append((callee, reached, level + 1, passed, then))
                    if level + 1 >= depth or not isinstance(site.node, ast.Call):
                        continue
                    # `in_session(Orders.shipped)`: what the callee calls through its parameter.
                    for handed, inner, call in self.handed(function, site.node, callee):
                        handed_once = then or is_cached(handed)
                        if (id(handed), (), handed_once) in seen or skipped(handed):
                            continue
                        seen.add((id(handed), (), handed_once))
                        queue.append((handed, (*reached, step(callee, call), *inner), level + 2, (), handed_once))

    def once_guarded(self, function: Function) -> set[int]:
        """The nodes of `function` that run once per process: under `if X is None:` (or `if not X:`)
        whose body assigns X, or after `if X is not None: return X` where what follows assigns X; X an
        attribute (`self._client`, `app.state.model`) or a name the function declares `global`."""
        key = id(function)
        if key not in self._once:
            kept = {n for node in function.nodes if isinstance(node, ast.Global) for n in node.names}
            found: set[int] = set()
            stack: list[list[ast.stmt]] = [function.node.body]
            while stack:
                body = stack.pop()
                for index, stmt in enumerate(body):
                    if isinstance(stmt, ast.If):
                        target, unset = _tested(stmt.test, kept)
                        if target is not None and unset and _assigns(stmt.body, target):
                            found.update(id(n) for part in stmt.body for n in ast.walk(part))
                            continue
                        rest = body[index + 1 :]
                        if target is not None and not unset and _returns(stmt.body) and _assigns(rest, target):
                            found.update(id(n) for part in rest for n in ast.walk(part))
                            break
                    for part in ("body", "orelse", "finalbody"):
                        inner = getattr(stmt, part, None)
                        if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                            stack.append(inner)
                    if isinstance(stmt, ast.Try | ast.TryStar):
                        stack.extend(handler.body for handler in stmt.handlers)
            self._once[key] = found
        return self._once[key]

    def fixed(self, site: CallSite, callee: Function) -> Fixed:
        """The parameters of `callee` whose value the call fixes: a literal argument (`sync=False`), or
        the literal default of a parameter it does not pass; none that the body assigns again."""
        call = site.node
        if not isinstance(call, ast.Call):
            return ()
        if any(isinstance(arg, ast.Starred) for arg in call.args) or any(kw.arg is None for kw in call.keywords):
            return ()
        args = callee.node.args
        positional = [arg.arg for arg in (*args.posonlyargs, *args.args)]
        with_default = positional[len(positional) - len(args.defaults) :]
        defaults: dict[str, ast.expr] = dict(zip(with_default, args.defaults, strict=True))
        defaults.update((arg.arg, d) for arg, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None)
        if callee.owner is not None and isinstance(call.func, ast.Attribute) and not is_static(callee):
            positional = positional[1:]
        if len(call.args) > len(positional):
            return ()
        passed: dict[str, ast.expr] = {**defaults, **dict(zip(positional, call.args, strict=False))}
        passed.update((kw.arg, kw.value) for kw in call.keywords if kw.arg is not None)
        values = {
            name: expr.value
            for name, expr in passed.items()
            if isinstance(expr, ast.Constant) and _hashable(expr.value)
        }
        if not values:
            return ()
        key = id(callee)
        if key not in self._deciding:
            self._deciding[key] = _read_by_tests(callee.node.body) - _assigned(callee.node.body)
        # Only parameters an `if` tests can rule a branch out: the others would walk the callee again for nothing.
        deciding = self._deciding[key]
        return tuple(sorted(((n, v) for n, v in values.items() if n in deciding), key=lambda item: item[0]))

    def ruled_out(self, function: Function, fixed: Fixed) -> set[int]:
        """The nodes of `function` that the fixed parameters rule out: the branch of an `if` whose test
        they decide against, and what follows an `if` whose taken branch returns or raises."""
        if not fixed:
            return set()
        values = dict(fixed)
        scope = self.scope(function)
        dead: set[int] = set()

        def kill(nodes: list[ast.stmt]) -> None:
            for node in nodes:
                dead.update(id(inner) for inner in ast.walk(node))

        def block(body: list[ast.stmt]) -> bool:
            """Walks `body`; whether it always ends in a `return` or `raise` on this path."""
            for index, stmt in enumerate(body):
                ends = False
                if isinstance(stmt, ast.If):
                    truth = _truth(stmt.test, values, scope)
                    if truth is True:
                        kill(stmt.orelse)
                        ends = block(stmt.body)
                    elif truth is False:
                        kill(stmt.body)
                        ends = bool(stmt.orelse) and block(stmt.orelse)
                    else:
                        taken, other = block(stmt.body), block(stmt.orelse)
                        ends = taken and bool(stmt.orelse) and other
                elif isinstance(stmt, ast.Return | ast.Raise):
                    ends = True
                elif isinstance(stmt, ast.With | ast.AsyncWith):
                    ends = block(stmt.body)
                elif isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
                    block(stmt.body)
                    block(stmt.orelse)
                elif isinstance(stmt, ast.Try | ast.TryStar):
                    for part in (stmt.body, *(handler.body for handler in stmt.handlers), stmt.orelse, stmt.finalbody):
                        block(part)
                if ends:
                    kill(body[index + 1 :])
                    return True
            return False

        block(function.node.body)
        return dead

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


def _calling(chain: tuple[Step, ...], function: Function) -> tuple[Step, ...]:
    """The chain to `function` before one of its calls: without the step that names an override by
    its definition (kept only where the chain ends in it), as the call's own step names it then."""
    last = chain[-1]
    if len(chain) > 1 and last.function == function.qualname and last.line == function.node.lineno:
        return chain[:-1]
    return chain


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


def _read_by_tests(body: list[ast.stmt]) -> set[str]:
    return {
        name.id
        for stmt in body
        for node in ast.walk(stmt)
        if isinstance(node, ast.If)
        for name in ast.walk(node.test)
        if isinstance(name, ast.Name)
    }


def _assigned(body: list[ast.stmt]) -> set[str]:
    return {
        node.id
        for stmt in body
        for node in ast.walk(stmt)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del)
    }


def _hashable(value: object) -> bool:
    return value is None or isinstance(value, bool | int | float | str | bytes)


_UNDECIDED = object()


def _value(expr: ast.expr, values: dict[str, object]) -> object:
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Name) and expr.id in values:
        return values[expr.id]
    return _UNDECIDED


def _truth(test: ast.expr, values: dict[str, object], scope: Scope) -> bool | None:
    """Whether a test is true given the fixed parameters, or None when they do not decide it."""
    if isinstance(test, ast.Name):
        return bool(values[test.id]) if test.id in values else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _truth(test.operand, values, scope)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        parts = [_truth(value, values, scope) for value in test.values]
        decisive = isinstance(test.op, ast.Or)
        if decisive in parts:
            return decisive
        return (not decisive) if all(part is not None for part in parts) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, left, right = test.ops[0], _value(test.left, values), test.comparators[0]
        if left is _UNDECIDED or not any(isinstance(n, ast.Name) and n.id in values for n in (test.left, right)):
            return None
        if isinstance(op, ast.In | ast.NotIn):
            found = _member(left, right, values, scope)
            return None if found is None else found == isinstance(op, ast.In)
        other = _value(right, values)
        if other is _UNDECIDED:
            return None
        if isinstance(op, ast.Is | ast.IsNot):
            return (left is other) == isinstance(op, ast.Is)
        if isinstance(op, ast.Eq | ast.NotEq):
            return (left == other) == isinstance(op, ast.Eq)
    return None


def _member(value: object, container: ast.expr, values: dict[str, object], scope: Scope) -> bool | None:
    """Whether `value` is among a display's constant keys or elements (through module-level names)."""
    if isinstance(container, ast.Name) and container.id in values:
        return None
    shown = scope.display(container)
    if shown is None:
        return None
    display = shown[1]
    keys: list[ast.expr | None] = list(display.keys) if isinstance(display, ast.Dict) else list(display.elts)
    if any(isinstance(key, ast.Constant) and key.value == value for key in keys):
        return True
    return False if all(isinstance(key, ast.Constant) for key in keys) else None


def _tested(test: ast.expr, kept: set[str]) -> tuple[str | None, bool]:
    """What a test checks is set, as text (`self._client`), and whether it holds when that is unset:
    `X is None` and `not X` do, `X is not None` and `X` do not."""
    unset = True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    elif isinstance(test, ast.Compare) and len(test.ops) == 1 and _is_none_constant(test.comparators[0]):
        if isinstance(test.ops[0], ast.Is | ast.Eq):
            test = test.left
        elif isinstance(test.ops[0], ast.IsNot | ast.NotEq):
            test, unset = test.left, False
        else:
            return None, False
    else:
        unset = False
    if isinstance(test, ast.Attribute) or (isinstance(test, ast.Name) and test.id in kept):
        return ast.unparse(test), unset
    return None, False


def _is_none_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _assigns(body: list[ast.stmt], target: str) -> bool:
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign) and any(ast.unparse(t) == target for t in node.targets):
                return True
            if isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and ast.unparse(node.target) == target:
                return True
    return False


def _returns(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Return)
