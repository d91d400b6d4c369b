"""The product-API study's (000) Prometheus metrics, as it wrote them: a latency histogram per request,
labelled by the raw path (`/products/7`, `/products/8`, ...), and `GET /metrics` rendering the registry.

With its 10,000 ids that is 10,000 label sets of 14 buckets each, so every scrape of `/metrics` (an
eighth of its load test's traffic) grows with the ids seen: a cost the study measured without naming
it. `NAIVE_STUDY_METRICS=1` turns this on for the cache preset; the other presets leave it off.
tenk labels by route template instead (`tenk.platform.metrics`), which is the fix.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Response
from prometheus_client import CollectorRegistry, Histogram, generate_latest

# Its own registry: the baselines may be imported beside tenk, whose metrics are not the study's.
REGISTRY = CollectorRegistry()
REQUEST_LATENCY = Histogram(
    "request_latency_seconds", "Request latency in seconds", ["endpoint", "method"], registry=REGISTRY
)


class RawPathLatency:
    """Pure ASGI: observe each request's latency under its raw path, the study's label."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/products/"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            REQUEST_LATENCY.labels(endpoint=scope["path"], method=scope["method"]).observe(
                time.perf_counter() - started
            )


def install_study_metrics(app: FastAPI) -> None:
    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(content=generate_latest(REGISTRY), media_type="text/plain")

    app.add_middleware(RawPathLatency)
