"""One run of doctor: load the target, find its entry points, run every rule, suppress, sort."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tenk.doctor import _suppress
from tenk.doctor._context import Context
from tenk.doctor._entrypoints import find_entry_points
from tenk.doctor._findings import Finding
from tenk.doctor._follow import DEFAULT_DEPTH, Graph
from tenk.doctor._project import Target, load_target
from tenk.doctor.rules import blocking, clients, labels, middleware, server, threads, validation

CHECKS: tuple[Callable[[Context], Iterator[Finding]], ...] = (
    blocking.check,
    clients.check_per_request,
    clients.check_timeouts_and_limits,
    middleware.check,
    labels.check,
    server.check,
    threads.check,
    validation.check,
)


@dataclass(frozen=True)
class Report:
    target: str
    findings: tuple[Finding, ...]
    suppressed: int
    files: int
    lines: int
    entry_points: int
    seconds: float
    context: Context


def diagnose(spec: str, depth: int = DEFAULT_DEPTH, search_path: list[str] | None = None) -> Report:
    """Analyse `spec` (a path, or `module:app`) statically. Never imports or runs the app."""
    started = time.perf_counter()
    _suppress.forget()
    # Parsing allocates millions of nodes that all live until the end: the cyclic collector would
    # walk them again and again for nothing (a third of the time on large apps).
    collecting = gc.isenabled()
    gc.disable()
    try:
        target = load_target(spec, search_path)
        return _diagnose(spec, target, depth, started)
    finally:
        if collecting:
            gc.enable()


def _diagnose(spec: str, target: Target, depth: int, started: float) -> Report:
    graph = Graph(target.project)
    context = Context(target, graph, find_entry_points(graph, target.modules), depth)
    best: dict[tuple[str, str, int, int], Finding] = {}
    for check in CHECKS:
        for found in check(context):
            key = (found.rule, str(found.path), found.line, found.col)
            if key not in best or len(found.chain) < len(best[key].chain):
                best[key] = found
    for module in target.modules:
        for found in _suppress.missing_reasons(module.path):
            best[(found.rule, str(found.path), found.line, found.col)] = found
    kept = [f for f in best.values() if f.rule == "suppression-reason" or not _suppress.is_suppressed(f)]
    return Report(
        spec,
        tuple(sorted(kept, key=Finding.sort_key)),
        len(best) - len(kept),
        len(target.modules),
        sum(len(module.lines) for module in target.modules),
        len(context.entries.entries),
        time.perf_counter() - started,
        context,
    )
