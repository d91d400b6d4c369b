"""A deadline on a request's head for uvicorn (alone or as gunicorn's worker), which has none of its own.

uvicorn times out an idle keep-alive connection, but cancels that timer on the first byte that arrives
and arms nothing for a new connection: a client that sends its headers a byte a second (slowloris)
holds a connection, and its socket and buffers, for as long as it likes. gunicorn's own timeouts watch
its workers, not their connections. Granian has the setting (`--http1-header-read-timeout`), which
`tenk.serving` passes; here uvicorn's httptools protocol gets the same rule:

    a connection must finish a request's head (request line and headers) within TENK_HEADER_TIMEOUT_S
    of being opened, or of its previous answer; otherwise it is closed, without an answer.

The body has its own deadline (TENK_BODY_TIMEOUT_S, in the app). The servers load these classes by
import path, with no arguments, so the timeout is read from the settings once per worker process.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.workers import UvicornWorker


@functools.cache
def header_timeout_s() -> float:
    # This process's entry point is the server, not tenk's CLI: the tree is read here, once.
    from tenk.settings import Settings

    return Settings().header_timeout_s


class HttpToolsWithHeaderTimeout(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request head is late."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_deadline = 0.0
        self._awaiting_head = True

    def _arm_head_timer(self) -> None:
        # A deadline per head, but not a timer per head: on a busy keep-alive connection the one timer
        # lives on, moved to the latest deadline when it fires, so an answer costs a clock read.
        self._awaiting_head = True
        self._head_deadline = self.loop.time() + header_timeout_s()
        if self._head_timer is None:
            self._head_timer = self.loop.call_at(self._head_deadline, self._head_is_late)

    def _head_is_late(self) -> None:
        self._head_timer = None
        if not self._awaiting_head or self.transport.is_closing():
            return  # a request is being served: its answer arms the next deadline
        if self.loop.time() < self._head_deadline:
            self._head_timer = self.loop.call_at(self._head_deadline, self._head_is_late)
            return
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The next head's deadline runs from this answer, unless a pipelined request's head is already in.
        if not self.transport.is_closing() and not self.pipeline:
            self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)


class UvicornWorkerWithHeaderTimeout(UvicornWorker):
    """gunicorn's uvicorn worker, on uvloop and the protocol above, with uvicorn's X-Forwarded-For handling
    off: tenk's edge resolves the client itself, from TENK_TRUSTED_PROXIES (`tenk.ops.forwarded`)."""

    CONFIG_KWARGS = {"loop": "uvloop", "http": HttpToolsWithHeaderTimeout, "proxy_headers": False}
