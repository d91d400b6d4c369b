"""What a name in the app's source refers to: an own function, class, instance or module, or a third-party name.

Third-party names come out qualified and in one spelling (`redis.client.Redis` -> `redis.Redis`). A
method called on an instance reads `redis.Redis().get`: the type is inferred from annotations (aliases
and `Annotated[...]` included), constructor calls, `with ... as`, what the app's own functions return or
yield, attributes set on `self`, `app.state`/`request.state` attributes set anywhere in the app, and
known factories (`psycopg.connect` returns a `psycopg.Connection`: the table in `_libraries`). Nothing is
imported: the rules match on these strings.

Every lookup that does not depend on where it is asked from (a module-level name's type, a class's
methods and attributes, what a function returns, the subclasses of a class) is computed once per
project and kept, so that resolving a call costs a few dictionary lookups however large the app is.
"""

from __future__ import annotations

import ast
import builtins
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TypeGuard, TypeVar

from tenk.doctor._libraries import ALIASES, ATTRIBUTES, BLOCKING_METHODS, IN_MEMORY, RETURNS
from tenk.doctor._project import ClassInfo, Function, Module, Project

Type = str | ClassInfo
_LIMIT = 24
# Kept answers computed one inside another, at most (each starts a fresh depth).
_NESTING = 16
_K = TypeVar("_K")
_V = TypeVar("_V")
# Implementations of one abstract method followed, at most.
_IMPLEMENTATIONS = 50


@dataclass(frozen=True, eq=False)
class Instance:
    """An instance of one of the app's own classes (`Items = ItemTable()`)."""

    cls: ClassInfo


@dataclass(frozen=True)
class Layer:
    """One decorator around a function: where it is applied, the wrapper it returns, and the wrapper's
    call of what it wraps (None where that call was not found)."""

    decorator: ast.expr
    wrapper: Function
    call: ast.Call | None


@dataclass(frozen=True, eq=False)
class Wrapped:
    """`retry(3)(fetch)` written as a call: the wrappers around `fetch`, outermost first."""

    layers: tuple[Layer, ...]
    wrapped: Function


Resolved = Function | ClassInfo | Module | Instance | Wrapped | str

# Spellings of the same third-party name, longest first when applied (the libraries' own in _libraries).
CANONICAL = {
    **ALIASES,
    "fastapi.concurrency.run_in_threadpool": "starlette.concurrency.run_in_threadpool",
    "fastapi.Request": "starlette.requests.Request",
    "fastapi.requests.Request": "starlette.requests.Request",
    "fastapi.WebSocket": "starlette.websockets.WebSocket",
    "fastapi.FastAPI": "fastapi.applications.FastAPI",
    "fastapi.APIRouter": "fastapi.routing.APIRouter",
    "starlette.applications.Starlette": "starlette.Starlette",
    "fastapi.Depends": "fastapi.params.Depends",
    "fastapi.Security": "fastapi.params.Security",
    "fastapi.param_functions.Depends": "fastapi.params.Depends",
    "fastapi.param_functions.Security": "fastapi.params.Security",
    "fastapi.middleware.Middleware": "starlette.middleware.Middleware",
    "aiohttp.client.ClientSession": "aiohttp.ClientSession",
    "typing_extensions.Annotated": "typing.Annotated",
    "typing_extensions.Optional": "typing.Optional",
    "typing_extensions.Protocol": "typing.Protocol",
}
APP_TYPES = frozenset({"fastapi.applications.FastAPI", "starlette.Starlette"})
REQUEST_TYPES = frozenset({"starlette.requests.Request", "starlette.websockets.WebSocket"})
DEPENDS = frozenset({"fastapi.params.Depends", "fastapi.params.Security"})
# Annotations whose first argument is the type the value gives: `Iterator[Session]` of a generator.
_UNWRAPPED = frozenset(
    {
        "typing.Annotated",
        "typing.Optional",
        "typing.Union",
        "typing.AsyncIterator",
        "typing.Iterator",
        "typing.AsyncGenerator",
        "typing.Generator",
        "typing.ContextManager",
        "typing.AsyncContextManager",
        "typing.Awaitable",
        "typing.Coroutine",
        "contextlib.AbstractContextManager",
        "contextlib.AbstractAsyncContextManager",
    }
)
PATH = "pathlib.Path"
_IN_MEMORY_FILES = frozenset({"io.BytesIO", "io.StringIO"})


class _Unknown:
    """What `Scope.constant` gives for a value it cannot tell."""


UNKNOWN = _Unknown()


@lru_cache(maxsize=8192)
def canonical(name: str) -> str:
    """The one spelling of a name: its longest prefix (cut at a `.` or `(`) found in CANONICAL, replaced."""
    cuts = [i for i, char in enumerate(name) if char in ".("]
    for cut in [len(name), *reversed(cuts)]:
        alias = CANONICAL.get(name[:cut])
        if alias is not None:
            return alias + name[cut:]
    return name


def dotted(expr: ast.expr) -> str | None:
    """`a.b.c` as a string, or None for anything that is not a plain attribute chain."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = dotted(expr.value)
        return f"{base}.{expr.attr}" if base else None
    return None


def is_stub(function: Function) -> bool:
    """`@abstractmethod`, or a body that only documents, passes or raises NotImplementedError."""
    for decorator in function.node.decorator_list:
        if (dotted(decorator) or "").rsplit(".", 1)[-1] == "abstractmethod":
            return True
    for statement in function.node.body:
        if isinstance(statement, ast.Pass) or (
            isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        ):
            continue
        if isinstance(statement, ast.Raise) and statement.exc is not None:
            raised = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
            if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
                continue
        return False
    return True


def dispatches_by_name(function: Function) -> bool:
    """A method that calls one of its own instance's methods chosen by a run-time name:
    `getattr(self, action.kind)(action)`."""
    return any(dispatched_by_name(function, node) for node in function.nodes if isinstance(node, ast.Call))


def dispatched_by_name(function: Function, call: ast.Call) -> bool:
    """`call` is `getattr(<the method's receiver>, <not a constant>)(...)`."""
    params = _params(function)
    inner = call.func
    return (
        function.owner is not None
        and bool(params)
        and isinstance(inner, ast.Call)
        and _calls_name(inner, "getattr")
        and len(inner.args) >= 2
        and isinstance(inner.args[0], ast.Name)
        and inner.args[0].id == params[0].arg
        and not isinstance(inner.args[1], ast.Constant)
    )


def is_property(function: Function) -> bool:
    """`@property` (not `cached_property`: what it builds, it builds once)."""
    return "property" in _decorator_names(function)


def _decorator_names(function: Function) -> set[str]:
    return {(dotted(d) or "").rsplit(".", 1)[-1] for d in function.node.decorator_list}


def _params(function: Function) -> list[ast.arg]:
    args = function.node.args
    return [*args.posonlyargs, *args.args]


@dataclass
class _Bindings:
    """A function's local names: what each is assigned, annotated as, or entered with."""

    values: dict[str, list[ast.expr]] = field(default_factory=dict)
    annotations: dict[str, ast.expr] = field(default_factory=dict)
    params: set[str] = field(default_factory=set)
    # `with x as name`: the context expressions, whose `__enter__` gives the value.
    entered: set[int] = field(default_factory=set)


class _Memo:
    """What the project's names resolve to, wherever it is asked from: computed once, kept for the run."""

    def __init__(self) -> None:
        self.scopes: dict[tuple[int, int], Scope] = {}
        self.module_types: dict[tuple[int, str], Type | None] = {}
        self.methods: dict[tuple[int, str], Function | None] = {}
        self.parents: dict[int, list[ClassInfo]] = {}
        self.bases: dict[int, list[str]] = {}
        self.fields: dict[int, dict[str, list[tuple[Scope, ast.expr, bool]]]] = {}
        self.attribute_types: dict[tuple[int, str], Type | None] = {}
        self.returned: dict[int, Type | None] = {}
        self.returned_functions: dict[int, Function | None] = {}
        self.wrappers: dict[int, tuple[Layer, ...]] = {}
        self.decorators: dict[int, tuple[Function, ast.Call | None] | bool] = {}
        self.subclasses: dict[int, list[ClassInfo]] | None = None
        self.descendants: dict[int, list[ClassInfo]] = {}
        self.constructions: dict[int, list[tuple[Scope, ast.Call]]] | None = None
        self.state: dict[tuple[str, str], list[tuple[Scope, ast.expr]]] | None = None
        # How many kept answers are being computed, one inside another.
        self.active = 0


_MEMOS: weakref.WeakKeyDictionary[Project, _Memo] = weakref.WeakKeyDictionary()


def scope_of(project: Project, module: Module, function: Function | None = None) -> Scope:
    """The one Scope of a function (or of a module's top level), shared by every rule."""
    memo = _MEMOS.get(project)
    if memo is None:
        memo = _MEMOS[project] = _Memo()
    key = (id(module), id(function))
    found = memo.scopes.get(key)
    if found is None:
        found = memo.scopes[key] = Scope(project, module, function, memo)
    return found


@dataclass(eq=False)
class Scope:
    """Name resolution inside one function (or a module's top level, with `function=None`)."""

    project: Project
    module: Module
    function: Function | None = None
    memo: _Memo = field(default_factory=_Memo, repr=False)
    _bindings: _Bindings | None = field(default=None, repr=False)
    _types: dict[tuple[str, int], Type | None] = field(default_factory=dict, repr=False)
    _busy: set[str] = field(default_factory=set, repr=False)

    def at(self, module: Module, function: Function | None = None) -> Scope:
        return scope_of(self.project, module, function)

    # What a name or an expression refers to.

    def resolve(self, expr: ast.expr, depth: int = 0) -> Resolved | None:
        if depth > _LIMIT:
            return None
        if isinstance(expr, ast.Name):
            return self._resolve_name(expr.id, depth, expr.lineno)
        if isinstance(expr, ast.Attribute):
            owner = self.type_of(expr.value, depth + 1)
            if isinstance(owner, ClassInfo):
                return self.method(owner, expr.attr)
            if isinstance(owner, str):
                return f"{owner}().{expr.attr}"
            base = self.resolve(expr.value, depth + 1)
            if isinstance(base, Module):
                return self.member(base, [expr.attr], depth + 1)
            if isinstance(base, ClassInfo):
                return self.method(base, expr.attr)
            if isinstance(base, str):
                return canonical(f"{base}.{expr.attr}")
            if isinstance(base, Function):
                return self._decorated_attribute(base, expr.attr, depth + 1)
            return None
        if isinstance(expr, ast.Call):
            return self._call_value(expr, depth + 1)
        return None

    def _decorated_attribute(self, function: Function, attr: str, depth: int) -> str | None:
        """`send_mail.delay(...)` of a function a library's decorator wraps (`@job(queue)`): the attribute of
        what that decorator returns (`rq.decorators.job().delay`), where the library table knows it."""
        scope = self.at(function.module)
        for decorator in function.node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            name = scope.resolve(target, depth + 1)
            if isinstance(name, str) and "(" not in name and name in BLOCKING_METHODS:
                return f"{name}().{attr}"
        return None

    def _resolve_name(self, name: str, depth: int, line: int | None = None) -> Resolved | None:
        scope = self.function
        while scope is not None:
            if name in scope.nested:
                return scope.nested[name]
            scope = scope.parent
        if self.function is not None:
            receiver = self._receiver(name)
            if receiver is not None:
                kind, owner = receiver
                return Instance(owner) if kind == "instance" else owner if kind == "class" else None
            local = self._local_type(name, line)
            if local is not None:
                return Instance(local) if isinstance(local, ClassInfo) else f"{local}()"
            if self.is_local(name):
                # A parameter or variable of unknown type: never the module-level name it shadows.
                return None
            enclosing = self._enclosing(name)
            if enclosing is not None:
                return enclosing._resolve_name(name, depth + 1)
        module = self.module
        if name in module.functions:
            return module.functions[name]
        if name in module.classes:
            return module.classes[name]
        if name in module.imports:
            return self.lookup(module.imports[name], depth + 1)
        if name in module.assigns:
            value = module.assigns[name]
            if isinstance(value, ast.Name | ast.Attribute | ast.Call):
                return self.at(module).resolve(value, depth + 1)
            return None
        if hasattr(builtins, name):
            return f"builtins.{name}"
        return None

    def _call_value(self, call: ast.Call, depth: int) -> Resolved | None:
        """What a call gives: an instance, the function a factory returns, a decorator's wrapper."""
        callee = self.resolve(call.func, depth + 1)
        if isinstance(callee, ClassInfo):
            return Instance(callee)
        if isinstance(callee, Function):
            wrapped = self._decorates(callee, call, depth + 1)
            if wrapped is not None:
                return wrapped
            returned = self.returned_function(callee)
            if returned is not None:
                return returned
        kind = self.type_of(call, depth + 1)
        if isinstance(kind, ClassInfo):
            return Instance(kind)
        return f"{kind}()" if isinstance(kind, str) else None

    def lookup(self, qualified: str, depth: int = 0) -> Resolved | None:
        found = self.project.split(qualified)
        if found is None:
            return canonical(qualified)
        module, rest = found
        return self.member(module, rest, depth + 1) if rest else module

    def member(self, module: Module, attrs: list[str], depth: int = 0) -> Resolved | None:
        if not attrs:
            return module
        if depth > _LIMIT:
            return None
        head, rest = attrs[0], attrs[1:]
        if head in module.functions:
            return module.functions[head] if not rest else None
        if head in module.classes:
            info = module.classes[head]
            return self.method(info, rest[0]) if rest else info
        if head in module.imports:
            return self.lookup(".".join([module.imports[head], *rest]), depth + 1)
        sub = self.project.module(f"{module.name}.{head}")
        if sub is not None:
            return self.member(sub, rest, depth + 1)
        if head in module.assigns:
            value = self.at(module)._resolve_name(head, depth + 1)
            if not rest:
                return value
            if isinstance(value, Instance) and len(rest) == 1:
                return self.method(value.cls, rest[0])
            if isinstance(value, str):
                return canonical(".".join([value, *rest]))
        return None

    # Classes: methods, bases, subclasses, attributes.

    def method(self, info: ClassInfo, name: str) -> Function | None:
        """The method a class has or inherits from its own bases (the first, in the order they are named)."""
        return self._kept(self.memo.methods, (id(info), name), lambda: self._method_of(info, name), None)

    def _method_of(self, info: ClassInfo, name: str) -> Function | None:
        found = info.methods.get(name)
        if found is None:
            found = next((m for m in (self.method(p, name) for p in self.parents(info)) if m is not None), None)
        return found

    def parents(self, info: ClassInfo) -> list[ClassInfo]:
        """The app's own base classes of `info`."""
        return self._kept(self.memo.parents, id(info), lambda: self._parents_of(info), [])

    def _parents_of(self, info: ClassInfo) -> list[ClassInfo]:
        scope = self.at(info.module)
        return [r for r in (scope.resolve(base) for base in info.node.bases) if isinstance(r, ClassInfo)]

    def bases(self, info: ClassInfo) -> list[str]:
        """Every third-party base class of `info`, through its own base classes."""
        return self._kept(self.memo.bases, id(info), lambda: self._bases_of(info), [])

    def _bases_of(self, info: ClassInfo) -> list[str]:
        found: list[str] = []
        scope = self.at(info.module)
        for base in info.node.bases:
            resolved = scope.resolve(base)
            if isinstance(resolved, str):
                found.append(resolved)
            elif isinstance(resolved, ClassInfo):
                found.extend(self.bases(resolved))
        return found

    def subclasses(self, info: ClassInfo) -> list[ClassInfo]:
        """Every own class that derives from `info`, at any distance."""
        if self.memo.subclasses is None:
            direct: dict[int, list[ClassInfo]] = {}
            for module in list(self.project.modules.values()):
                for candidate in module.all_classes:
                    for parent in self.parents(candidate):
                        direct.setdefault(id(parent), []).append(candidate)
            self.memo.subclasses = direct
        kept = self.memo.descendants.get(id(info))
        if kept is not None:
            return kept
        found: dict[int, ClassInfo] = {}
        queue = deque(self.memo.subclasses.get(id(info), ()))
        while queue:
            candidate = queue.popleft()
            if id(candidate) not in found:
                found[id(candidate)] = candidate
                queue.extend(self.memo.subclasses.get(id(candidate), ()))
        self.memo.descendants[id(info)] = list(found.values())
        return self.memo.descendants[id(info)]

    def overrides(self, method: Function) -> list[Function]:
        """An abstract method's implementations in the subclasses of its class: what a call of it runs.
        A base method that dispatches by name (`getattr(self, kind)(...)`) counts as abstract: the class
        chosen at run time decides what it runs, so each subclass's override is a candidate."""
        owner = method.owner
        if owner is None or not (is_stub(method) or dispatches_by_name(method)):
            return []
        # A subclass's own method, or the one it inherits from a mixin named before the base
        # (`class SqlStore(SqlMixin, Store)`).
        found: dict[int, Function] = {}
        for sub in self.subclasses(owner):
            implementation = sub.methods.get(method.name) or self.method(sub, method.name)
            if implementation is not None and implementation is not method and not is_stub(implementation):
                found.setdefault(id(implementation), implementation)
                # Every entry point that calls it walks each implementation: a bound keeps that linear.
                if len(found) == _IMPLEMENTATIONS:
                    break
        return list(found.values())

    def _fields(self, info: ClassInfo) -> dict[str, list[tuple[Scope, ast.expr, bool]]]:
        """What each attribute of an instance is built from: `self.x = ...` in any method, and the class
        body's `x: T` and `x = ...`; the flag says the expression is an annotation."""
        found = self.memo.fields.get(id(info))
        if found is not None:
            return found
        found = {}
        top = self.at(info.module)
        for statement in info.node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                found.setdefault(statement.target.id, []).append((top, statement.annotation, True))
                if statement.value is not None:
                    found[statement.target.id].append((top, statement.value, False))
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, []).append((top, statement.value, False))
        for method in info.methods.values():
            params = _params(method)
            if not params:
                continue
            receiver = params[0].arg
            scope = self.at(info.module, method)
            if "property" in _decorator_names(method) and method.node.returns is not None:
                found.setdefault(method.name, []).append((scope, method.node.returns, True))
            for target, value in _attribute_assignments(method.nodes):
                if isinstance(target.value, ast.Name) and target.value.id == receiver:
                    found.setdefault(target.attr, []).append((scope, value, False))
        self.memo.fields[id(info)] = found
        return found

    def attribute_type(self, info: ClassInfo, name: str) -> Type | None:
        """The type of an instance's attribute, from what the class and its own bases set it to."""
        return self._kept(self.memo.attribute_types, (id(info), name), lambda: self._attribute_of(info, name), None)

    def _attribute_of(self, info: ClassInfo, name: str) -> Type | None:
        # Every assignment is a value the attribute may hold when it is used: `self.transport =
        # NullTransport()`, then `self.transport = smtplib.SMTP(host)` when configured. A library type
        # with blocking methods wins over the others, else the first that can be told.
        told: Type | None = None
        for scope, expr, is_annotation in self._fields(info).get(name, ()):
            found = scope.annotation_type(expr) if is_annotation else scope.type_of(expr)
            if isinstance(found, str) and found in BLOCKING_METHODS:
                return found
            told = told or found
        if told is not None:
            return told
        return next((t for t in (self.attribute_type(p, name) for p in self.parents(info)) if t is not None), None)

    def class_field(self, info: ClassInfo, name: str) -> tuple[Scope, ast.expr] | None:
        """The value a class body gives an attribute (a default), in it or its own bases."""
        for candidate in [info, *self.parents(info)]:
            for scope, expr, is_annotation in self._fields(candidate).get(name, ()):
                if not is_annotation and scope.function is None:
                    return scope, expr
        return None

    # Functions: what they return, what wraps them.

    def returned(self, callee: Function) -> Type | None:
        """What calling an own function gives: its annotation, else its first `return` (or, for a
        generator, as a dependency or a context manager uses it, its first `yield`) whose type can be told."""
        return self._kept(self.memo.returned, id(callee), lambda: self._returned(callee), None)

    def _returned(self, callee: Function) -> Type | None:
        scope = self.at(callee.module, callee)
        found = scope.annotation_type(callee.node.returns) if callee.node.returns is not None else None
        if found is not None:
            return found
        yields = [n.value for n in callee.nodes if isinstance(n, ast.Yield) and n.value is not None]
        values = yields or [n.value for n in callee.nodes if isinstance(n, ast.Return) and n.value is not None]
        return next((t for t in (scope.type_of(value) for value in values) if t is not None), None)

    def returned_function(self, callee: Function) -> Function | None:
        """The function a factory returns: `requires_role("admin")` returns its inner `check`."""
        key = id(callee)
        if key in self.memo.returned_functions:
            return self.memo.returned_functions[key]
        self.memo.returned_functions[key] = None
        scope = self.at(callee.module, callee)
        found = None
        for node in callee.nodes:
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Name | ast.Attribute):
                resolved = scope.resolve(node.value)
                if isinstance(resolved, Function):
                    found = resolved
                    break
        self.memo.returned_functions[key] = found
        return found

    def _decorator(self, decorator: Function) -> tuple[Function, ast.Call | None] | bool:
        """What a decorator does with the function it is given: returns a wrapper (and the wrapper's call
        of it), returns it as it is (True), or something it cannot tell (False)."""
        key = id(decorator)
        if key in self.memo.decorators:
            return self.memo.decorators[key]
        self.memo.decorators[key] = False
        params = _params(decorator)
        found: tuple[Function, ast.Call | None] | bool = False
        if params and decorator.owner is None:
            given = params[0].arg
            for node in decorator.nodes:
                if not isinstance(node, ast.Return) or not isinstance(node.value, ast.Name):
                    continue
                if node.value.id == given:
                    found = True
                elif node.value.id in decorator.nested:
                    wrapper = decorator.nested[node.value.id]
                    found = (wrapper, next((n for n in wrapper.nodes if _calls_name(n, given)), None))
                break
        self.memo.decorators[key] = found
        return found

    def _decorates(self, callee: Function, call: ast.Call, depth: int) -> Wrapped | None:
        """`deco(fn)` written as a call: the wrapper `deco` returns around the own function `fn`."""
        if not call.args:
            return None
        given = self.resolve(call.args[0], depth + 1)
        if not isinstance(given, Function):
            return None
        found = self._decorator(callee)
        return Wrapped((Layer(call.func, *found),), given) if isinstance(found, tuple) else None

    def wrappers(self, function: Function) -> tuple[Layer, ...]:
        """The wrappers the app's own decorators put around `function`, outermost first: what runs when
        its name is called."""
        key = id(function)
        if key in self.memo.wrappers:
            return self.memo.wrappers[key]
        self.memo.wrappers[key] = ()
        scope = self.at(function.module, function.parent)
        layers: list[Layer] = []
        for expr in function.node.decorator_list:
            decorator = scope.resolve(expr.func) if isinstance(expr, ast.Call) else scope.resolve(expr)
            if isinstance(expr, ast.Call) and isinstance(decorator, Function):
                decorator = self.returned_function(decorator)
            if isinstance(decorator, Function):
                found = self._decorator(decorator)
                if isinstance(found, tuple):
                    layers.append(Layer(expr, *found))
        self.memo.wrappers[key] = tuple(layers)
        return self.memo.wrappers[key]

    # Types.

    def type_of(self, expr: ast.expr, depth: int = 0) -> Type | None:
        """The class of the value `expr` evaluates to, when it can be told."""
        if depth > _LIMIT:
            return None
        if isinstance(expr, ast.Await):
            return self.type_of(expr.value, depth + 1)
        if isinstance(expr, ast.BoolOp | ast.IfExp):
            # `shared or Client()`, `a if flag else b`: the first alternative whose type can be told.
            options = expr.values if isinstance(expr, ast.BoolOp) else [expr.body, expr.orelse]
            return next((t for t in (self.type_of(o, depth + 1) for o in options) if t is not None), None)
        if isinstance(expr, ast.Name):
            return self._name_type(expr.id, depth + 1, expr.lineno)
        if isinstance(expr, ast.Attribute):
            return self._attribute_type(expr, depth + 1)
        if isinstance(expr, ast.Subscript):
            owner = self.type_of(expr.value, depth + 1)
            if isinstance(owner, str):
                return ATTRIBUTES.get(owner)
            if isinstance(owner, ClassInfo):
                getitem = self.method(owner, "__getitem__")
                return self.returned(getitem) if getitem is not None else None
            return None
        if isinstance(expr, ast.Call):
            return self._call_type(expr, depth + 1)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div):
            # `Path(root) / "name"` is a path; `"/srv" / path` too (`__rtruediv__`).
            sides = (self.type_of(expr.left, depth + 1), self.type_of(expr.right, depth + 1))
            return PATH if PATH in sides else None
        return None

    def _call_type(self, call: ast.Call, depth: int) -> Type | None:
        if isinstance(call.func, ast.Name):
            made = self._class_parameter(call.func.id, depth + 1)
            if made is not None:
                return made
        callee = self.resolve(call.func, depth + 1)
        if isinstance(callee, ClassInfo):
            return callee
        if isinstance(callee, Function):
            return self.returned(callee)
        if isinstance(callee, Wrapped):
            return self.returned(callee.wrapped)
        if isinstance(callee, Instance):
            method = self.method(callee.cls, "__call__")
            return self.returned(method) if method is not None else None
        if not isinstance(callee, str):
            return None
        if callee in DEPENDS and call.args:
            # `db = Depends(get_db)`: the parameter is what the dependency gives.
            dependency = self.resolve(call.args[0], depth + 1)
            if isinstance(dependency, ClassInfo):
                return dependency
            return self.returned(dependency) if isinstance(dependency, Function) else None
        if self.in_memory(call, callee):
            return None
        if callee in RETURNS:
            return RETURNS[callee]
        kind, sep, _ = callee.rpartition("().")
        if sep and f"{kind}().*" in RETURNS:
            return RETURNS[f"{kind}().*"]
        last = callee.rsplit(".", 1)[-1]
        return callee if "()" not in callee and last[:1].isupper() else None

    def _class_parameter(self, name: str, depth: int) -> Type | None:
        """`backend_class(...)` where the parameter is annotated `Type[BaseOAuth2]` (or `type[...]`): an
        instance of that class."""
        if self.function is None:
            return None
        args = self.function.node.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if arg.arg == name and isinstance(arg.annotation, ast.Subscript):
                head = dotted(arg.annotation.value) or ""
                if head.rsplit(".", 1)[-1] in ("Type", "type"):
                    return self.annotation_type(arg.annotation.slice, depth + 1)
        return None

    def _name_type(self, name: str, depth: int, line: int | None = None) -> Type | None:
        if self.function is not None:
            receiver = self._receiver(name)
            if receiver is not None:
                kind, owner = receiver
                return owner if kind == "instance" else None
            local = self._local_type(name, line)
            if local is not None:
                return local
            if self.is_local(name):
                return None
            enclosing = self._enclosing(name)
            if enclosing is not None:
                return enclosing._name_type(name, depth + 1)
        return self.module_type(self.module, name)

    def module_type(self, module: Module, name: str) -> Type | None:
        """The type of a module-level name (`Items = ItemTable()`), following imports."""
        return self._kept(self.memo.module_types, (id(module), name), lambda: self._module_type(module, name), None)

    def _module_type(self, module: Module, name: str) -> Type | None:
        if name in module.functions or name in module.classes:
            return None
        if name in module.assigns:
            found = self.at(module).type_of(module.assigns[name])
            if found is not None:
                return found
        if name in module.imports:
            split = self.project.split(module.imports[name])
            if split is not None and len(split[1]) == 1:
                return self.module_type(split[0], split[1][0])
        return self._declared(module, name)

    def _declared(self, module: Module, name: str) -> Type | None:
        """A module-level name bound at run time: `_manager: Optional[Manager] = None`, filled in by an
        `init()` that declares it `global`. Its annotation, else what such a function assigns it."""
        top = self.at(module)
        for statement in module.tree.body:
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and statement.target.id == name
            ):
                found = top.annotation_type(statement.annotation)
                if found is not None:
                    return found
        for function in module.all_functions:
            if not any(isinstance(n, ast.Global) and name in n.names for n in function.nodes):
                continue
            scope = self.at(module, function)
            for node in function.nodes:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                    found = scope.type_of(node.value)
                    if found is not None:
                        return found
        return None

    def _kept(self, cache: dict[_K, _V], key: _K, compute: Callable[[], _V], empty: _V) -> _V:
        """A context-free answer, computed once with a fresh depth: `empty` while it is being computed
        (a cycle), and `empty`, not kept, past the nesting limit (so no input recurses without bound)."""
        if key in cache:
            return cache[key]
        if self.memo.active > _NESTING:
            return empty
        cache[key] = empty
        self.memo.active += 1
        try:
            found = compute()
        finally:
            self.memo.active -= 1
        cache[key] = found
        return found

    def _attribute_type(self, expr: ast.Attribute, depth: int) -> Type | None:
        value = expr.value
        if isinstance(value, ast.Attribute) and value.attr == "state":
            space = self._state_space(value.value, depth + 1)
            if space is not None:
                return self._state_type(space, expr.attr, depth + 1)
        owner = self.type_of(value, depth + 1)
        if isinstance(owner, ClassInfo):
            return self.attribute_type(owner, expr.attr)
        if isinstance(owner, str):
            return ATTRIBUTES.get(f"{owner}().{expr.attr}") or ATTRIBUTES.get(owner)
        base = self.resolve(value, depth + 1)
        if isinstance(base, Module):
            return self.module_type(base, expr.attr)
        if isinstance(base, ClassInfo):
            found = self.class_field(base, expr.attr)
            return found[0].type_of(found[1], depth + 1) if found is not None else None
        return None

    def _state_space(self, owner: ast.expr, depth: int) -> str | None:
        """Whose `.state` this is: the app's (`app.state`, `request.app.state`) or the request's."""
        if isinstance(owner, ast.Attribute) and owner.attr == "app":
            return "app"
        if isinstance(owner, ast.Subscript) and isinstance(owner.slice, ast.Constant) and owner.slice.value == "app":
            return "app"
        kind = self.type_of(owner, depth + 1)
        if kind in APP_TYPES:
            return "app"
        if kind in REQUEST_TYPES:
            return "request"
        if kind is None and isinstance(owner, ast.Name):
            if owner.id == "app":
                return "app"
            if owner.id in ("request", "req", "websocket"):
                return "request"
        return None

    def _state_type(self, space: str, name: str, depth: int) -> Type | None:
        if self.memo.state is None:
            self.memo.state = {}
            self._index_state(self.memo.state)
        for scope, value in self.memo.state.get((space, name), ()):
            found = scope.type_of(value, depth + 1)
            if found is not None:
                return found
        return None

    def _index_state(self, table: dict[tuple[str, str], list[tuple[Scope, ast.expr]]]) -> None:
        """Every `X.state.name = value` in the app, wherever it is (the lifespan, module level, a
        middleware), by whose state it is and the name."""
        for module in list(self.project.modules.values()):
            places: list[tuple[Scope, list[ast.AST]]] = [(self.at(module), _top_level(module))]
            places.extend((self.at(module, f), f.nodes) for f in module.all_functions)
            for scope, nodes in places:
                for target, value in _attribute_assignments(nodes):
                    if isinstance(target.value, ast.Attribute) and target.value.attr == "state":
                        space = scope._state_space(target.value.value, 0)
                        if space is not None:
                            table.setdefault((space, target.attr), []).append((scope, value))

    def annotation_type(self, expr: ast.expr | None, depth: int = 0) -> Type | None:
        if expr is None or depth > _LIMIT:
            return None
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            try:
                return self.annotation_type(ast.parse(expr.value, mode="eval").body, depth + 1)
            except SyntaxError:
                return None
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            left = expr.left
            return self.annotation_type(
                expr.right if isinstance(left, ast.Constant) and left.value is None else left, depth + 1
            )
        if isinstance(expr, ast.Subscript):
            base = self.resolve(expr.value, depth + 1)
            inner = expr.slice.elts[0] if isinstance(expr.slice, ast.Tuple) and expr.slice.elts else expr.slice
            if base == "typing.Annotated" and isinstance(expr.slice, ast.Tuple):
                return self._annotated(inner, expr.slice.elts[1:], depth + 1)
            if base in _UNWRAPPED or (isinstance(base, str) and base.startswith("collections.abc.")):
                return self.annotation_type(inner, depth + 1)
            return self.annotation_type(expr.value, depth + 1)
        if isinstance(expr, ast.Name | ast.Attribute):
            alias = self._alias(expr, depth + 1)
            if alias is not None:
                module, value = alias
                return self.at(module).annotation_type(value, depth + 1)
            resolved = self.resolve(expr, depth + 1)
            if isinstance(resolved, ClassInfo | str):
                return resolved
        return None

    def _annotated(self, inner: ast.expr, metadata: list[ast.expr], depth: int) -> Type | None:
        """`Annotated[T, Depends(get_db)]`: T when it is an own class, else (`Annotated[Any, ...]`, a
        library type) what the dependency gives, when that can be told; else T."""
        written = self.annotation_type(inner, depth + 1)
        if isinstance(written, ClassInfo):
            return written
        for extra in metadata:
            if isinstance(extra, ast.Call) and extra.args and self.resolve(extra.func, depth + 1) in DEPENDS:
                given = self._call_type(extra, depth + 1)
                if given is not None:
                    return given
        return written

    def _alias(self, expr: ast.Name | ast.Attribute, depth: int) -> tuple[Module, ast.expr] | None:
        """A module-level type alias (`Db = Annotated[Connection, Depends(get_db)]`) the name refers to."""
        if isinstance(expr, ast.Name):
            name = expr.id
            if self.function is not None and name in self._local().values:
                return None
            module = self.module
            if name in module.assigns and name not in module.functions and name not in module.classes:
                value = module.assigns[name]
                return (
                    (module, value) if isinstance(value, ast.Subscript | ast.BinOp | ast.Name | ast.Attribute) else None
                )
            if name in module.imports:
                found = self.project.split(module.imports[name])
                if found and len(found[1]) == 1:
                    target, (attr,) = found
                    aliased = target.assigns.get(attr)
                    if isinstance(aliased, ast.Subscript | ast.BinOp | ast.Name | ast.Attribute):
                        return target, aliased
            return None
        base = self.resolve(expr.value, depth + 1)
        if isinstance(base, Module):
            member = base.assigns.get(expr.attr)
            if isinstance(member, ast.Subscript | ast.BinOp | ast.Name | ast.Attribute):
                return base, member
        return None

    # Locals.

    def _local(self) -> _Bindings:
        if self._bindings is None:
            self._bindings = _local_bindings(self.function)
        return self._bindings

    def _receiver(self, name: str) -> tuple[str, ClassInfo] | None:
        """`self` or `cls` of the method this code is in (through closures): the kind and the class."""
        function = self.function
        while function is not None:
            if function.owner is not None:
                params = _params(function)
                if not params or params[0].arg != name:
                    return None
                decorators = _decorator_names(function)
                if "staticmethod" in decorators:
                    return None
                is_class = "classmethod" in decorators or function.name in ("__new__", "__init_subclass__")
                return ("class" if is_class else "instance"), function.owner
            if self.at(function.module, function).is_local(name):
                return None
            function = function.parent
        return None

    def _enclosing(self, name: str) -> Scope | None:
        """The scope of the enclosing function a free variable is bound in (a closure's)."""
        function = self.function.parent if self.function is not None else None
        while function is not None:
            scope = self.at(function.module, function)
            if scope.is_local(name):
                return scope
            function = function.parent
        return None

    def _local_type(self, name: str, line: int | None = None) -> Type | None:
        """A local's type where it is used, on `line`: its annotation, else the latest assignment before
        that line whose type can be told, else any later one (a loop may bring it round)."""
        if self.function is None or name in self._busy:
            return None
        values = self._local().values.get(name, ())
        before = len(values) if line is None else sum(1 for value in values if value.lineno <= line)
        return self._kept(self._types, (name, before), lambda: self._local_of(name, before), None)

    def _local_of(self, name: str, before: int) -> Type | None:
        bindings = self._local()
        self._busy.add(name)
        try:
            if name in bindings.annotations:
                found = self.annotation_type(bindings.annotations[name])
                if found is not None:
                    return found
            values = bindings.values.get(name, [])
            for value in [*reversed(values[:before]), *values[before:]]:
                found = self.type_of(value)
                if found is not None and id(value) in bindings.entered:
                    found = self._entered(found)
                if found is not None:
                    return found
            return self._constructed_with(name) if name in bindings.params else None
        finally:
            self._busy.discard(name)

    def _constructed_with(self, name: str) -> Type | None:
        """An unannotated parameter of `__init__`: what the app's own code constructs the class with
        (`RedisDict(redis.Redis(...), "sessions")`), the first argument whose type can be told."""
        function = self.function
        if function is None or function.owner is None or function.name != "__init__":
            return None
        params = [p.arg for p in _params(function)]
        position = params.index(name) - 1 if name in params else None
        for scope, call in self.constructions(function.owner):
            argument = next((k.value for k in call.keywords if k.arg == name), None)
            if argument is None and position is not None and 0 <= position < len(call.args):
                argument = call.args[position]
                if any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
                    argument = None
            found = scope.type_of(argument) if argument is not None else None
            if found is not None:
                return found
        return None

    def constructions(self, info: ClassInfo) -> list[tuple[Scope, ast.Call]]:
        """Where the app's own code calls a class (or a subclass that keeps its `__init__`) to build one."""
        if self.memo.constructions is None:
            self.memo.constructions = {}
            self._index_constructions(self.memo.constructions)
        found = list(self.memo.constructions.get(id(info), ()))
        for sub in self.subclasses(info):
            if "__init__" not in sub.methods:
                found.extend(self.memo.constructions.get(id(sub), ()))
        return found

    def _index_constructions(self, table: dict[int, list[tuple[Scope, ast.Call]]]) -> None:
        # Only calls whose last name is an own class's are resolved: the rest cannot build one.
        names = {info.node.name for module in self.project.modules.values() for info in module.all_classes}
        for module in list(self.project.modules.values()):
            for call, function in module.calls:
                func = call.func
                last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if last not in names:
                    continue
                scope = self.at(module, function)
                resolved = scope.resolve(func)
                if isinstance(resolved, ClassInfo):
                    table.setdefault(id(resolved), []).append((scope, call))

    def _entered(self, kind: Type) -> Type | None:
        """What `with x as y` binds: `x.__enter__()`'s value for an own class that says what it returns."""
        if not isinstance(kind, ClassInfo):
            return kind
        enter = self.method(kind, "__enter__") or self.method(kind, "__aenter__")
        if enter is None:
            return kind
        return self.returned(enter) or kind

    def is_local(self, name: str) -> bool:
        if self.function is None:
            return False
        bindings = self._local()
        return name in bindings.values or name in bindings.annotations

    # Values.

    def in_memory(self, call: ast.Call, callee: str) -> bool:
        """`zipfile.ZipFile(io.BytesIO(data))`: an archive in memory, not a file."""
        where = IN_MEMORY.get(callee)
        if where is None:
            return False
        keyword, position = where
        argument = next((k.value for k in call.keywords if k.arg == keyword), None)
        if argument is None and position is not None and len(call.args) > position:
            argument = call.args[position]
        return argument is not None and self.type_of(argument) in _IN_MEMORY_FILES

    def keywords(self, call: ast.Call) -> dict[str, ast.expr] | None:
        """The keywords a call passes, with `**options` read where `options` is a dict literal (or
        `dict(...)`) the code shows; None when some `**` cannot be read."""
        found: dict[str, ast.expr] = {}
        for keyword in call.keywords:
            if keyword.arg is not None:
                found[keyword.arg] = keyword.value
                continue
            spread = self._dict_literal(keyword.value)
            if spread is None:
                return None
            found.update(spread)
        return found

    def _dict_literal(self, expr: ast.expr, depth: int = 0) -> dict[str, ast.expr] | None:
        if depth > 4:
            return None
        if isinstance(expr, ast.Dict):
            if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in expr.keys):
                return None
            return {str(k.value): v for k, v in zip(expr.keys, expr.values, strict=True) if isinstance(k, ast.Constant)}
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict" and not expr.args:
            return self.keywords(expr)
        value = self._bound(expr)
        return value[0]._dict_literal(value[1], depth + 1) if value is not None else None

    def _bound(self, expr: ast.expr) -> tuple[Scope, ast.expr] | None:
        """The one expression a name is bound to: a local assigned once (not a parameter), or a module-level
        name (imported ones followed); a class attribute's default."""
        if isinstance(expr, ast.Name):
            if self.function is not None and self.is_local(expr.id):
                bindings = self._local()
                values = bindings.values.get(expr.id, [])
                if expr.id in bindings.params or len(values) != 1:
                    return None
                return self, values[0]
            module = self.module
            if expr.id in module.assigns:
                return self.at(module), module.assigns[expr.id]
            if expr.id in module.imports:
                split = self.project.split(module.imports[expr.id])
                if split is not None and len(split[1]) == 1 and split[1][0] in split[0].assigns:
                    return self.at(split[0]), split[0].assigns[split[1][0]]
            return None
        if isinstance(expr, ast.Attribute):
            owner = self.type_of(expr.value)
            if isinstance(owner, ClassInfo):
                return self.class_field(owner, expr.attr)
            base = self.resolve(expr.value)
            if isinstance(base, ClassInfo):
                return self.class_field(base, expr.attr)
            if isinstance(base, Module) and expr.attr in base.assigns:
                return self.at(base), base.assigns[expr.attr]
        return None

    def display(self, expr: ast.expr, depth: int = 0) -> tuple[Scope, ast.List | ast.Tuple | ast.Set | ast.Dict] | None:
        """The list, tuple, set or dict display an expression is, or names (through names bound once)."""
        if isinstance(expr, ast.List | ast.Tuple | ast.Set | ast.Dict):
            return self, expr
        bound = self._bound(expr) if depth <= 4 else None
        return bound[0].display(bound[1], depth + 1) if bound is not None else None

    def displays(self, expr: ast.expr, depth: int = 0) -> list[tuple[Scope, ast.List | ast.Tuple | ast.Set | ast.Dict]]:
        """The displays a sum of them is made of (`API_ROUTES + PAGE_ROUTES`, each perhaps imported), each
        with the scope its elements are read in; one display is a sum of one."""
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add) and depth <= 8:
            return [*self.displays(expr.left, depth + 1), *self.displays(expr.right, depth + 1)]
        if not isinstance(expr, ast.List | ast.Tuple | ast.Set | ast.Dict):
            bound = self._bound(expr) if depth <= 8 else None
            if bound is not None and isinstance(bound[1], ast.BinOp):
                return bound[0].displays(bound[1], depth + 1)
        shown = self.display(expr)
        return [shown] if shown is not None else []

    def constant(self, expr: ast.expr, depth: int = 0) -> object:
        """The constant an expression always has (through names, settings defaults), else UNKNOWN."""
        if depth > 4:
            return UNKNOWN
        if isinstance(expr, ast.Constant):
            return expr.value
        bound = self._bound(expr)
        return bound[0].constant(bound[1], depth + 1) if bound is not None else UNKNOWN


def _attribute_assignments(nodes: list[ast.AST]) -> Iterator[tuple[ast.Attribute, ast.expr]]:
    """`x.attr = value` (annotated or not) among `nodes`: each target and its value."""
    for node in nodes:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Attribute):
                yield target, value


def _calls_name(node: ast.AST, name: str) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _top_level(module: Module) -> list[ast.AST]:
    """The nodes a module evaluates at import, outside its functions' bodies."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(module.tree.body)
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _local_bindings(function: Function | None) -> _Bindings:
    found = _Bindings()
    if function is None:
        return found
    args = function.node.args
    positional = [*args.posonlyargs, *args.args]
    defaults: dict[str, ast.expr] = {
        arg.arg: default
        for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    }
    defaults.update({arg.arg: d for arg, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
    for arg in (*positional, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a is not None)):
        found.params.add(arg.arg)
        if arg.annotation is not None and arg not in (args.vararg, args.kwarg):
            found.annotations[arg.arg] = arg.annotation
        values = found.values.setdefault(arg.arg, [])
        if arg.arg in defaults:
            values.append(defaults[arg.arg])
    for node in function.nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.values.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.annotations.setdefault(node.target.id, node.annotation)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name):
                    found.values.setdefault(item.optional_vars.id, []).append(item.context_expr)
                    found.entered.add(id(item.context_expr))
        elif isinstance(node, ast.NamedExpr):
            found.values.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            for bound in ast.walk(node.target):
                if isinstance(bound, ast.Name):
                    found.values.setdefault(bound.id, [])
    for values in found.values.values():
        values.sort(key=lambda value: (value.lineno, value.col_offset))
    return found
