#!/bin/sh
# One worker per CPU this container may use, told to the app too (it shares DATABASE_MAX_CONN among them).
# HttpArena's harness talks to port 8080 on every address. The server is granian, tenk's default, with its
# defaults. TENK_SERVER=uvicorn serves on uvicorn, tenk's other server, with its defaults (uvloop and
# httptools) but for its access log and its X-Forwarded-For handling, which tenk's edge does itself: one
# thread reads, runs the app and writes, where granian hands each request from its Rust threads to the
# event loop's and back (benchmarks/httparena/syscalls.py); which costs less CPU is a timing run's to say.
TENK_WORKERS="${TENK_WORKERS:-$(nproc)}"
export TENK_WORKERS
HOST="${HOST:-0.0.0.0}"
PORT="${PORT:-8080}"
if [ "${TENK_SERVER:-granian}" = uvicorn ]; then
    exec uvicorn app:app --host "$HOST" --port "$PORT" --workers "$TENK_WORKERS" \
        --log-level warning --no-access-log --no-proxy-headers
fi
exec granian --interface asgi --host "$HOST" --port "$PORT" --workers "$TENK_WORKERS" app:app
