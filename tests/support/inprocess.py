"""The app in process: its lifespan running, behind an httpx ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from starlette.types import ASGIApp

BASE_URL = "http://tenk.test"


@asynccontextmanager
async def app_in_process(
    app: ASGIApp,
    *,
    lifespan_of: ASGIApp | None = None,
    headers: dict[str, str] | None = None,
    client: tuple[str, int] = ("127.0.0.1", 123),
    raise_app_exceptions: bool = True,
) -> AsyncIterator[httpx.AsyncClient]:
    """`async with app_in_process(app) as client:` a client over `app`, its lifespan running.

    `lifespan_of` names the FastAPI app whose lifespan to run when `app` wraps it in middleware;
    `client` is the peer address the app sees; `headers` go with every request."""
    owner = lifespan_of if lifespan_of is not None else app
    async with owner.router.lifespan_context(owner):  # type: ignore[attr-defined]
        transport = httpx.ASGITransport(app=app, client=client, raise_app_exceptions=raise_app_exceptions)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers) as http:
            yield http
