"""The server span per request (`tenk.ops.server_spans`), against the real OpenTelemetry SDK and tenk's real
app on the shared stack; spans are collected in memory instead of exported."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, Sampler
from opentelemetry.trace import SpanKind, StatusCode, Tracer
from pydantic import ValidationError

from harness.clients import AUTH
from harness.stack import Stack
from tenk.app import create_app
from tenk.ops.server_spans import RequestSampler, ServerSpans, TraceIdsDrawnAhead
from tenk.ops.settings import OpsSettings
from tests.support.inprocess import app_in_process

# A remote parent that did not sample its trace (W3C flags 00).
UNSAMPLED_PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


@pytest.fixture
def exported() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(params=["sampler first", "sdk only"])
def ids(request: pytest.FixtureRequest) -> type[RandomIdGenerator]:
    """Each test runs twice: with tenk's ids, which let ServerSpans ask the sampler before the SDK (and skip
    the SDK for a dropped request), and with the SDK's own, where the SDK does everything."""
    return TraceIdsDrawnAhead if request.param == "sampler first" else RandomIdGenerator


def _tracer(
    exported: InMemorySpanExporter, sample: bool | Sampler, ids: type[RandomIdGenerator] = TraceIdsDrawnAhead
) -> Tracer:
    # Parent-based, as tenk's own provider: a request's children follow its decision.
    sampler = sample if isinstance(sample, Sampler) else ParentBased(ALWAYS_ON if sample else ALWAYS_OFF)
    provider = TracerProvider(sampler=sampler, id_generator=ids())
    provider.add_span_processor(SimpleSpanProcessor(exported))
    return provider.get_tracer("test")


# httpx's ASGI transport calls from this address unless told otherwise.
CALLER = "127.0.0.1"


def _client(
    app: FastAPI, tracer: Tracer, trusted: tuple[str, ...] = (CALLER,), caller: str = CALLER
) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    wrapped = ServerSpans(app, tracer, frozenset({"/health"}), trusted_networks=trusted)
    return app_in_process(app, front=wrapped, client=(caller, 40000), headers=AUTH)


def _servers(exported: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exported.get_finished_spans() if s.kind == SpanKind.SERVER]


@pytest.fixture
def app(stack: Stack) -> FastAPI:
    return create_app(stack.settings())


async def test_hot_lane_and_fastapi_requests_get_a_span_named_by_route_template_with_their_status(
    app: FastAPI, exported: InMemorySpanExporter, ids: type[RandomIdGenerator]
) -> None:
    async with _client(app, _tracer(exported, True, ids)) as client:
        assert (await client.get("/products/1777")).status_code == 200  # served by the hot lane
        assert (await client.get("/products/0")).status_code == 422  # FastAPI words the 422
        assert (await client.get("/no/such/path")).status_code == 404
        assert (await client.get("/health")).status_code == 200  # excluded
    spans = _servers(exported)
    named = [(s.name, s.attributes or {}) for s in spans]
    assert [(name, a["url.path"], a["http.response.status_code"]) for name, a in named] == [
        ("GET /products/{product_id}", "/products/1777", 200),
        ("GET /products/{product_id}", "/products/0", 422),
        ("GET <unmatched>", "/no/such/path", 404),
    ]
    assert all(a["http.route"] == name.removeprefix("GET ") for name, a in named)
    assert all(s.status.status_code != StatusCode.ERROR for s in spans)


async def test_an_incoming_trace_context_is_continued(
    app: FastAPI, exported: InMemorySpanExporter, ids: type[RandomIdGenerator]
) -> None:
    sampled_parent = UNSAMPLED_PARENT[:-2] + "01"
    async with _client(app, _tracer(exported, True, ids)) as client:
        await client.get("/tasks", headers={"traceparent": sampled_parent})
    (span,) = _servers(exported)
    assert format(span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert span.parent is not None
    assert format(span.parent.span_id, "016x") == "b7ad6b7169203331"


@pytest.mark.parametrize(
    ("trusted", "caller"),
    [((), CALLER), (("10.0.0.0/8", "::1"), "203.0.113.9")],
    ids=["no network trusted (the default)", "caller outside the trusted networks"],
)
async def test_an_untrusted_callers_sampled_flag_does_not_force_recording(
    app: FastAPI, exported: InMemorySpanExporter, ids: type[RandomIdGenerator], trusted: tuple[str, ...], caller: str
) -> None:
    """With a ratio of 0 no new trace is kept: only an honoured parent's flag could record these requests."""
    sampled_parent = UNSAMPLED_PARENT[:-2] + "01"
    async with _client(app, _tracer(exported, RequestSampler(0.0), ids), trusted, caller) as client:
        for _ in range(20):
            assert (await client.get("/products/1777", headers={"traceparent": sampled_parent})).status_code == 200
            assert (await client.get("/tasks", headers={"traceparent": sampled_parent})).status_code == 200
    assert exported.get_finished_spans() == ()


async def test_a_trusted_networks_sampled_flag_is_honoured(
    app: FastAPI, exported: InMemorySpanExporter, ids: type[RandomIdGenerator]
) -> None:
    sampled_parent = UNSAMPLED_PARENT[:-2] + "01"
    tracer = _tracer(exported, RequestSampler(0.0), ids)
    async with _client(app, tracer, ("10.0.0.0/8",), "10.1.2.3") as client:
        assert (await client.get("/tasks", headers={"traceparent": sampled_parent})).status_code == 200
    (span,) = _servers(exported)
    assert format(span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize(
    ("trusted", "forwarded_for", "continued"),
    [
        (("10.0.0.0/8",), "10.1.2.3", True),  # the client the proxy forwards for is trusted
        (("10.0.0.0/8",), "203.0.113.9", False),
        ((CALLER, "10.0.0.0/8"), "203.0.113.9", False),  # the proxy's own address makes no client trusted
        ((CALLER,), "192.0.2.1, 203.0.113.9", False),
        (("10.0.0.0/8",), "10.1.2.3, 203.0.113.9", False),  # the left-most is the client's to write
    ],
)
async def test_behind_a_trusted_proxy_the_client_it_forwards_for_is_the_caller(
    app: FastAPI,
    exported: InMemorySpanExporter,
    ids: type[RandomIdGenerator],
    trusted: tuple[str, ...],
    forwarded_for: str,
    continued: bool,
) -> None:
    sampled_parent = UNSAMPLED_PARENT[:-2] + "01"
    tracer = _tracer(exported, RequestSampler(0.0), ids)
    wrapped = ServerSpans(app, tracer, trusted_networks=trusted, trusted_proxies=(CALLER,))
    async with app_in_process(app, front=wrapped, client=(CALLER, 40000), headers=AUTH) as client:
        headers = {"traceparent": sampled_parent, "x-forwarded-for": forwarded_for}
        assert (await client.get("/tasks", headers=headers)).status_code == 200
    assert [format(span.context.trace_id, "032x") for span in _servers(exported)] == (
        ["0af7651916cd43dd8448eb211c80319c"] if continued else []
    )


def test_trusted_networks_are_read_as_a_comma_separated_list_and_refused_when_not_networks() -> None:
    assert OpsSettings.model_validate({"otel_trusted_networks": "10.0.0.0/8, ::1"}).otel_trusted_networks == [
        "10.0.0.0/8",
        "::1",
    ]
    with pytest.raises(ValidationError, match="otel_trusted_networks"):
        OpsSettings.model_validate({"otel_trusted_networks": "10.0.0.0/8,everyone"})


async def test_an_unsampled_request_records_nothing_below_it_either(
    app: FastAPI, exported: InMemorySpanExporter, ids: type[RandomIdGenerator]
) -> None:
    """The dropped span is still current, so the spans started under it (here one of our own; in tenk the
    asyncpg and Redis ones) follow its decision instead of starting traces of their own."""
    tracer = _tracer(exported, True, ids)  # a root would be recorded: only the parent's decision drops them

    @app.get("/child")
    async def child() -> dict[str, bool]:
        with tracer.start_as_current_span("child") as span:
            return {"recording": span.is_recording()}

    async with _client(app, tracer) as client:
        reply = await client.get("/child", headers={"traceparent": UNSAMPLED_PARENT})
        assert reply.json() == {"recording": False}
        assert (await client.get("/products/1777", headers={"traceparent": UNSAMPLED_PARENT})).status_code == 200
    assert exported.get_finished_spans() == ()


async def test_a_new_trace_dropped_by_the_ratio_still_makes_its_children_drop(
    app: FastAPI, exported: InMemorySpanExporter, ids: type[RandomIdGenerator]
) -> None:
    """The child's own tracer would record a root span: only a current, valid, unsampled parent stops it."""
    child_tracer = _tracer(InMemorySpanExporter(), sample=True)

    @app.get("/child")
    async def child() -> dict[str, bool]:
        with child_tracer.start_as_current_span("child") as span:
            parent = trace.get_current_span().get_span_context()
            return {"recording": span.is_recording(), "trace": parent.trace_id != 0}

    async with _client(app, _tracer(exported, RequestSampler(0.0), ids)) as client:
        assert (await client.get("/child")).json() == {"recording": False, "trace": True}
    assert exported.get_finished_spans() == ()


async def test_a_ratio_keeps_its_share_of_new_traces_not_the_square_of_it(
    app: FastAPI, exported: InMemorySpanExporter, ids: type[RandomIdGenerator]
) -> None:
    """Asking the sampler first must not make the SDK draw again: kept requests are half, not a quarter."""
    async with _client(app, _tracer(exported, RequestSampler(0.5), ids)) as client:
        for _ in range(400):
            assert (await client.get("/products/1777")).status_code == 200
    # Binomial(400, 0.5): 200 +- 10; a second draw gives 100 +- 8.7. Either bound is 5 deviations away.
    assert 150 <= len(_servers(exported)) <= 250


async def test_an_exception_marks_the_span_as_an_error() -> None:
    exported = InMemorySpanExporter()
    app = FastAPI()

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("boom")

    wrapped = ServerSpans(app, _tracer(exported, sample=True))
    async with app_in_process(app, front=wrapped, raise_app_exceptions=False) as client:
        assert (await client.get("/boom")).status_code == 500
    (span,) = _servers(exported)
    assert span.status.status_code == StatusCode.ERROR
    assert span.name == "GET /boom"
    assert [e.name for e in span.events] == ["exception"]
