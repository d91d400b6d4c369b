"""The hot lane: `@hot` FastAPI routes matched and parsed without FastAPI's per-request machinery.

Each route is declared once, as a FastAPI route; `derive` reads that declaration into the lane's
parsers at start-up, and both lanes call the route's one handler, which returns a `Reply`. The edge
(`tenk.edge`) wraps the lane and FastAPI alike.
"""

from tenk.lane.declare import ContentType, IdempotencyKey, RawBody, app_state, header, hot, resolved
from tenk.lane.derive import LaneDeclarationError
from tenk.lane.dispatch import HotCall, Lane

__all__ = [
    "ContentType",
    "HotCall",
    "IdempotencyKey",
    "Lane",
    "LaneDeclarationError",
    "RawBody",
    "app_state",
    "header",
    "hot",
    "resolved",
]
