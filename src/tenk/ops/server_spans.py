"""A server span per HTTP request, as cheap as the sampler allows (tracing on only; needs the `otel` extra).

Why not opentelemetry-instrumentation-asgi: it computes the request's attributes, records its own
duration histograms and wraps `send` for every request, sampled or not, so that at a low sample ratio
its work on the requests it drops outweighs a cached read (4421126's message has the figures). Here
the sampler decides first; a request it drops pays for one span id and a context switch, nothing else,
and still makes its (non-recording) span current, so that the Postgres and Redis spans under it are
dropped with it instead of starting traces of their own.

A recorded span carries the stable HTTP semantic conventions: `http.request.method`, `url.path`,
`http.route` (the route template, also for the hot lane, which sets `scope["route"]`),
`http.response.status_code`, and error status for a 5xx or an exception. Its name is
"<method> <route template>", bounded like the metrics' labels.

The sampler is asked before any span exists. The SDK's `start_span` does its work even for a span it drops
(ids, the sampler, its own metrics, the span object), and `use_span` more, on every request that tracing at
a low ratio does not keep (docs/results.md#2026-11-26-tracing-in-process). So ServerSpans draws the trace
id and asks the provider's sampler itself; a dropped request gets a bare non-recording span, made current
with one context attach. A kept one goes to the SDK, which must then start it with the trace id the sampler
saw (a ratio sampler decides by the id: a fresh id would be a second draw, and the kept share the square of
the ratio): hence the provider's `TraceIdsDrawnAhead`. With any other tracer, every request takes the SDK's
path.

An incoming W3C trace context is continued only from a trusted caller (TENK_OPS_OTEL_TRUSTED_NETWORKS):
with a parent-based sampler, a `traceparent` whose sampled flag is set makes the request recorded, so any
client could otherwise have every request it sends traced (and exported) at will. Picking the trace id
would not do either: the ratio sampler decides by the id, which the client then chooses. From anyone
else the headers are ignored and the request is a new trace, sampled by the ratio. The caller is the client
that TENK_TRUSTED_PROXIES resolves (`tenk.ops.forwarded`), as for every other use of the client: a
proxy listed there passes its clients' traceparent on, so it never makes them trusted.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import (
    INVALID_SPAN_CONTEXT,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tenk.ops.forwarded import TrustedProxies, address_of, is_in, parse_networks
from tenk.platform import method_label, route_template

_PROPAGATED = (b"traceparent", b"tracestate")
# A dropped request's trace flags: not sampled, with or without W3C's "random trace id" (as the SDK sets them).
_UNSAMPLED = TraceFlags(TraceFlags.DEFAULT)
_UNSAMPLED_RANDOM_ID = TraceFlags(TraceFlags.RANDOM_TRACE_ID)


def _carrier(scope: Scope) -> dict[str, str]:
    """The W3C trace-context headers, the only ones the default propagator reads."""
    return {name.decode(): value.decode("latin-1") for name, value in scope["headers"] if name in _PROPAGATED}


class TraceIdsDrawnAhead(RandomIdGenerator):
    """Random ids, except that the next trace id can be handed in: the one ServerSpans drew to ask the sampler."""

    _handed: int | None = None

    def hand_over(self, trace_id: int) -> None:
        # Taken by the SDK's start_span, called right after with no await between: no other span can take it.
        self._handed = trace_id

    def generate_trace_id(self) -> int:
        trace_id, self._handed = self._handed, None
        return trace_id if trace_id is not None else super().generate_trace_id()


class RequestSampler(ParentBased):
    """ParentBased(TraceIdRatioBased(ratio)), tenk's sampler, whose verdict on a new trace is one comparison:
    the SDK's call through both samplers is a large part of what is left of an unsampled request's cost."""

    def __init__(self, ratio: float) -> None:
        self.new_traces = TraceIdRatioBased(ratio)
        super().__init__(self.new_traces)

    def keeps_new_trace(self, trace_id: int) -> bool:
        return trace_id & TraceIdRatioBased.TRACE_ID_LIMIT < self.new_traces.bound  # TraceIdRatioBased's own rule


class _Sampling:
    """The provider's sampler and ids, for deciding a request's fate before the SDK is involved."""

    def __init__(self, sampler: Sampler, ids: TraceIdsDrawnAhead) -> None:
        self.sampler = sampler
        self.ids = ids
        self.new_trace_flags = _UNSAMPLED_RANDOM_ID if ids.is_trace_id_random() else _UNSAMPLED

    def dropped(self, parent: Context | None, name: str) -> NonRecordingSpan | None:
        """The request's span if the sampler drops it; None if it is kept (its trace id then handed over)."""
        parent_context = trace.get_current_span(parent).get_span_context() if parent else INVALID_SPAN_CONTEXT
        root = not parent_context.is_valid
        trace_id = self.ids.generate_trace_id() if root else parent_context.trace_id
        if root and isinstance(self.sampler, RequestSampler):
            kept, trace_state = self.sampler.keeps_new_trace(trace_id), None
        else:
            result = self.sampler.should_sample(parent, trace_id, name, SpanKind.SERVER)
            kept, trace_state = result.decision is not Decision.DROP, result.trace_state
        if kept:
            if root:
                self.ids.hand_over(trace_id)
            return None
        # The flags the SDK would give it: not sampled, and "random trace id" as the trace's origin says.
        if root:
            flags = self.new_trace_flags
        else:
            flags = _UNSAMPLED_RANDOM_ID if parent_context.trace_flags.random_trace_id else _UNSAMPLED
        span_context = SpanContext(
            trace_id, self.ids.generate_span_id(), is_remote=False, trace_flags=flags, trace_state=trace_state
        )
        return NonRecordingSpan(span_context)


class ServerSpans:
    def __init__(
        self,
        app: ASGIApp,
        tracer: Tracer,
        excluded_paths: frozenset[str] = frozenset(),
        trusted_networks: Iterable[str] = (),
        trusted_proxies: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.tracer = tracer
        self.excluded_paths = excluded_paths
        self.trusted_networks = parse_networks(trusted_networks)
        # Resolved here as well as at the edge, which runs inside these spans: only for a request that
        # carries a trace context, when some caller may be trusted.
        self.proxies = TrustedProxies(trusted_proxies)
        self.sampling: _Sampling | None = None
        if isinstance(tracer, SdkTracer) and isinstance(tracer.id_generator, TraceIdsDrawnAhead):
            self.sampling = _Sampling(tracer.sampler, tracer.id_generator)

    def _caller_is_trusted(self, scope: Scope) -> bool:
        if not self.trusted_networks:
            return False
        client = self.proxies.client(scope)
        return client is not None and is_in(address_of(client[0]), self.trusted_networks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.excluded_paths:
            await self.app(scope, receive, send)
            return
        carrier = _carrier(scope)
        trusted = carrier and self._caller_is_trusted(scope)
        parent = propagate.extract(carrier) if trusted else None
        method = method_label(scope["method"])
        dropped = self.sampling.dropped(parent, method) if self.sampling else None
        if dropped is not None:
            # Current all the same: the Postgres and Redis spans under it see its decision and drop too.
            token = context.attach(trace.set_span_in_context(dropped, parent))
            try:
                await self.app(scope, receive, send)
            finally:
                context.detach(token)
            return
        span = self.tracer.start_span(method, context=parent, kind=SpanKind.SERVER)
        with trace.use_span(span, end_on_exit=True):
            if not span.is_recording():
                await self.app(scope, receive, send)
                return
            span.set_attribute("http.request.method", method)
            span.set_attribute("url.path", scope["path"])

            async def send_noting_status(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = message["status"]
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                await send(message)

            try:
                await self.app(scope, receive, send_noting_status)
            finally:
                route = route_template(scope)
                span.set_attribute("http.route", route)
                span.update_name(f"{method} {route}")
