"""One crud endpoint of an HttpArena entry, in instructions a request, counted by callgrind as
`driver.py` counts tenk's own paths: `valgrind --tool=callgrind --instr-atstart=no python -m
benchmarks.budget.arena ENTRY ENDPOINT COUNT`, with DATABASE_URL on a Postgres that holds HttpArena's
items (`bench_budget_arena.py` starts one), from the entry's own environment (the stock entry's has
no tenk: this imports the standard library and `asgi.py` only).

The entry's app is served in this process through its ASGI callable, its lifespan run, so what is
counted is the entry's own work and its Postgres client's; the HTTP server's (granian, uvicorn) is
not in it. The requests are crud's templates (`/work/shared/httparena/requests/crud-*.raw`), with the
ids drawn so that each endpoint is what it is named:

- `get_miss`: a different id each request, so every read goes to Postgres (the profile's common case:
  15 of its 20 requests, over 50,000 ids with a 200 ms TTL);
- `get_hit`: 50 ids read again and again, after the warm-up has filled them;
- `list`, `create` (a new id each, as the profile's counter makes them), `update`.

The cache's TTLs are an hour here, not the profile's 200 ms: under callgrind a request takes far longer
than it does served, and entries (and tenk's id ceiling) that expired with the wall clock would make the
counts move with the machine's load. Every miss is a miss by its id, whatever the TTL.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg
import uvloop

from benchmarks.budget.asgi import Requests, Scope, count_between_marks, request_scope

REPO = Path(__file__).resolve().parents[2]
APPS = {
    "tenk": REPO / "examples" / "httparena" / "tenk" / "app.py",
    "fastapi-crud": REPO / "benchmarks" / "httparena" / "fastapi_crud" / "app.py",
}
ENDPOINTS = ("get_miss", "get_hit", "list", "create", "update")
WARM_UP = 200
HOT_IDS = 50
LONG_TTL_S = 3600.0
FIRST_CREATED = 100_001  # crud-create-1.raw's {SEQ:100001}
CREATE = '{"id":%d,"name":"New Product","category":"test","price":150,"quantity":30}'
UPDATE = b'{"name":"Updated Product","category":"test","price":200,"quantity":25}'


def load_entry(name: str) -> ModuleType:
    """The entry's app.py, imported as its server imports it (`app:app`), its folder on the path."""
    path = APPS[name]
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("app", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["app"] = module
    spec.loader.exec_module(module)
    return module


def keep_cached(name: str, module: ModuleType) -> None:
    """The entry's cache TTLs made an hour long (see the module's docstring)."""
    if name == "fastapi-crud":
        vars(module).update(TTL_S=LONG_TTL_S)
        return
    settings_of: Callable[[bool], Any] = module.cache_settings

    def long_lived(shared: bool) -> Any:
        ttl = {"local_ttl_s": LONG_TTL_S, "redis_ttl_s": LONG_TTL_S, "negative_ttl_s": LONG_TTL_S}
        return settings_of(shared).model_copy(update=ttl)

    vars(module).update(cache_settings=long_lived)


def request_maker(endpoint: str) -> tuple[Callable[[int], tuple[Scope, bytes]], int]:
    """(the n-th request of the endpoint, its expected status)."""
    if endpoint == "get_miss":
        return lambda n: (request_scope(None, "GET", f"/crud/items/{1 + n}"), b""), 200
    if endpoint == "get_hit":
        return lambda n: (request_scope(None, "GET", f"/crud/items/{1 + n % HOT_IDS}"), b""), 200
    if endpoint == "list":
        # crud-list-rand-1.raw: category=office, page {RAND:1:10}.
        return lambda n: (
            request_scope(None, "GET", "/crud/items", b"category=office&page=%d&limit=10" % (1 + n % 10)),
            b"",
        ), 200
    if endpoint == "create":

        def create(n: int) -> tuple[Scope, bytes]:
            body = (CREATE % (FIRST_CREATED + n)).encode()
            return request_scope(None, "POST", "/crud/items", body=body), body

        return create, 201
    if endpoint == "update":
        # Spread over the upper half of the items: the pages `list` reads (office's first) stay as they are.
        return lambda n: (
            request_scope(None, "PUT", f"/crud/items/{25_001 + n * 7919 % 25_000}", body=UPDATE),
            UPDATE,
        ), 200
    raise SystemExit(f"unknown endpoint {endpoint!r}")


async def forget_created(dsn: str) -> None:
    """Drop the items an earlier run created: every create is then an insert, for every entry alike."""
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("DELETE FROM items WHERE id >= $1", FIRST_CREATED)
    finally:
        await connection.close()


async def measure(entry: str, endpoint: str, count: int, marks: Any) -> dict[str, float]:
    await forget_created(os.environ["DATABASE_URL"])
    module = load_entry(entry)
    keep_cached(entry, module)
    app = module.app
    make, expected = request_maker(endpoint)
    async with app.router.lifespan_context(app):
        await count_between_marks(Requests(app, expected), make, count, marks, WARM_UP)
    return {"units": count}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("entry", choices=sorted(APPS))
    parser.add_argument("endpoint", choices=ENDPOINTS)
    parser.add_argument("count", type=int)
    args = parser.parse_args()
    marks = ctypes.CDLL(os.environ["TENK_CALLGRIND_MARKS"])
    json.dump(uvloop.run(measure(args.entry, args.endpoint, args.count, marks)), sys.stdout)


if __name__ == "__main__":
    main()
