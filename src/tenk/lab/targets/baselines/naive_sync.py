"""A naive synchronous baseline. It exists only to be measured against: never deploy it.

Written the way the studies started: `def` handlers (FastAPI runs each in its thread pool, 40 threads),
blocking drivers (psycopg, redis-py, httpx.Client), a config object and a new Postgres connection per
request, pydantic models validating and serialising every response, an access log line per request, no
cache, and one INSERT plus commit per event. Knobs (env): NAIVE_POOL=1 (a connection pool instead),
NAIVE_REDIS_CACHE=1|shared (cache-aside for GET /products/{id}, a new client per request or one shared
pool), NAIVE_REDIS_PROTOCOL=3 (RESP3), NAIVE_ACCESS_LOG=0.
Serve it as a plain app: `uvicorn tenk.lab.targets.baselines.naive_sync:app`.
"""

from __future__ import annotations

from tenk.lab.targets.baselines.blocking_routes import blocking_app

app = blocking_app("naive_sync", on_loop=False)
