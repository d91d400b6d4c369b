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
from dataclasses import dataclass

from tenk.doctor._findings import Step
from tenk.doctor._names import Resolved, Scope, dotted
from tenk.doctor._project import ClassInfo, Function, Module, Project, children

DEFAULT_DEPTH = 4
CACHES = {"lru_cache", "cache", "cached", "alru_cache", "cached_property"}


@dataclass(frozen=True)
class CallSite:
    node: ast.Call
    callee: Resolved | None
    # `await call(...)`: whatever the annotation says, a sync client's method cannot be awaited, so an
    # awaited call is an async client's (prefect annotates its AsyncSession as `sa.orm.Session`).
    awaited: bool = False


def called_name(call: ast.Call) -> str:
    """The last name of what is called: `to_thread` for `asyncio.to_thread(...)`."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def is_cached(function: Function) -> bool:
    for decorator in function.node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = dotted(target) or ""
        if name.rsplit(".", 1)[-1] in CACHES:
            return True
    return False


def calls_in(body: list[ast.stmt]) -> list[ast.Call]:
    """The calls a body makes itself: not those of the functions or lambdas it defines."""
    found: list[ast.Call] = []
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Call):
            found.append(node)
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
        self._scopes: dict[int, Scope] = {}

    def scope(self, function: Function) -> Scope:
        key = id(function)
        if key not in self._scopes:
            self._scopes[key] = Scope(self.project, function.module, function)
        return self._scopes[key]

    def module_scope(self, module: Module) -> Scope:
        return Scope(self.project, module)

    def calls(self, function: Function) -> list[CallSite]:
        key = id(function)
        if key not in self._calls:
            scope = self.scope(function)
            awaited = {id(node.value) for node in function.nodes if isinstance(node, ast.Await)}
            self._calls[key] = [
                CallSite(call, scope.resolve(call.func), id(call) in awaited) for call in calls_in(function.node.body)
            ]
        return self._calls[key]

    def walk(
        self,
        root: Function,
        depth: int,
        *,
        into_async: bool = True,
        follow: Callable[[Function, CallSite], bool] | None = None,
    ) -> Iterator[tuple[Function, tuple[Step, ...]]]:
        """Every own function `root` reaches within `depth` calls, with the shortest chain to it.

        The chain starts with the root's definition, then each call site on the way."""
        start = (step(root, root.node),)
        seen = {id(root)}
        queue: deque[tuple[Function, tuple[Step, ...], int]] = deque([(root, start, 0)])
        while queue:
            function, chain, level = queue.popleft()
            yield function, chain
            if level >= depth:
                continue
            for site in self.calls(function):
                callee = self.callee(site.callee)
                if callee is None or id(callee) in seen or is_cached(callee):
                    continue
                if (callee.is_async and not into_async) or (follow is not None and not follow(function, site)):
                    continue
                seen.add(id(callee))
                queue.append((callee, (*chain, step(function, site.node)), level + 1))

    def callee(self, resolved: Resolved | None) -> Function | None:
        """The app's own function a call runs: the function, or a class's `__init__`; None for anything else."""
        if isinstance(resolved, Function):
            return resolved
        if isinstance(resolved, ClassInfo):
            return resolved.methods.get("__init__")
        return None
