"""How a route joins the hot lane, and the dependencies that both lanes resolve the same way.

    @router.get("/products/{product_id}", response_model=Product, dependencies=[Depends(require_reader)])
    @hot
    def get_product(product_id: ProductId, catalog: CatalogDep) -> Reply | Awaitable[Reply]: ...

Every handler returns a `Reply` (or, from a plain `def`, an awaitable of one). `replying` gives FastAPI
an endpoint with the handler's signature that turns the reply into a `Response`: `ReplyRoute`, the
route class of every domain's router, makes it for each route, and `hot` for the routes the lane serves
too, which it records. `resolved` makes a FastAPI
dependency out of a plain function of (app state, ASGI scope); the lane calls that same function, so a
service reaches a handler the same way in both lanes.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any, Union, get_args, get_origin

from fastapi import Depends, Request
from fastapi.dependencies.utils import get_typed_return_annotation
from fastapi.routing import APIRoute
from starlette.datastructures import State
from starlette.responses import Response
from starlette.types import Scope

from tenk.platform.reply import Reply, as_response

# A handler answers with a `Reply`: at once, when a plain `def` finds its answer in memory (a cached
# product), or through an awaitable (an `async def`, or a plain `def` handing back its loader's coroutine).
# Answering at once spares the hottest requests a coroutine.
Handler = Callable[..., Reply | Awaitable[Reply]]
Resolver = Callable[[State, Scope], Any]

# FastAPI endpoint -> the handler it wraps (every route's; the `@hot` ones'); FastAPI dependency -> its resolver.
REPLY_HANDLERS: dict[Callable[..., Any], Handler] = {}
HOT_HANDLERS: dict[Callable[..., Any], Handler] = {}
RESOLVERS: dict[Callable[..., Any], Resolver] = {}
# The FastAPI dependencies of `app_state`, and the name each reads: the lane reads the state's own dict.
STATE_NAMES: dict[Callable[..., Any], str] = {}


def returns_reply(handler: Callable[..., Any]) -> bool:
    """Whether the handler is annotated to return a `Reply`, or an awaitable of one, and nothing else."""
    return _is_reply(get_typed_return_annotation(handler))


def _is_reply(annotation: Any) -> bool:
    if annotation is Reply:
        return True
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return all(_is_reply(member) for member in get_args(annotation))
    return origin in (Awaitable, Coroutine) and get_args(annotation)[-1] is Reply


def replying(handler: Handler) -> Callable[..., Awaitable[Response]]:
    """FastAPI's endpoint for a handler: the handler's parameters, its `Reply` as a `Response`."""
    if handler in REPLY_HANDLERS:
        return handler  # type: ignore[return-value]  # an endpoint already (a `@hot` one, a route copied)

    @functools.wraps(handler)
    async def endpoint(*args: Any, **kwargs: Any) -> Response:
        reply = handler(*args, **kwargs)
        return as_response(reply if isinstance(reply, Reply) else await reply)

    # The handler's parameters, which FastAPI reads, but the endpoint's own return type: a `Response`, never
    # a model FastAPI would try to make of `Reply` when the route declares no `response_model`.
    endpoint.__signature__ = inspect.signature(handler).replace(return_annotation=Response)  # type: ignore[attr-defined]
    REPLY_HANDLERS[endpoint] = handler
    return endpoint


def hot(handler: Handler) -> Callable[..., Awaitable[Response]]:
    """Serve this route from the hot lane too; put it under `@router.get(...)`/`@router.post(...)`."""
    endpoint = replying(handler)
    HOT_HANDLERS[endpoint] = handler
    return endpoint


class ReplyRoute(APIRoute):
    """The route class of a domain's router (`APIRouter(route_class=ReplyRoute)`): each route's handler
    returns a `Reply`, which FastAPI's lane answers with as it is. A handler annotated otherwise is left
    as written, for the app's start-up check to refuse (`tenk.platform.lane.rules`, `returns-reply`)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, replying(endpoint) if returns_reply(endpoint) else endpoint, **kwargs)


def resolved(resolve: Resolver) -> Any:
    """`Depends(...)` on `resolve(app.state, scope)`, which the hot lane calls directly."""

    # async, though it never awaits: FastAPI runs a plain `def` dependency in its thread pool, a thread
    # hand-off on every request through FastAPI's lane.
    async def dependency(request: Request) -> Any:
        return resolve(request.app.state, request.scope)

    RESOLVERS[dependency] = resolve
    return Depends(dependency)


def app_state(name: str) -> Any:
    """The object the lifespan stored as `app.state.<name>` (a service, the pool, the settings)."""
    depends = resolved(lambda state, _: getattr(state, name))
    STATE_NAMES[depends.dependency] = name
    return depends


def header(scope: Scope, name: bytes) -> bytes:
    """The first value of a (lower-case) request header, as Starlette's `headers.get` picks it."""
    return optional_header(scope, name) or b""


def optional_header(scope: Scope, name: bytes) -> bytes | None:
    """A request header's first value, or None when absent (an empty value is a value)."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


async def raw_body(request: Request) -> bytes:
    # The edge (tenk.platform.edge) has already bounded the body in size and time, in both lanes.
    return await request.body()


# The request body as bytes, for routes that parse it themselves (faster than a pydantic body).
RawBody = Annotated[bytes, Depends(raw_body)]
ContentType = Annotated[bytes, resolved(lambda _, scope: header(scope, b"content-type"))]
IdempotencyKey = Annotated[bytes | None, resolved(lambda _, scope: optional_header(scope, b"idempotency-key"))]
