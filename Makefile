# Two commands on a fresh machine with Python 3.11+ and make: `make run` and `make test`.
PYTHON ?= python3
TOOLS := .tenk/tools
# Use uv from PATH when there is one; otherwise bootstrap it from PyPI into .tenk/tools.
UV := $(shell command -v uv 2>/dev/null || echo $(TOOLS)/bin/uv)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run up down test lint typecheck pytest sync sync-dev system-deps bench-reads bench-ingest bench-upstream lab clean

$(TOOLS)/bin/uv:
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv

sync: | $(UV)
	$(UV) sync --frozen --no-dev --inexact

sync-dev: | $(UV)
	$(UV) sync --frozen

## The stack on embedded Postgres and Redis, seeded, serving on 127.0.0.1:8000, until Ctrl-C.
run: sync
	$(BIN)/tenk dev

up: sync
	$(BIN)/tenk up

down:
	$(BIN)/tenk down

## Optional tools from Debian (wrk for closed-loop runs, chromium to check the HTML report renders).
system-deps:
	@if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  missing=""; command -v wrk >/dev/null || missing="$$missing wrk"; \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || echo "apt-get could not install:$$missing"; fi; \
	fi

## The whole suite: lint, types, then pytest against real Postgres, Redis and mock-upstream processes.
test: sync-dev system-deps lint typecheck pytest

lint: sync-dev
	$(BIN)/ruff check src tests benchmarks

typecheck: sync-dev
	$(BIN)/mypy

pytest: sync-dev
	$(BIN)/pytest

## Closed-loop wrk per read path, API pinned to CPU 0, wrk on CPU 1 (needs `tenk up` data; starts it).
bench-reads: sync system-deps
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

## The async ladder (naive sync -> async -> workers -> gunicorn -> granian -> tenk) on this machine, in at
## most 10 minutes; prints where its report is. Other presets: `tenk lab run --preset NAME`.
lab: sync
	$(BIN)/tenk lab run --preset async-ladder $(LAB_ARGS)

clean:
	rm -rf .tenk/tools $(VENV) .pytest_cache .mypy_cache .ruff_cache
