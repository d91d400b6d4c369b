"""Following an event from its accept to its write, through the stream entry (tracing on only).

The API stores the W3C trace context of the span that accepted an event (the request's server span, hot
lane included) in the entry's `keys.TRACE_FIELD`: `traceparent`, or `traceparent tracestate` when the
span has a tracestate. The worker's span for a batch write links to the accept spans of its entries,
so a trace UI leads from a POST's trace to the COPY that wrote its events, and back.

Imported only by processes that trace (`tenk.ops.tracing.tracing_on`): it needs the `otel` extra. An
entry's context is not user input but anyone can XADD: whatever the field holds, a context that does
not parse is ignored, never a reason to refuse or fail the entry's batch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextlib import AbstractContextManager

from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags, TraceState

# OpenTelemetry's default span link limit (OTEL_SPAN_LINK_COUNT_LIMIT): a batch of more distinct accept
# spans links the first 128 and counts the rest in `tenk.ingest.unlinked_accepts`.
MAX_LINKS = 128
# W3C: a tracestate longer than 512 characters may be cut; one is dropped whole here, so that a client's
# header costs each of its entries at most this much.
MAX_TRACESTATE = 512
# Version 00: the only one defined; a reader must not guess at the fields of a later one.
_TRACEPARENT = re.compile(rb"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_TRACEPARENT_SIZE = 55
SPAN_NAME = "ingest.write"

_tracer = trace.get_tracer("tenk.ingest")


def current_context() -> bytes | None:
    """The trace context of the current span, as the entry field holds it; None when it is not sampled
    (its span is not exported, so a link to it would lead nowhere)."""
    context = trace.get_current_span().get_span_context()
    if not (context.is_valid and context.trace_flags.sampled):
        return None
    value = b"00-%032x-%016x-%02x" % (context.trace_id, context.span_id, context.trace_flags)
    if context.trace_state:
        state = context.trace_state.to_header().encode()
        if len(state) <= MAX_TRACESTATE:
            value += b" " + state
    return value


def parse_context(value: bytes) -> SpanContext | None:
    """The span context an entry field holds, or None when it holds anything else."""
    if len(value) > _TRACEPARENT_SIZE + 1 + MAX_TRACESTATE:
        return None
    parent, _, state = value.partition(b" ")
    match = _TRACEPARENT.fullmatch(parent)
    if match is None:
        return None
    trace_id, span_id = int(match[1], 16), int(match[2], 16)
    if not trace_id or not span_id:
        return None
    trace_state = None
    if state:
        try:
            # An unreadable tracestate comes back empty; the link stands on the traceparent alone.
            trace_state = TraceState.from_header([state.decode("ascii")])
        except (UnicodeDecodeError, ValueError):
            trace_state = None
    return SpanContext(trace_id, span_id, True, TraceFlags(int(match[3], 16)), trace_state)


def links_to(contexts: Iterable[bytes | None]) -> tuple[list[Link], int]:
    """Links to the distinct accept spans among the entries' contexts (a request's events share one),
    at most MAX_LINKS; and how many distinct contexts were left unlinked (over the cap, or unreadable)."""
    distinct = dict.fromkeys(value for value in contexts if value)
    links: list[Link] = []
    for value in distinct:
        if len(links) == MAX_LINKS:
            break
        context = parse_context(value)
        if context is not None:
            links.append(Link(context))
    return links, len(distinct) - len(links)


def write_span(contexts: Iterable[bytes | None], entries: int) -> AbstractContextManager[trace.Span]:
    """The span of one batch write (COPY, dead letters, XACK), linked to its entries' accept spans.
    Links are given at the start, so that a sampler can see them."""
    links, unlinked = links_to(contexts)
    return _tracer.start_as_current_span(
        SPAN_NAME,
        kind=SpanKind.CONSUMER,
        links=links,
        attributes={"messaging.batch.message_count": entries, "tenk.ingest.unlinked_accepts": unlinked},
    )
