"""What a name in the app's source refers to: an own function, class or module, or a third-party name.

Third-party names come out qualified and in one spelling (`redis.client.Redis` -> `redis.Redis`). A
method called on an instance reads `redis.Redis().get`: the type is inferred from annotations (aliases
and `Annotated[...]` included), constructor calls, `with ... as` and known factories (`psycopg.connect`
returns a `psycopg.Connection`). Nothing is imported: the rules match on these strings.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from functools import lru_cache

from tenk.doctor._project import ClassInfo, Function, Module, Project

Type = str | ClassInfo
Resolved = Function | ClassInfo | Module | str

# Spellings of the same third-party name, longest first when applied.
CANONICAL = {
    "redis.client.StrictRedis": "redis.Redis",
    "redis.client.Redis": "redis.Redis",
    "redis.StrictRedis": "redis.Redis",
    "redis.connection.ConnectionPool": "redis.ConnectionPool",
    "redis.asyncio.client.Redis": "redis.asyncio.Redis",
    "redis.asyncio.StrictRedis": "redis.asyncio.Redis",
    "redis.asyncio.connection.ConnectionPool": "redis.asyncio.ConnectionPool",
    "redis.asyncio.utils.from_url": "redis.asyncio.from_url",
    "redis.utils.from_url": "redis.from_url",
    "psycopg.connection.Connection": "psycopg.Connection",
    "psycopg.connection_async.AsyncConnection": "psycopg.AsyncConnection",
    "psycopg.cursor.Cursor": "psycopg.Cursor",
    "sqlalchemy.orm.session.Session": "sqlalchemy.orm.Session",
    "sqlalchemy.orm.session.sessionmaker": "sqlalchemy.orm.sessionmaker",
    "sqlalchemy.engine.base.Engine": "sqlalchemy.Engine",
    "sqlalchemy.engine.Engine": "sqlalchemy.Engine",
    "sqlalchemy.engine.create_engine": "sqlalchemy.create_engine",
    "sqlalchemy.engine.create.create_engine": "sqlalchemy.create_engine",
    "sqlmodel.create_engine": "sqlalchemy.create_engine",
    "sqlmodel.Session": "sqlalchemy.orm.Session",
    "sqlalchemy.ext.asyncio.engine.create_async_engine": "sqlalchemy.ext.asyncio.create_async_engine",
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
    "requests.api": "requests",
    "requests.sessions.Session": "requests.Session",
    "requests.session": "requests.Session",
    "httpx._client.Client": "httpx.Client",
    "httpx._client.AsyncClient": "httpx.AsyncClient",
    "aiohttp.client.ClientSession": "aiohttp.ClientSession",
    "typing_extensions.Annotated": "typing.Annotated",
    "typing_extensions.Optional": "typing.Optional",
    "pathlib.PosixPath": "pathlib.Path",
}

# What a third-party call returns, when it is not simply the class called.
RETURNS = {
    "redis.Redis.from_url": "redis.Redis",
    "redis.from_url": "redis.Redis",
    "redis.Redis().pipeline": "redis.client.Pipeline",
    "redis.asyncio.Redis.from_url": "redis.asyncio.Redis",
    "redis.asyncio.from_url": "redis.asyncio.Redis",
    "redis.ConnectionPool.from_url": "redis.ConnectionPool",
    "redis.asyncio.ConnectionPool.from_url": "redis.asyncio.ConnectionPool",
    "psycopg.connect": "psycopg.Connection",
    "psycopg.Connection.connect": "psycopg.Connection",
    "psycopg.Connection().cursor": "psycopg.Cursor",
    "psycopg.Connection().execute": "psycopg.Cursor",
    "psycopg.AsyncConnection.connect": "psycopg.AsyncConnection",
    "psycopg_pool.ConnectionPool().connection": "psycopg.Connection",
    "psycopg_pool.ConnectionPool().getconn": "psycopg.Connection",
    "psycopg2.connect": "psycopg2.connection",
    "psycopg2.connection().cursor": "psycopg2.cursor",
    "sqlite3.connect": "sqlite3.Connection",
    "sqlite3.Connection().cursor": "sqlite3.Cursor",
    "pymysql.connect": "pymysql.Connection",
    "pymysql.Connection().cursor": "pymysql.cursors.Cursor",
    "sqlalchemy.create_engine": "sqlalchemy.Engine",
    "sqlalchemy.Engine().connect": "sqlalchemy.Connection",
    "sqlalchemy.Engine().begin": "sqlalchemy.Connection",
    "sqlalchemy.orm.sessionmaker": "sqlalchemy.orm.sessionmaker",
    "sqlalchemy.orm.scoped_session": "sqlalchemy.orm.scoped_session",
    "sqlalchemy.orm.sessionmaker()": "sqlalchemy.orm.Session",
    "sqlalchemy.orm.scoped_session()": "sqlalchemy.orm.Session",
    "requests.Session": "requests.Session",
    "builtins.open": "io.TextIOWrapper",
    "asyncpg.connect": "asyncpg.Connection",
    "asyncpg.create_pool": "asyncpg.Pool",
}


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


@dataclass
class Scope:
    """Name resolution inside one function (or a module's top level, with `function=None`)."""

    project: Project
    module: Module
    function: Function | None = None
    _locals: dict[str, list[ast.expr]] | None = field(default=None, repr=False)
    _annotations: dict[str, ast.expr] | None = field(default=None, repr=False)
    _busy: set[str] = field(default_factory=set, repr=False)

    def at(self, module: Module, function: Function | None = None) -> Scope:
        return Scope(self.project, module, function)

    def resolve(self, expr: ast.expr, depth: int = 0) -> Resolved | None:
        if depth > 8:
            return None
        if isinstance(expr, ast.Name):
            return self._resolve_name(expr.id, depth)
        if isinstance(expr, ast.Attribute):
            # A bare name is a local's type or nothing (a module-level name resolves below, as a name).
            if isinstance(expr.value, ast.Name):
                owner = self._local_type(expr.value.id, depth + 1)
            else:
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
            return None
        if isinstance(expr, ast.Call):
            kind = self.type_of(expr, depth + 1)
            return f"{kind}()" if isinstance(kind, str) else None
        return None

    def _resolve_name(self, name: str, depth: int) -> Resolved | None:
        scope = self.function
        while scope is not None:
            if name in scope.nested:
                return scope.nested[name]
            scope = scope.parent
        local = self._local_type(name, depth + 1) if self.function is not None else None
        if local is not None:
            return f"{local}()" if isinstance(local, str) else None
        if self.is_local(name):
            # A parameter or variable of unknown type: never the module-level name it shadows.
            return None
        module = self.module
        if name in module.functions:
            return module.functions[name]
        if name in module.classes:
            return module.classes[name]
        if name in module.imports:
            return self.lookup(module.imports[name], depth + 1)
        if name in module.assigns:
            value = module.assigns[name]
            top = self.at(module)
            if isinstance(value, ast.Name | ast.Attribute):
                return top.resolve(value, depth + 1)
            if isinstance(value, ast.Call):
                kind = top.type_of(value, depth + 1)
                return f"{kind}()" if isinstance(kind, str) else None
            return None
        if hasattr(builtins, name):
            return f"builtins.{name}"
        return None

    def lookup(self, qualified: str, depth: int = 0) -> Resolved | None:
        found = self.project.split(qualified)
        if found is None:
            return canonical(qualified)
        module, rest = found
        return self.member(module, rest, depth + 1) if rest else module

    def member(self, module: Module, attrs: list[str], depth: int = 0) -> Resolved | None:
        if not attrs:
            return module
        if depth > 8:
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
        if head in module.assigns and not rest:
            return self.at(module)._resolve_name(head, depth + 1)
        return None

    def method(self, info: ClassInfo, name: str, depth: int = 0) -> Function | None:
        if name in info.methods:
            return info.methods[name]
        if depth > 5:
            return None
        scope = self.at(info.module)
        for base in info.node.bases:
            resolved = scope.resolve(base)
            if isinstance(resolved, ClassInfo):
                found = self.method(resolved, name, depth + 1)
                if found is not None:
                    return found
        return None

    def bases(self, info: ClassInfo, depth: int = 0) -> list[str]:
        """Every third-party base class of `info`, through its own base classes."""
        found: list[str] = []
        scope = self.at(info.module)
        for base in info.node.bases:
            resolved = scope.resolve(base)
            if isinstance(resolved, str):
                found.append(resolved)
            elif isinstance(resolved, ClassInfo) and depth < 5:
                found.extend(self.bases(resolved, depth + 1))
        return found

    def type_of(self, expr: ast.expr, depth: int = 0) -> Type | None:
        """The class of the value `expr` evaluates to, when it can be told."""
        if depth > 8:
            return None
        if isinstance(expr, ast.Await):
            return self.type_of(expr.value, depth + 1)
        if isinstance(expr, ast.BoolOp | ast.IfExp):
            # `shared or Client()`, `a if flag else b`: the first alternative whose type can be told.
            options = expr.values if isinstance(expr, ast.BoolOp) else [expr.body, expr.orelse]
            return next((t for t in (self.type_of(o, depth + 1) for o in options) if t is not None), None)
        if isinstance(expr, ast.Name):
            if self.function is not None:
                local = self._local_type(expr.id, depth + 1)
                if local is not None:
                    return local
            value = self.module.assigns.get(expr.id)
            if value is not None and expr.id not in self.module.functions:
                return self.at(self.module).type_of(value, depth + 1)
            return None
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and expr.value.id == "self" and self.function is not None:
                owner = self._owner()
                if owner is not None and expr.attr in owner.attributes:
                    method_scope = self.at(owner.module)
                    return method_scope.type_of(owner.attributes[expr.attr], depth + 1)
            return None
        if isinstance(expr, ast.Call):
            callee = self.resolve(expr.func, depth + 1)
            if isinstance(callee, ClassInfo):
                return callee
            if isinstance(callee, Function):
                return self._returned(callee, depth + 1)
            if isinstance(callee, str):
                if callee in RETURNS:
                    return RETURNS[callee]
                last = callee.rsplit(".", 1)[-1]
                return callee if "()" not in callee and last[:1].isupper() else None
        return None

    def _returned(self, callee: Function, depth: int) -> Type | None:
        """What an own function returns: its annotation, else the first `return` whose type can be told."""
        scope = self.at(callee.module, callee)
        if callee.node.returns is not None:
            return scope.annotation_type(callee.node.returns, depth + 1)
        for node in callee.nodes:
            if isinstance(node, ast.Return) and node.value is not None:
                found = scope.type_of(node.value, depth + 1)
                if found is not None:
                    return found
        return None

    def _owner(self) -> ClassInfo | None:
        function = self.function
        while function is not None and function.owner is None:
            function = function.parent
        return function.owner if function is not None else None

    def annotation_type(self, expr: ast.expr | None, depth: int = 0) -> Type | None:
        if expr is None or depth > 8:
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
            if base in ("typing.Annotated", "typing.Optional", "typing.Union"):
                return self.annotation_type(inner, depth + 1)
            if base in ("typing.AsyncIterator", "typing.Iterator", "typing.AsyncGenerator", "typing.Generator") or (
                isinstance(base, str) and base.startswith("collections.abc.")
            ):
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

    def _alias(self, expr: ast.Name | ast.Attribute, depth: int) -> tuple[Module, ast.expr] | None:
        """A module-level type alias (`Db = Annotated[Connection, Depends(get_db)]`) the name refers to."""
        if isinstance(expr, ast.Name):
            name = expr.id
            if self.function is not None and name in self._local_exprs():
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

    def _local_exprs(self) -> dict[str, list[ast.expr]]:
        if self._locals is None:
            self._locals, self._annotations = _local_bindings(self.function)
        return self._locals

    def _local_type(self, name: str, depth: int) -> Type | None:
        if self.function is None or name in self._busy:
            return None
        exprs = self._local_exprs()
        annotations = self._annotations or {}
        self._busy.add(name)
        try:
            if name == "self":
                return self._owner()
            if name in annotations:
                found = self.annotation_type(annotations[name], depth + 1)
                if found is not None:
                    return found
            for value in exprs.get(name, ()):
                found = self.type_of(value, depth + 1)
                if found is not None:
                    return found
        finally:
            self._busy.discard(name)
        return None

    def is_local(self, name: str) -> bool:
        if self.function is None:
            return False
        return name in self._local_exprs() or name in (self._annotations or {})


def _local_bindings(function: Function | None) -> tuple[dict[str, list[ast.expr]], dict[str, ast.expr]]:
    values: dict[str, list[ast.expr]] = {}
    annotations: dict[str, ast.expr] = {}
    if function is None:
        return values, annotations
    args = function.node.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if arg.annotation is not None:
            annotations[arg.arg] = arg.annotation
        else:
            values.setdefault(arg.arg, [])
    for node in function.nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotations.setdefault(node.target.id, node.annotation)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name):
                    values.setdefault(item.optional_vars.id, []).append(item.context_expr)
        elif isinstance(node, ast.NamedExpr):
            values.setdefault(node.target.id, []).append(node.value)
    return values, annotations
