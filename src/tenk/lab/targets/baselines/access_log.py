"""A plain-text line per request on stdout, the way uvicorn's default access log writes it.

The baselines log through the app rather than the server so the ladders can turn it off with one
env knob (NAIVE_ACCESS_LOG=0), whichever server runs them.
"""

from __future__ import annotations

import logging
import sys

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("naive.access")


def configure_access_logger() -> None:
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_capturing_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_capturing_status)
        finally:
            client = scope.get("client") or ("-", 0)
            query = scope.get("query_string", b"").decode("latin-1")
            log_request(client, scope["method"], scope["path"], query, scope.get("http_version", "1.1"), status)


def log_request(client: tuple[str, int], method: str, path: str, query: str, http_version: str, status: int) -> None:
    """One line, for the ASGI baselines' middleware and the WSGI baseline alike."""
    target = path + ("?" + query if query else "")
    logger.info('%s:%s - "%s %s HTTP/%s" %d', client[0], client[1], method, target, http_version, status)
