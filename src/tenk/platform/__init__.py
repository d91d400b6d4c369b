"""The platform beneath the domains: how a request reaches a handler, and what a handler stands on.

    server ─▶ TenkAPI ─▶ RequestEdge ─┬─▶ Lane (the `@hot` routes) ─┬─▶ handler ─▶ Reply ─▶ the wire
                                      └─▶ FastAPI routing, Depends ─┘
    errors: any exception a handler raises ─▶ `reply_for` ─▶ the one error body
    the lifespan: the pools (`create_pg_pool`, `create_redis`), caches and breakers, once per process

A domain is its routes, queries and schemas: it declares routes on an
`APIRouter(route_class=ReplyRoute)` with `hot`, `app_state` and the `require_*` key checks, answers
every one with a `Reply` (`check_replies` refuses any other at start-up), raises the errors below, and builds
its service from the caches, batches and resilience parts here; a read by id cached in every layer is
`tenk.platform.readthrough` (docs/building-an-api.md). It imports these names from `tenk.platform`
and `tenk.platform.readthrough`, never from the modules behind them. docs/platform.md tells the whole flow, the lane's
rules and the libraries' internals the fast paths use.
"""

from tenk.platform.auth import (
    OPS_POLICIES,
    KeyPolicy,
    check_authorization_header,
    key_digest,
    require_event_reader,
    require_ops_key,
    require_reader,
    require_writer,
)
from tenk.platform.background import cancel_and_wait, raise_if_cancelled
from tenk.platform.connections import (
    connect_redis,
    create_pg_pool,
    create_redis,
    is_cluster,
    on_one_connection,
    pg_pool_options,
    pool_gauges,
    pooler_connect_kwargs,
    redis_from_url,
    redis_options,
    reply_text,
)
from tenk.platform.edge import TenkAPI
from tenk.platform.errors import (
    ClientDisconnectedError,
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    RequestTimeoutError,
    TenkError,
    UnauthorizedError,
    UnavailableError,
    UpstreamTimeoutError,
    error_body,
    error_reply,
    install_error_handlers,
    reply_for,
    validation_fields,
)
from tenk.platform.lane import (
    RULES,
    ContentType,
    IdempotencyKey,
    LaneDeclarationError,
    RawBody,
    ReplyRoute,
    Rule,
    app_state,
    check_replies,
    header,
    hot,
    resolved,
)
from tenk.platform.local_cache import TtlCache
from tenk.platform.metrics import (
    add_cache_lookup_hook,
    cache_lookup_counter,
    live_gauges,
    method_label,
    metrics_endpoint,
    remove_cache_lookup_hook,
    route_template,
    scrape_registry,
)
from tenk.platform.models import COMMON_ERRORS, ErrorBody, PatchModel, PgText, errors_documented
from tenk.platform.outages import POSTGRES_ERRORS, REDIS_DOWN, postgres_is_down, redis_is_down
from tenk.platform.pagination import CursorCodec, cursor_codec, cursor_secret, cursors, keyset_page
from tenk.platform.pubsub import Broadcast, Receipt
from tenk.platform.reply import JSON, Reply, created, no_content
from tenk.platform.request_id import request_id_var
from tenk.platform.resilience import (
    Backoff,
    BreakerCall,
    BreakerState,
    Bulkhead,
    BulkheadFullError,
    CircuitBreaker,
    CircuitOpenError,
    Permit,
    SingleFlight,
)
from tenk.platform.turn_batch import TurnBatch

__all__ = [
    "COMMON_ERRORS",
    "JSON",
    "OPS_POLICIES",
    "POSTGRES_ERRORS",
    "REDIS_DOWN",
    "RULES",
    "Backoff",
    "BreakerCall",
    "BreakerState",
    "Broadcast",
    "Bulkhead",
    "BulkheadFullError",
    "CircuitBreaker",
    "CircuitOpenError",
    "ClientDisconnectedError",
    "ConflictError",
    "ContentType",
    "CursorCodec",
    "ErrorBody",
    "ForbiddenError",
    "IdempotencyKey",
    "InvalidInputError",
    "KeyPolicy",
    "LaneDeclarationError",
    "NotFoundError",
    "PatchModel",
    "PayloadTooLargeError",
    "Permit",
    "PgText",
    "RawBody",
    "Receipt",
    "Reply",
    "ReplyRoute",
    "RequestTimeoutError",
    "Rule",
    "SingleFlight",
    "TenkAPI",
    "TenkError",
    "TtlCache",
    "TurnBatch",
    "UnauthorizedError",
    "UnavailableError",
    "UpstreamTimeoutError",
    "add_cache_lookup_hook",
    "app_state",
    "cache_lookup_counter",
    "cancel_and_wait",
    "check_authorization_header",
    "check_replies",
    "connect_redis",
    "create_pg_pool",
    "create_redis",
    "created",
    "cursor_codec",
    "cursor_secret",
    "cursors",
    "error_body",
    "error_reply",
    "errors_documented",
    "header",
    "hot",
    "install_error_handlers",
    "is_cluster",
    "key_digest",
    "keyset_page",
    "live_gauges",
    "method_label",
    "metrics_endpoint",
    "no_content",
    "on_one_connection",
    "pg_pool_options",
    "pool_gauges",
    "pooler_connect_kwargs",
    "postgres_is_down",
    "raise_if_cancelled",
    "redis_from_url",
    "redis_is_down",
    "redis_options",
    "remove_cache_lookup_hook",
    "reply_for",
    "reply_text",
    "request_id_var",
    "require_event_reader",
    "require_ops_key",
    "require_reader",
    "require_writer",
    "resolved",
    "route_template",
    "scrape_registry",
    "validation_fields",
]
