"""A target with one gauge the test sets (`POST /set/{n}`) and one counter, served on /metrics."""

from __future__ import annotations

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

registry = CollectorRegistry()
PARKED = Gauge("lab_test_parked", "What the test set last.", registry=registry)
SETS = Counter("lab_test_sets", "How often it was set.", registry=registry)
app = FastAPI()


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/set/{value}")
async def set_gauge(value: int) -> dict[str, int]:
    PARKED.set(value)
    SETS.inc()
    return {"value": value}


@app.get("/metrics")
async def metrics() -> Response:
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
