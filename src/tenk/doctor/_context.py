"""What every rule is handed: the target, the call graph, its entry points, and each call resolved once."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property

from tenk.doctor._entrypoints import EntryPoints
from tenk.doctor._findings import Finding, Step
from tenk.doctor._follow import Graph
from tenk.doctor._names import Resolved, Scope
from tenk.doctor._project import Function, Module, Target


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

    def scope(self, module: Module, function: Function | None) -> Scope:
        return self.graph.scope(function) if function is not None else self.graph.module_scope(module)

    @cached_property
    def calls(self) -> list[ResolvedCall]:
        """Every call written in the target's modules, at any level, resolved in its own scope."""
        found: list[ResolvedCall] = []
        for module in self.target.modules:
            scopes: dict[int, Scope] = {}
            for node, function in module.calls:
                key = id(function)
                if key not in scopes:
                    scopes[key] = self.scope(module, function)
                found.append(ResolvedCall(module, function, node, scopes[key].resolve(node.func)))
        return found


def finding(
    rule: str, module: Module, node: ast.expr | ast.stmt, message: str, chain: tuple[Step, ...] = ()
) -> Finding:
    return Finding(rule, module.path, node.lineno, node.col_offset + 1, module.code(node.lineno), message, chain)


def short(node: ast.Call) -> str:
    text = ast.unparse(node.func)
    return text if len(text) <= 60 else text[:57] + "..."
