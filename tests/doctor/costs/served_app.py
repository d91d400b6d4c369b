"""The app the server-level cost tests serve: a health check, a ping, and the pid that answered."""

from __future__ import annotations

import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route


async def ping(request: Request) -> PlainTextResponse:
    return PlainTextResponse("pong")


async def pid(request: Request) -> PlainTextResponse:
    return PlainTextResponse(str(os.getpid()))


app = Starlette(routes=[Route("/health", ping), Route("/ping", ping), Route("/pid", pid)])
