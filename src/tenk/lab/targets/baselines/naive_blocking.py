"""A naive baseline with `async def` handlers that make blocking calls. Measured against; never deploy it.

The anti-pattern itself: `async def` handlers calling a sync Postgres driver (psycopg), sync Redis
(redis-py, a new client per request when cached) and a sync HTTP client (httpx.Client) for the vendor.
Each call holds the event loop until its answer is in, so the process serves one request at a time:
this is the product-API study's legacy code (000, whose `time.sleep` stood in for such waits; here the
waits are real, Postgres and the mock vendor) and the cause of the ladder study's slow v1 (001; the
ladder-study preset's claims quote its figure).
The routes, knobs and data layer are `naive_sync`'s; only the thread the calls block differs.
Serve it as a plain app: `uvicorn tenk.lab.targets.baselines.naive_blocking:app`.
"""

from __future__ import annotations

from tenk.lab.targets.baselines.blocking_routes import blocking_app

app = blocking_app("naive_blocking", on_loop=True)
