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
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

REQUEST_LATENCY = Histogram(
    "tenk_http_request_duration_seconds",
    "HTTP request latency by route template.",
    ["method", "route", "status"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
CACHE_LOOKUPS = Counter(
    "tenk_cache_lookups_total", "Cache lookups by cache, layer and result.", ["cache", "layer", "result"]
)

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


def method_label(method: str) -> str:
    """The request method as a metric label: one of KNOWN_METHODS, or OTHER."""
    return method if method in KNOWN_METHODS else OTHER_METHOD


@lru_cache(maxsize=4096)
def latency_observer(method: str, route: str, status: int) -> Callable[[float], None]:
    """The histogram child's `observe` for one label set: label lookup takes a lock, the cache does not.

    Every argument must come from a bounded set (a known method, a route template, a status we send)."""
    return REQUEST_LATENCY.labels(method, route, str(status)).observe


def route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


@lru_cache(maxsize=1)
def _scrape_registry() -> CollectorRegistry:
    """With several worker processes (`tenk serve --workers N` sets PROMETHEUS_MULTIPROC_DIR), counters and
    histograms are summed over all workers; the live gauges are the answering worker's own."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(live_gauges)
    return registry


async def metrics_endpoint(_: Request) -> Response:
    return Response(generate_latest(_scrape_registry()), media_type=CONTENT_TYPE_LATEST)
