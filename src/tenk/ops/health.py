"""`/health` is liveness and touches nothing; `/ready` asks each dependency, with a short timeout."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import orjson
from fastapi import APIRouter, Depends, Request

from tenk.ops.drain import draining
from tenk.platform import Reply, ReplyRoute, hot, require_ops_key

logger = logging.getLogger("tenk.ops.health")

router = APIRouter(tags=["ops"], route_class=ReplyRoute)

_PONG = Reply(200, b'{"ping":"pong"}')
_LIVE = Reply(200, orjson.dumps({"status": "ok"}))
_DRAINING = orjson.dumps({"status": "draining", "checks": {}})
CHECK_TIMEOUT_S = 1.0

# name -> (probe, required). A required dependency that fails makes /ready 503; others make it "degraded".
ReadinessProbe = Callable[[], Awaitable[object]]


# response_model=None: the documented answer stays a bare JSON body, not the `Reply` tuple `@hot` returns.
@router.get("/ping", summary="Cheapest possible answer", response_model=None)
@hot
async def ping() -> Reply:
    return _PONG


@router.get("/health", summary="Liveness: the process answers", response_model=None)
@hot
async def health() -> Reply:
    return _LIVE


async def _check(name: str, probe: ReadinessProbe) -> dict[str, object]:
    started = time.perf_counter()
    try:
        outcome = await asyncio.wait_for(probe(), CHECK_TIMEOUT_S)
    except Exception as exc:
        # The error's text names hosts, ports and sometimes users: the log's, not an open endpoint's.
        logger.warning("readiness: %s is down: %s: %s", name, exc.__class__.__name__, exc)
        return {"ok": False, "error": "down"}
    check: dict[str, object] = {"ok": True, "latency_ms": round((time.perf_counter() - started) * 1000, 2)}
    # A probe may say what it found (e.g. a setting it could not verify): shown beside the verdict.
    if isinstance(outcome, str):
        check["detail"] = outcome
    return check


@router.get(
    "/ready",
    summary="Readiness: each dependency, and whether we can serve",
    dependencies=[Depends(require_ops_key("ready"))],
)
async def ready(request: Request) -> Reply:
    if draining():
        # Stopping (tenk.ops.drain): the load balancer must stop sending requests, though we still serve.
        return Reply(503, _DRAINING)
    probes: dict[str, tuple[ReadinessProbe, bool]] = request.app.state.readiness_probes
    names = list(probes)
    results = await asyncio.gather(*(_check(name, probes[name][0]) for name in names))
    checks = dict(zip(names, results, strict=True))
    required_down = any(not checks[n]["ok"] for n in names if probes[n][1])
    optional_down = any(not checks[n]["ok"] for n in names if not probes[n][1])
    status = "down" if required_down else "degraded" if optional_down else "ok"
    body = orjson.dumps({"status": status, "checks": checks})
    return Reply(503 if required_down else 200, body)
