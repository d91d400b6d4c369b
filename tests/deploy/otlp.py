"""An OTLP/HTTP (protobuf) trace receiver: the tracing tests' collector, and a sink for measuring tracing's
cost (`python -m tests.deploy.otlp 4318` keeps spans flowing to somewhere real, and counts them)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


@dataclass
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[str]
    # (trace_id, span_id) of each span link, hex.
    links: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Receiver:
    url: str
    spans: list[Span] = field(default_factory=list)

    def trace_of(self, path: str) -> list[Span]:
        server = [
            s
            for s in self.spans
            if s.kind == 2 and path in (s.attributes.get("url.path"), s.attributes.get("http.target"))
        ]
        if not server:
            return []
        return [s for s in self.spans if s.trace_id == server[0].trace_id]


def _value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value")) if any_value.WhichOneof("value") else None


def _handler(collected: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        collected.spans.append(
                            Span(
                                str(resource.get("service.name")),
                                span.name,
                                span.trace_id.hex(),
                                span.span_id.hex(),
                                span.parent_span_id.hex(),
                                span.kind,
                                {a.key: _value(a.value) for a in span.attributes},
                                [e.name for e in span.events],
                                [(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                            )
                        )
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def receiving(port: int = 0) -> Iterator[Receiver]:
    collected = Receiver("")
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(collected))
    collected.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield collected
    finally:
        server.shutdown()
        thread.join(10)


if __name__ == "__main__":
    with receiving(int(sys.argv[1]) if len(sys.argv) > 1 else 4318) as sink:
        print(f"OTLP/HTTP receiver on {sink.url}; Ctrl-C to stop", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print(f"{len(sink.spans)} spans received")
