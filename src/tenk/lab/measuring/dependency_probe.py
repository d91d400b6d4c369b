"""Round trips to the dependencies the lab runs (Postgres, Redis, the mock vendor), timed all through a step.

Why: a step can break its SLO with no core saturated and the generator to spare. Then either something
outside the target queued its requests (a dependency's locks, a stalled event loop), or the target
waited on itself: blocking calls on its event loop, a pool too small for the load, a connection opened
per request. A dependency that answered a trivial request promptly all through the step was not
queueing, so the wait was the target's own (`bottleneck.attribute` decides; this only measures).

Each probe holds one connection opened before the load starts, so that a server refusing new
connections under load (Postgres past max_connections) is not mistaken for a slow one; the probe times
the round trip, not the connection. The probe runs in the lab's process, on the generator's side: what
it adds to a round trip (a thread waiting for the GIL) makes a dependency look slower, never faster.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Protocol

import httpx
import psycopg
import redis

from tenk.lab.documents import ProbeFigures

INTERVAL_S = 0.25
TIMEOUT_S = 2.0


class Check(Protocol):
    def once(self) -> None: ...

    def close(self) -> None: ...


class PostgresCheck:
    def __init__(self, dsn: str) -> None:
        self._conn = psycopg.connect(dsn, connect_timeout=int(TIMEOUT_S), autocommit=True)

    def once(self) -> None:
        self._conn.execute("SELECT 1").fetchone()

    def close(self) -> None:
        self._conn.close()


class RedisCheck:
    def __init__(self, url: str) -> None:
        self._client = redis.Redis.from_url(url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S)
        self._client.ping()

    def once(self) -> None:
        self._client.ping()

    def close(self) -> None:
        self._client.close()


class UpstreamCheck:
    """The mock vendor's /health: its own answer, without the latency it adds to quotes by design."""

    def __init__(self, url: str) -> None:
        self._client = httpx.Client(base_url=url.rstrip("/"), timeout=TIMEOUT_S)
        self.once()

    def once(self) -> None:
        self._client.get("/health").raise_for_status()

    def close(self) -> None:
        self._client.close()


# Which environment variable names each dependency, and how to probe it.
CHECKS: dict[str, tuple[str, Callable[[str], Check]]] = {
    "postgres": ("TENK_DATABASE_URL", PostgresCheck),
    "redis": ("TENK_REDIS_URL", RedisCheck),
    "mock-upstream": ("TENK_UPSTREAM_URL", UpstreamCheck),
}


class DependencyProbe:
    """Times one round trip to each dependency every `interval_s`, in a thread, between `__enter__`
    and `__exit__`. A dependency that cannot be reached when the probe opens is reported as such."""

    def __init__(self, env: Mapping[str, str], interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._checks: dict[str, Check] = {}
        self._times: dict[str, list[float]] = {}
        self._failed: dict[str, int] = {}
        for name, (variable, make) in CHECKS.items():
            if not env.get(variable):
                continue
            self._times[name], self._failed[name] = [], 0
            try:
                self._checks[name] = make(env[variable])
            except Exception:
                self._failed[name] = 1  # unreachable before the load began: never "prompt"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DependencyProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for check in self._checks.values():
            with suppress(Exception):  # a closed or broken connection is closed enough
                check.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for name, check in self._checks.items():
                started = time.perf_counter()
                try:
                    check.once()
                except Exception:
                    self._failed[name] += 1
                    continue
                self._times[name].append((time.perf_counter() - started) * 1000)

    def figures(self) -> dict[str, ProbeFigures]:
        return {name: probe_figures(self._times[name], self._failed[name]) for name in self._times}


def probe_figures(times_ms: list[float], failed: int) -> ProbeFigures:
    if not times_ms:
        return {"n": 0, "failed": failed, "p50_ms": None, "max_ms": None}
    return {
        "n": len(times_ms),
        "failed": failed,
        "p50_ms": round(statistics.median(times_ms), 3),
        "max_ms": round(max(times_ms), 3),
    }
