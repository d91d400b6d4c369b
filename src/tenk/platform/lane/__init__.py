"""The hot lane: `@hot` FastAPI routes matched and parsed without FastAPI's per-request machinery.

Each route is declared once, as a FastAPI route; `derive` reads that declaration into the lane's
parsers at start-up, and both lanes call the route's one handler, which returns a `Reply`. What a
declaration must keep is `RULES` (rules.py); each refusal names the route, the rule and the fix. The edge
(`tenk.platform.edge`) wraps the lane and FastAPI alike.
"""

from tenk.platform.lane.declare import (
    ContentType,
    IdempotencyKey,
    RawBody,
    ReplyRoute,
    app_state,
    header,
    hot,
    resolved,
    returns_reply,
)
from tenk.platform.lane.derive import check_replies
from tenk.platform.lane.dispatch import HotCall, Lane
from tenk.platform.lane.rules import RULES, LaneDeclarationError, Rule

__all__ = [
    "RULES",
    "ContentType",
    "HotCall",
    "IdempotencyKey",
    "Lane",
    "LaneDeclarationError",
    "RawBody",
    "ReplyRoute",
    "Rule",
    "app_state",
    "check_replies",
    "header",
    "hot",
    "resolved",
    "returns_reply",
]
