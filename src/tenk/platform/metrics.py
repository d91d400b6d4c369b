"""Prometheus metrics. Every label has a bounded set of values, whatever clients send: each value is
a time series kept for the life of the process, so a label taken from the request is a memory leak
(2,000 invented HTTP methods once made 2,000 histogram series). Request latency is labelled by route
*template* (`<unmatched>` for paths no route matches), by method from a fixed list (`OTHER` for any
other), and by the status code the app sent.

Gauges whose value lives in a running app (pool sizes, breaker states) are read at scrape time
from callbacks the lifespan registers, so nothing polls in the background.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache, partial

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.values import MutexValue
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from tenk.platform.fast_paths import FastPath, runs

REQUEST_LATENCY = Histogram(
    "tenk_http_request_duration_seconds",
    "HTTP request latency by route template.",
    ["method", "route", "status"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
CACHE_LOOKUPS = Counter(
    "tenk_cache_lookups_total", "Cache lookups by cache, layer and result.", ["cache", "layer", "result"]
)
# Called after each counted cache lookup with its labels: how tracing adds a span event per lookup.
CacheLookupHook = Callable[[Mapping[str, str]], None]

UNMATCHED_ROUTE = "<unmatched>"
OTHER_METHOD = "OTHER"
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

# name -> callback yielding (labels, value); registered by lifespans, read at scrape time.
GaugeSource = Callable[[], Iterable[tuple[dict[str, str], float]]]


class _LiveGauges(Collector):
    def __init__(self) -> None:
        self.sources: dict[str, tuple[str, list[GaugeSource]]] = {}

    def add(self, name: str, documentation: str, source: GaugeSource) -> None:
        self.sources.setdefault(name, (documentation, []))[1].append(source)

    def remove(self, name: str, source: GaugeSource) -> None:
        if name in self.sources:
            sources = self.sources[name][1]
            if source in sources:
                sources.remove(source)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, (documentation, sources) in list(self.sources.items()):
            samples = [sample for source in sources for sample in source()]
            label_names = sorted({key for labels, _ in samples for key in labels})
            family = GaugeMetricFamily(name, documentation, labels=label_names)
            for labels, value in samples:
                family.add_metric([labels.get(key, "") for key in label_names], value)
            yield family


live_gauges = _LiveGauges()
REGISTRY.register(live_gauges)


class CacheLookupCounter:
    """One (cache, layer, result) child of tenk_cache_lookups_total; the domains call `inc()` per lookup.

    With no hook, `inc` is the Prometheus child's own method: a hit costs what counting it did before
    hooks existed. `add_cache_lookup_hook` rebinds `inc` of every counter, made before or after, to count
    and then call the hooks: the domains' code stays as it is, and this module patches only its own objects.
    """

    __slots__ = ("_child", "_count", "inc", "labels")

    def __init__(self, cache: str, layer: str, result: str) -> None:
        self._child = CACHE_LOOKUPS.labels(cache, layer, result)
        self.labels: Mapping[str, str] = {"cache": cache, "layer": layer, "result": result}
        self._bind()

    def _bind(self) -> None:
        self._count: Callable[[], None] = _unchecked_increment(self._child)
        self.inc: Callable[[], None]
        if not _cache_lookup_hooks:
            self.inc = self._count
            return
        count, labels, hooks = self._count, self.labels, _cache_lookup_hooks

        def count_and_tell() -> None:
            count()
            for hook in hooks:
                hook(labels)

        self.inc = count_and_tell


_cache_lookup_counters: list[CacheLookupCounter] = []
_cache_lookup_hooks: list[CacheLookupHook] = []


def cache_lookup_counter(cache: str, layer: str, result: str) -> CacheLookupCounter:
    """A pre-bound child for a hot path (label lookup is not free at 10k requests a second)."""
    counter = CacheLookupCounter(cache, layer, result)
    _cache_lookup_counters.append(counter)
    return counter


def add_cache_lookup_hook(hook: CacheLookupHook) -> None:
    """Call `hook` with the labels of every cache lookup counted from now on, in this process."""
    _cache_lookup_hooks.append(hook)
    for counter in _cache_lookup_counters:
        counter._bind()


def remove_cache_lookup_hook(hook: CacheLookupHook) -> None:
    if hook in _cache_lookup_hooks:
        _cache_lookup_hooks.remove(hook)
    for counter in _cache_lookup_counters:
        counter._bind()


def method_label(method: str) -> str:
    """The request method as a metric label: one of KNOWN_METHODS, or OTHER."""
    return method if method in KNOWN_METHODS else OTHER_METHOD


@lru_cache(maxsize=4096)
def latency_observer(method: str, route: str, status: int) -> Callable[[float], None]:
    """The histogram child's `observe` for one label set: label lookup takes a lock, the cache does not.

    Every argument must come from a bounded set (a known method, a route template, a status we send)."""
    return _unchecked_observe(REQUEST_LATENCY.labels(method, route, str(status)))


# The two per-request calls into prometheus_client, without the checks each makes on every call (is the
# child observable, is the amount negative), without the lock, and, for the histogram, with a bisection
# for its linear walk of the buckets: both run on every request, the cached read's included, where the
# checks and the locks are a part of its instructions worth cutting (budgets.json: cached_hit).
#
# The lock is not needed: these values are written by one thread, the event loop's, which is where every
# request is answered and every cache lookup counted; a scrape only reads them, and reads a whole float.
# (Two event loops in two threads of one process, as a test can run, could lose an increment now and
# then; never corrupt one.) A value of another kind, multiprocess mode's memory-mapped one that must
# reach its file, is written through the library's own method, lock and all.
#
# They write the same values, through the same value objects, so a scrape reads what the library's own
# methods would have written; `tests/platform/test_metrics.py` holds them to that, so a library upgrade that
# moves these attributes fails there, not silently.
#
# With the stock path (`tenk.platform.fast_paths`), both are the children's own `inc` and `observe`.
_unchecked_writes = runs(FastPath.METRICS, stock_paths=False)


def use_stock_metrics(stock_paths: bool) -> None:
    """Write every metric of this process through prometheus_client's own methods with `stock_paths`, or when
    its installed version is outside the tested range; else through the unchecked writes above. The
    counters made so far are bound again, the latency observers made again when next asked for."""
    global _unchecked_writes
    unchecked = runs(FastPath.METRICS, stock_paths=stock_paths)
    if unchecked == _unchecked_writes:
        return
    _unchecked_writes = unchecked
    latency_observer.cache_clear()
    for counter in _cache_lookup_counters:
        counter._bind()


def _unchecked_increment(child: Counter) -> Callable[[], None]:
    if not _unchecked_writes:
        return child.inc
    value = child._value
    if type(value) is not MutexValue:
        return partial(value.inc, 1)

    def increment() -> None:
        value._value += 1

    return increment


def _unchecked_observe(child: Histogram) -> Callable[[float], None]:
    if not _unchecked_writes:
        return child.observe
    bounds, buckets, total = child._upper_bounds, child._buckets, child._sum
    if any(type(value) is not MutexValue for value in (total, *buckets)):
        add_to_sum = total.inc

        def observe_locked(seconds: float) -> None:
            add_to_sum(seconds)
            buckets[bisect_left(bounds, seconds)].inc(1)

        return observe_locked

    def observe(seconds: float) -> None:
        total._value += seconds
        buckets[bisect_left(bounds, seconds)]._value += 1

    return observe


def route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


@lru_cache(maxsize=1)
def scrape_registry() -> CollectorRegistry:
    """With several worker processes (`tenk serve --workers N` sets PROMETHEUS_MULTIPROC_DIR), counters and
    histograms are summed over all workers; the live gauges are the answering worker's own."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(live_gauges)
    return registry


async def metrics_endpoint(_: Request) -> Response:
    return Response(generate_latest(scrape_registry()), media_type=CONTENT_TYPE_LATEST)
