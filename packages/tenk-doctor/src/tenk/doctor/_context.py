"""What every rule is handed: the target, the call graph, its entry points, and each call resolved once."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property

from tenk.doctor._entrypoints import Entry, EntryPoints, Kind
from tenk.doctor._findings import Finding, Severity, Step
from tenk.doctor._follow import Graph
from tenk.doctor._names import Resolved, Scope, scope_of
from tenk.doctor._project import Function, Module, Target
from tenk.doctor._versions import Versions


@dataclass(frozen=True)
class ResolvedCall:
    module: Module
    function: Function | None
    node: ast.Call
    callee: Resolved | None


@dataclass
class Context:
    target: Target
    graph: Graph
    entries: EntryPoints
    depth: int
    # The versions the app runs on, as read beside it: a rule whose cost they lack stays silent.
    versions: Versions

    def scope(self, module: Module, function: Function | None) -> Scope:
        return scope_of(self.target.project, module, function)

    @cached_property
    def served(self) -> dict[int, tuple[Entry, tuple[Step, ...]]]:
        """The own functions a served request runs (reached from a route, a dependency or a middleware),
        by id, with the entry point and the shortest chain from it."""
        return self._reached("route", "dependency", "middleware")

    @cached_property
    def started(self) -> dict[int, tuple[Entry, tuple[Step, ...]]]:
        """The own functions the lifespan runs, at start-up or shut-down: before or after any request."""
        return self._reached("lifespan")

    def _reached(self, *kinds: Kind) -> dict[int, tuple[Entry, tuple[Step, ...]]]:
        found: dict[int, tuple[Entry, tuple[Step, ...]]] = {}
        for entry in self.entries.of_kind(*kinds):
            for function, chain in self.graph.walk(entry.function, self.depth):
                full = (*entry.declared, *chain)
                if id(function) not in found or len(full) < len(found[id(function)][1]):
                    found[id(function)] = (entry, full)
        return found

    @cached_property
    def calls(self) -> list[ResolvedCall]:
        """Every call written in the target's modules, at any level, resolved in its own scope."""
        found: list[ResolvedCall] = []
        for module in self.target.modules:
            for node, function in module.calls:
                found.append(ResolvedCall(module, function, node, self.scope(module, function).resolve(node.func)))
        return found


def finding(
    rule: str,
    module: Module,
    node: ast.expr | ast.stmt,
    message: str,
    chain: tuple[Step, ...] = (),
    *,
    case: str | None = None,
    fix: str | None = None,
    severity: Severity | None = None,
) -> Finding:
    return Finding(
        rule,
        module.path,
        node.lineno,
        node.col_offset + 1,
        module.code(node.lineno),
        message,
        chain,
        case,
        fix,
        severity=severity,
    )


def short(node: ast.expr) -> str:
    """The called expression, shortened: `db.query` for `db.query(Item).all()`'s first call."""
    text = ast.unparse(node.func if isinstance(node, ast.Call) else node)
    return text if len(text) <= 60 else text[:57] + "..."


def segment(module: Module, node: ast.expr) -> str:
    """`node` as the source writes it (its quotes, its spacing), where it sits on one line."""
    if node.end_lineno == node.lineno and node.end_col_offset is not None:
        return module.lines[node.lineno - 1].encode()[node.col_offset : node.end_col_offset].decode()
    return ast.unparse(node)


def rewritten(module: Module, node: ast.expr, replacement: str | None) -> str | None:
    """The flagged line with `node` (on that one line) replaced: the fix as a diff of the line itself."""
    if replacement is None or node.end_lineno != node.lineno or node.end_col_offset is None:
        return None
    line = module.lines[node.lineno - 1].encode()
    # Offsets count UTF-8 bytes.
    new = line[: node.col_offset].decode() + replacement + line[node.end_col_offset :].decode()
    return f"-    {line.decode().strip()}\n+    {new.strip()}"


def offloaded(module: Module, node: ast.Call) -> str | None:
    """The flagged call handed to a thread (`f(a, b=1)` -> `await asyncio.to_thread(f, a, b=1)`), as a diff
    of its line."""
    arguments = [segment(module, node.func), *(segment(module, arg) for arg in node.args)]
    arguments += [
        f"{kw.arg}={segment(module, kw.value)}" if kw.arg else f"**{segment(module, kw.value)}" for kw in node.keywords
    ]
    return rewritten(module, node, f"await asyncio.to_thread({', '.join(arguments)})")
