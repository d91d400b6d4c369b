"""The request body's rules: no body is read for a client that may not write, none beyond the byte
limit, and none for longer than the body deadline.

Invariant: an unauthenticated client can make the server hold no more than its headers. A route that
needs a writer key is answered 401/403 from the headers alone, before a byte of body is read (FastAPI
itself would read, and buffer, the whole body before running the route's auth dependency). Every
other body is streamed through as it arrives, never buffered by the edge: the app sees at most
`max_bytes`, and a client still sending after `timeout_s` gets 408, so a slow sender cannot hold a
request open for ever (the servers bound neither). The edge (`tenk.platform.edge`) applies these to both lanes.
"""

from __future__ import annotations

import fastapi.routing
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.types import Scope

from tenk.platform.auth import require_writer
from tenk.platform.errors import PayloadTooLargeError, RequestTimeoutError

# Methods whose requests carry no body worth guarding.
BODILESS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def api_routes(app: FastAPI) -> list[APIRoute]:
    # FastAPI from 0.160 keeps included routers as such and flattens them on demand; older ones flatten
    # them into app.routes at include time.
    iterate = getattr(fastapi.routing, "iter_route_contexts", None)
    routes = [context.original_route for context in iterate(app.routes)] if iterate else app.routes
    return [route for route in routes if isinstance(route, APIRoute)]


def writer_routes(app: FastAPI) -> list[APIRoute]:
    """The app's routes that declare `require_writer` (call after every router is included)."""
    return [
        route
        for route in api_routes(app)
        if any(dependency.dependency is require_writer for dependency in route.dependencies)
    ]


def declared_length(scope: Scope) -> int | None:
    """Content-Length as sent, or None when absent; -1 when it is not a plain decimal number."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            # A length over 19 digits is over any limit; int() of a huge string would cost CPU.
            return int(value) if value.isdigit() and len(value) <= 19 else -1
    return None


def too_large(max_bytes: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"request body exceeds {max_bytes} bytes")


def too_slow(timeout_s: float) -> RequestTimeoutError:
    return RequestTimeoutError(f"the request body did not arrive within {timeout_s:g}s")
