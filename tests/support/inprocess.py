"""The app in process: its lifespan running, behind an httpx ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from starlette.applications import Starlette
from starlette.types import ASGIApp

BASE_URL = "http://tenk.test"


@asynccontextmanager
async def app_in_process(
    app: Starlette,
    *,
    front: ASGIApp | None = None,
    headers: dict[str, str] | None = None,
    client: tuple[str, int] = ("127.0.0.1", 123),
    raise_app_exceptions: bool = True,
) -> AsyncIterator[httpx.AsyncClient]:
    """`async with app_in_process(app) as client:` a client over `app`, its lifespan running.

    `front` is what requests go through when it is not `app` itself (middleware wrapped around it);
    `client` is the peer address the app sees; `headers` go with every request."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(
            app=front if front is not None else app, client=client, raise_app_exceptions=raise_app_exceptions
        )
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers) as http:
            yield http
