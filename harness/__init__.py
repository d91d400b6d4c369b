"""The real services that the suite and the benchmarks both start: an embedded Postgres and Redis on free
ports, migrated and seeded (`stack`), the credentials every such stack accepts (`clients`), and Redis
Sentinel on 127.0.0.1 (`redis_sentinel`).

Outside src/: none of it ships. It holds the suite's own API key and cursor secret, which an installed
tenk must never know, and the seed sizes and settings the suite wants. A user starts the same servers
with `tenk up`, or with `tenk.stack`'s `EmbeddedPostgres` and `EmbeddedRedis`.
"""
