"""The hot lane: a pure-ASGI path in front of FastAPI, derived from the FastAPI routes marked `@hot`.

Each route is declared once, as a FastAPI route; `derive` reads that declaration into the lane's
parsers at start-up, and both lanes call the route's one handler, which returns a `Reply`.
"""

from tenk.lane.asgi import TenkAPI
from tenk.lane.declare import ContentType, IdempotencyKey, RawBody, app_state, header, hot, resolved
from tenk.lane.derive import LaneDeclarationError

__all__ = [
    "ContentType",
    "IdempotencyKey",
    "LaneDeclarationError",
    "RawBody",
    "TenkAPI",
    "app_state",
    "header",
    "hot",
    "resolved",
]
