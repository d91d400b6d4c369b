"""The app in process: create_app's app, its lifespan running, behind an httpx ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI


async def in_process_client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client over `app`, lifespan and all: `async for client in in_process_client(app): ...`."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tenk.test") as client:
            yield client
