"""The one answer type every route handler returns, whichever lane called it.

A handler returns (status, JSON body bytes, Retry-After seconds or None). The hot lane writes those
straight onto the wire; FastAPI wraps them in a `Response` (`as_response`). Nothing else travels back,
so neither lane can add a header the other forgets.
"""

from __future__ import annotations

from typing import NamedTuple

import orjson
from starlette.responses import Response

JSON = "application/json"


class Reply(NamedTuple):
    status: int
    body: bytes
    retry_after: int | None = None


def as_response(reply: Reply) -> Response:
    headers = {"Retry-After": str(reply.retry_after)} if reply.retry_after is not None else None
    return Response(reply.body, reply.status, headers=headers, media_type=JSON)


def created(body: bytes, collection: str) -> Response:
    """201 for a row just written, its `Location` taken from the row's own id (what the OpenAPI links follow)."""
    return Response(body, 201, headers={"Location": f"{collection}/{orjson.loads(body)['id']}"}, media_type=JSON)
