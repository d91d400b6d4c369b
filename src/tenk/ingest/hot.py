"""POST /events and /events/batch in the hot lane (see tenk.hotpath).

At thousands of events a second, FastAPI's route matching and dependency solving cost more than
accepting the event does. These handlers do the same work as the documented routes (API key, body
limit, validation, XADD, the same outcome from `accept.py`).
"""

from __future__ import annotations

from tenk.hotpath import HotRequest, HotResult, HotRoute
from tenk.ingest.accept import accept_batch, accept_one
from tenk.ops.auth import check_authorization_header


async def _authorized_body(request: HotRequest) -> bytes:
    check_authorization_header(request.header(b"authorization"), request.state.accepted_key_digests)
    body: bytes = await request.body(request.state.settings.max_body_bytes)
    return body


async def post_event(request: HotRequest) -> HotResult:
    body = await _authorized_body(request)
    return await accept_one(request.state.ingest, body)


async def post_batch(request: HotRequest) -> HotResult:
    body = await _authorized_body(request)
    return await accept_batch(request.state.ingest, body, b"ndjson" in request.header(b"content-type"))


ROUTES = [HotRoute("POST", "/events", post_event), HotRoute("POST", "/events/batch", post_batch)]
