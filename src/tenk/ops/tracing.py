"""OpenTelemetry tracing, opt-in: off unless TENK_OPS_OTEL_ENDPOINT is set, and then only in processes that ask.

Invariant: with tracing off nothing here is imported or wrapped, so the request path costs exactly what it
did (the opentelemetry packages are the optional `otel` extra). With it on:

- every request gets a server span, the hot lane included: whatever serves tenk's app through
  `tenk.serving.server_argv` (`tenk serve`, the lab, the benchmarks) loads `tenk.app:create_traced_app` instead,
  which wraps the whole app, outside the lane, in `tenk.ops.server_spans` (sampler first: an unsampled
  request costs next to nothing);
- Postgres (asyncpg), Redis (redis-py, the Redis cache layer and the stream) and the upstream call
  (aiohttp) get client spans from their instrumentation libraries, children of the request's span;
- the in-process cache layers add events (`cache.lookup`: cache, layer, result) to the current span,
  through the hook `tenk.platform.metrics` offers on the counters they already count: nothing in the cache code;
- JSON log lines carry `trace_id` and `span_id` when a span is current.

`tenk worker` calls `setup_tracing` too. Each batch write gets a span (`ingest.write`: the COPY, dead
letters and XACK under it) linked to the spans that accepted its events: the API stores the accepting
span's W3C trace context in each stream entry (`tenk.ingest.tracelinks`). The worker's log lines about a
batch carry that span's ids.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tenk.ops.settings import OpsSettings

logger = logging.getLogger("tenk.tracing")

DEFAULT_APP = "tenk.app:create_app"
TRACED_APP = "tenk.app:create_traced_app"

# Set by `setup_tracing`: read once by what adds per-event work only when tracing (the stream producer,
# the worker), so that with tracing off they do exactly what they did.
_on = False


def tracing_on() -> bool:
    """Whether this process exports spans (`setup_tracing` ran with an endpoint)."""
    return _on


def _record_cache_events() -> None:
    from opentelemetry import trace

    from tenk.platform import add_cache_lookup_hook

    def add_event(labels: Mapping[str, str]) -> None:
        trace.get_current_span().add_event("cache.lookup", labels)

    add_cache_lookup_hook(add_event)


def install_trace_ids_in_logs() -> None:
    """Every log record made while a span is current carries its ids (the JSON formatter prints them)."""
    from opentelemetry import trace

    base = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            record.trace_id = format(context.trace_id, "032x")
            record.span_id = format(context.span_id, "016x")
        return record

    logging.setLogRecordFactory(factory)


def setup_tracing(service_name: str, settings: OpsSettings) -> bool:
    """Start exporting this process's spans to TENK_OPS_OTEL_ENDPOINT; False (and nothing done) when it is unset."""
    global _on
    if not settings.otel_endpoint:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
        from opentelemetry.instrumentation.redis import RedisInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from tenk.ops.server_spans import RequestSampler, TraceIdsDrawnAhead
    except ImportError as exc:
        raise RuntimeError(f"TENK_OPS_OTEL_ENDPOINT is set but the `otel` extra is not installed ({exc})") from None

    provider = TracerProvider(
        resource=Resource.create({"service.name": service_name}),
        sampler=RequestSampler(settings.otel_sample_ratio),
        id_generator=TraceIdsDrawnAhead(),  # so that the server spans can ask the sampler first
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=_traces_url(settings.otel_endpoint))))
    trace.set_tracer_provider(provider)
    AsyncPGInstrumentor().instrument()  # type: ignore[no-untyped-call]
    RedisInstrumentor().instrument()
    AioHttpClientInstrumentor().instrument()
    _record_cache_events()
    install_trace_ids_in_logs()
    _on = True
    logger.info("tracing on: %s, exporting to %s", service_name, settings.otel_endpoint)
    return True


def _traces_url(endpoint: str) -> str:
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def app_factory(default: str, traced: bool) -> str:
    """The app factory to serve: the traced one when tracing is asked for and tenk's own app is served."""
    return TRACED_APP if traced and default == DEFAULT_APP else default
