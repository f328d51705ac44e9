"""A local OTLP/HTTP endpoint on 127.0.0.1 that keeps every export request it receives (protobuf bodies)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span


class OtlpSink:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        self.url = ""

    def spans(self) -> list[Span]:
        with self.lock:
            bodies = list(self.bodies)
        out: list[Span] = []
        for body in bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    out.extend(scope.spans)
        return out


@contextmanager
def otlp_sink() -> Iterator[OtlpSink]:
    sink = OtlpSink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with sink.lock:
                sink.bodies.append(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-sink", daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
