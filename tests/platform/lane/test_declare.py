"""What FastAPI runs for a route, as the lane's declarations leave it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

from fastapi.dependencies.models import Dependant

from tenk.app import create_app
from tenk.platform.request_body import api_routes
from tenk.settings import Settings


def _runs_on_the_loop(call: Callable[..., Any]) -> bool:
    # FastAPI awaits a coroutine function (or an object whose __call__ is one) and hands anything else to
    # anyio's thread pool; generators would go there too, and tenk declares none.
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(type(call).__call__)


def _calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for sub in dependant.dependencies:
        if sub.call is not None:
            yield sub.call
        yield from _calls(sub)


def test_no_route_or_dependency_of_the_app_is_handed_to_the_thread_pool() -> None:
    """A `def` dependency costs a thread hand-off on every request FastAPI's lane serves, and holds one of
    the pool's 40 threads while it runs; `resolved(...)` once declared one for every `app_state` service."""
    app = create_app(Settings())
    in_the_pool = [
        f"{sorted(route.methods or ())} {route.path}: {getattr(call, '__qualname__', call)}"
        for route in api_routes(app)
        for call in [route.endpoint, *_calls(route.dependant)]
        if not _runs_on_the_loop(call)
    ]
    assert in_the_pool == []
