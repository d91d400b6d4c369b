#!/bin/sh
# granian as `tenk serve` starts it, with its defaults: one worker per CPU this container may use, told to
# the app too (it shares DATABASE_MAX_CONN among them). HttpArena's harness talks to port 8080 on every address.
TENK_WORKERS="${TENK_WORKERS:-$(nproc)}"
export TENK_WORKERS
exec granian --interface asgi --host "${HOST:-0.0.0.0}" --port "${PORT:-8080}" --workers "$TENK_WORKERS" app:app
