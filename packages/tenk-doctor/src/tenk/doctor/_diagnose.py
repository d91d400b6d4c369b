"""One run of doctor: load the target, find its entry points, run every rule, suppress, sort."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tenk.doctor import _suppress
from tenk.doctor._context import Context
from tenk.doctor._costs import table
from tenk.doctor._entrypoints import find_entry_points
from tenk.doctor._findings import SEVERITY_RANK, Finding
from tenk.doctor._follow import DEFAULT_DEPTH, Graph
from tenk.doctor._notes import gather
from tenk.doctor._project import Target, Unread, load_target
from tenk.doctor._rules import severity_of
from tenk.doctor._versions import Versions, read_versions
from tenk.doctor.rules import blocking, clients, labels, middleware, server, sync_routes, threads, validation

CHECKS: tuple[Callable[[Context], Iterator[Finding]], ...] = (
    blocking.check,
    sync_routes.check,
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
    # Files analysed: those read and parsed (`unread` says which were not, and why).
    files: int
    lines: int
    entry_points: int
    seconds: float
    context: Context
    unread: tuple[Unread, ...]
    versions: Versions


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
    versions = read_versions(target.config_dir, table().measured, table().requires)
    context = Context(target, graph, find_entry_points(graph, target.modules), depth, versions)
    best: dict[tuple[str, str, int, int], Finding] = {}
    for check in CHECKS:
        for found in check(context):
            key = (found.rule, str(found.path), found.line, found.col)
            # The place's worst cost wins (a route's over the lifespan's note), then the shortest chain.
            if key not in best or _rank(found) < _rank(best[key]):
                best[key] = found
    for module in target.modules:
        for found in _suppress.missing_reasons(module.path):
            best[(found.rule, str(found.path), found.line, found.col)] = found
    kept = [f for f in best.values() if f.rule == "suppression-reason" or not _suppress.is_suppressed(f)]
    return Report(
        spec,
        tuple(gather(kept)),
        len(best) - len(kept),
        len(target.modules),
        sum(len(module.lines) for module in target.modules),
        len(context.entries.entries),
        time.perf_counter() - started,
        context,
        tuple(target.project.unread),
        versions,
    )


def _rank(found: Finding) -> tuple[int, int]:
    return -SEVERITY_RANK[severity_of(found)], len(found.chain)
