"""What the rules that depend on FastAPI's and pydantic's versions say a pattern costs, counted on the
versions installed: validator calls (double-validation, dump-only-model), hand-offs to the thread pool
(thread-hop, sync-route), the pool's size, and tasks a middleware makes a request (base-http-middleware).

`python -m tests.doctor.costs.frameworks` prints the counts as JSON, with the versions: the slow test runs
it in throwaway environments holding the oldest and newest FastAPI and pydantic doctor supports; the
suite calls `measure()` on the locked ones. It imports only the framework, httpx and the test harness.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Optional

import anyio
import anyio.to_thread
import fastapi
import httpx
import pydantic
import starlette
from fastapi import Depends, FastAPI, Response
from pydantic import BaseModel
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.doctor.costs.counting import calls_into, tasks_made
from tests.support.inprocess import app_in_process
from tests.support.waiting import eventually

PYDANTIC_V1 = pydantic.VERSION.startswith("1.")
# A request in process takes milliseconds; 41 of them held in the pool come up within seconds even on a
# busy 2-core machine (the suite's in-process tests answer in well under one).
HELD_S = 30.0

if PYDANTIC_V1:
    from pydantic import validator as _validator

    def counted(field: str) -> Any:
        return _validator(field, allow_reuse=True)

    def dump(model: BaseModel) -> dict[str, Any]:
        return model.dict()

else:
    from pydantic import field_validator as _field_validator

    def counted(field: str) -> Any:
        return _field_validator(field)

    def dump(model: BaseModel) -> dict[str, Any]:
        return model.model_dump()


VALIDATIONS = {"Product": 0, "Part": 0, "Public": 0}


def _count(model: str) -> Callable[[type[BaseModel], Any], Any]:
    def check(cls: type[BaseModel], value: Any) -> Any:
        VALIDATIONS[model] += 1
        return value

    return check


class Part(BaseModel):
    sku: str
    _sku = counted("sku")(classmethod(_count("Part")))


class Product(BaseModel):
    name: str
    price: float
    _name = counted("name")(classmethod(_count("Product")))


class PricedProduct(Product):
    currency: str = "EUR"


class Assembly(BaseModel):
    name: str
    parts: list[Part]


class Public(BaseModel):
    name: str
    _name = counted("name")(classmethod(_count("Public")))


ROW = {"name": "kettle", "price": 9.5}


def validation_app() -> FastAPI:
    """Each route builds (so validates) what it returns once; the count beyond that is FastAPI's."""
    app = FastAPI()

    @app.get("/model", response_model=Product)
    async def model() -> Any:
        return Product(**ROW)

    @app.get("/optional", response_model=Optional[Product])  # noqa: UP045 - the spelling under test
    async def optional() -> Any:
        return Product(**ROW)

    @app.get("/annotated")
    async def annotated() -> Product:
        return Product(**ROW)

    @app.get("/nested", response_model=Assembly)
    async def nested() -> Any:
        return Assembly(name="pair", parts=[Part(sku="a"), Part(sku="b")])

    @app.get("/subclass", response_model=Product)
    async def subclass() -> Any:
        return PricedProduct(**ROW)

    @app.get("/other-class", response_model=Public)
    async def other_class() -> Any:
        return Product(**ROW)

    @app.get("/dict", response_model=Product)
    async def as_dict() -> Any:
        return dict(ROW)

    @app.get("/json-response", response_class=Response)
    async def json_response() -> Response:
        product = Product(**ROW)
        text = product.json() if PYDANTIC_V1 else product.model_dump_json()
        return Response(text, media_type="application/json")

    @app.get("/dump-only")
    async def dump_only() -> Any:
        return dump(Product(**ROW))

    @app.get("/dump-only-fixed")
    async def dump_only_fixed() -> Any:
        return dict(ROW)

    return app


async def _validations(client: httpx.AsyncClient, path: str, model: str, built: int) -> int:
    """Validator calls of `model` a request to `path` makes beyond the `built` the route makes itself."""
    before = VALIDATIONS[model]
    response = await client.get(path)
    response.raise_for_status()
    return VALIDATIONS[model] - before - built


async def validations() -> dict[str, int]:
    async with app_in_process(validation_app()) as client:
        return {
            "double-validation/model": await _validations(client, "/model", "Product", 1),
            "double-validation/optional": await _validations(client, "/optional", "Product", 1),
            "double-validation/annotated": await _validations(client, "/annotated", "Product", 1),
            "double-validation/nested": await _validations(client, "/nested", "Part", 2),
            "double-validation/subclass": await _validations(client, "/subclass", "Product", 1),
            "double-validation/other-class": await _validations(client, "/other-class", "Product", 1),
            "double-validation/other-class-response-model": await _validations(client, "/other-class", "Public", 0),
            "double-validation/dict": await _validations(client, "/dict", "Product", 0),
            "double-validation/fix": await _validations(client, "/json-response", "Product", 1),
            "dump-only-model/pattern": await _validations(client, "/dump-only", "Product", 0),
            "dump-only-model/fix": await _validations(client, "/dump-only-fixed", "Product", 0),
        }


def thread_app() -> FastAPI:
    app = FastAPI()

    def settings_sync() -> int:
        return 1

    async def settings_async() -> int:
        return 1

    @app.get("/def-route")
    def def_route() -> dict[str, int]:
        return {"n": 1}

    @app.get("/def-route-bare")
    def def_route_bare():  # type: ignore[no-untyped-def]  # no return annotation: no response model
        return {"n": 1}

    @app.get("/async-route")
    async def async_route() -> dict[str, int]:
        return {"n": 1}

    @app.get("/def-dependency")
    async def with_def_dependency(n: int = Depends(settings_sync)) -> dict[str, int]:
        return {"n": n}

    @app.get("/async-dependency")
    async def with_async_dependency(n: int = Depends(settings_async)) -> dict[str, int]:
        return {"n": n}

    return app


async def _hops(client: httpx.AsyncClient, path: str) -> int:
    with calls_into(anyio.to_thread.run_sync) as counted:
        (await client.get(path)).raise_for_status()
    return counted["run_sync"]


async def hops() -> dict[str, int]:
    async with app_in_process(thread_app()) as client:
        return {
            "thread-hop/def-route": await _hops(client, "/def-route"),
            "thread-hop/def-route-bare": await _hops(client, "/def-route-bare"),
            "thread-hop/async-route": await _hops(client, "/async-route"),
            "thread-hop/def-dependency": await _hops(client, "/def-dependency"),
            "thread-hop/async-dependency": await _hops(client, "/async-dependency"),
        }


async def _held(app: FastAPI, release: Callable[[], None], limiter: Any, requests: int) -> int:
    """Threads of the pool `requests` requests held in the route take at once."""
    async with app_in_process(app) as client:
        pending = [asyncio.ensure_future(client.get("/wait")) for _ in range(requests)]
        try:
            await eventually(lambda: ROUTES_IN[0] >= requests, HELD_S, f"{requests} requests in the route")
            borrowed = int(limiter.statistics().borrowed_tokens)
        finally:
            release()
            for response in await asyncio.gather(*pending):
                response.raise_for_status()
    return borrowed


ROUTES_IN = [0]


async def pool() -> dict[str, int]:
    """41 requests held on a wait: in a `def` route, how many threads the pool lends at once and how many
    requests wait for one; in an `async def` route on an async wait, how many threads they take."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    total = int(limiter.total_tokens)
    sync_app, async_app = FastAPI(), FastAPI()
    released = threading.Event()
    awaited = asyncio.Event()

    @sync_app.get("/wait")
    def sync_wait() -> dict[str, bool]:
        ROUTES_IN[0] += 1
        return {"released": released.wait(HELD_S)}

    @async_app.get("/wait")
    async def async_wait() -> dict[str, bool]:
        ROUTES_IN[0] += 1
        await awaited.wait()
        return {"released": True}

    ROUTES_IN[0] = 0
    async with app_in_process(sync_app) as client:
        pending = [asyncio.ensure_future(client.get("/wait")) for _ in range(total + 1)]
        try:

            def full() -> Any:
                stats = limiter.statistics()
                return stats if stats.tasks_waiting == 1 else None

            stats = await eventually(full, HELD_S, f"{total + 1} def requests to fill the pool")
        finally:
            released.set()
            await asyncio.gather(*pending)
    ROUTES_IN[0] = 0
    on_async = await _held(async_app, awaited.set, limiter, total + 1)
    return {
        "sync-route/threads": total,
        "sync-route/pattern": int(stats.borrowed_tokens),
        "sync-route/waiting": int(stats.tasks_waiting),
        "sync-route/fix": on_async,
    }


class Timing(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        return await call_next(request)


class PureTiming:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


# A class in anyio 4 (its `__new__` does the work), a function before.
_STREAMS: Any = getattr(anyio.create_memory_object_stream, "__new__", anyio.create_memory_object_stream)
if not hasattr(_STREAMS, "__code__"):
    _STREAMS = anyio.create_memory_object_stream


async def _middleware(middleware: Any, name: str) -> dict[str, int]:
    app = FastAPI()
    app.add_middleware(middleware)

    @app.get("/ping")
    async def ping() -> dict[str, bool]:
        return {"ok": True}

    async with app_in_process(app) as client:
        (await client.get("/ping")).raise_for_status()
        with tasks_made() as made, calls_into(anyio.create_task_group, _STREAMS) as counted:
            (await client.get("/ping")).raise_for_status()
    return {
        f"base-http-middleware/{name}/tasks": made[0],
        f"base-http-middleware/{name}/task-groups": counted["create_task_group"],
        f"base-http-middleware/{name}/memory-streams": counted[_STREAMS.__qualname__],
    }


async def middleware_tasks() -> dict[str, int]:
    return {**await _middleware(Timing, "pattern"), **await _middleware(PureTiming, "fix")}


async def measure() -> dict[str, Any]:
    counts: dict[str, Any] = {
        "fastapi": fastapi.__version__,
        "pydantic": pydantic.VERSION,
        "starlette": starlette.__version__,
    }
    for part in (validations, hops, pool, middleware_tasks):
        counts.update(await part())
    return counts


if __name__ == "__main__":
    print(json.dumps(asyncio.run(measure())))
