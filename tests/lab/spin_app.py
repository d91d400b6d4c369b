"""A target whose ceiling is known by construction, to check that the lab names it.

SPIN_WHERE=app: every request burns SPIN_MS of CPU in the target itself (CPU-bound in-process).
SPIN_WHERE=postgres: every request runs a PL/pgSQL loop of a fixed count, calibrated at start-up
to about SPIN_MS of the backend's CPU time (read from /proc, so a busy machine, which stretches the wall
clock, does not shrink the count), so the target waits while Postgres saturates its core (dependency-bound). A
count, not a clock: a loop that ran until a wall-clock deadline would finish on time however
little CPU it got, and Postgres could never be the bottleneck.
"""

from __future__ import annotations

import os
import time
from typing import Any

import asyncpg
import psutil

SPIN_S = float(os.environ.get("SPIN_MS", "20")) / 1000
WHERE = os.environ.get("SPIN_WHERE", "app")
SPIN_SQL = """
CREATE OR REPLACE FUNCTION lab_spin(count int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE n int := 0;
BEGIN
  FOR i IN 1..count LOOP n := n + 1; END LOOP;
  RETURN n;
END $$;
"""
# Long enough (~0.2 s) that the kernel's 10 ms CPU-time ticks are a small error.
CALIBRATION_COUNT = 2_000_000
_pool: asyncpg.Pool | None = None
_count = 0


async def _startup() -> None:
    global _pool
    if WHERE == "postgres":
        _pool = await asyncpg.create_pool(os.environ["TENK_DATABASE_URL"], min_size=8, max_size=8)
        await _pool.execute(SPIN_SQL)
        global _count
        async with _pool.acquire() as conn:
            backend = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()"))
            await conn.fetchval("SELECT lab_spin($1)", 1000)  # the first call compiles the function
            before = backend.cpu_times()
            await conn.fetchval("SELECT lab_spin($1)", CALIBRATION_COUNT)
            after = backend.cpu_times()
        cpu_s = (after.user - before.user) + (after.system - before.system)
        _count = max(1, round(CALIBRATION_COUNT * SPIN_S / max(cpu_s, 0.01)))


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await _startup()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if _pool is not None:
                    await _pool.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] != "/health":
        if _pool is not None:
            await _pool.fetchval("SELECT lab_spin($1)", _count)
        else:
            stop = time.process_time() + SPIN_S
            while time.process_time() < stop:
                pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"done":true}'})
