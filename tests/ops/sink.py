"""A local OTLP/HTTP endpoint on 127.0.0.1 that keeps every export request it receives (protobuf bodies): the
benchmarks' sink (``benchmarks/bench_procs.py``), plus the spans read back from what it kept."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from benchmarks import bench_procs


class OtlpSink(bench_procs.OtlpSink):
    def __init__(self) -> None:
        super().__init__(keep=True)

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
    with bench_procs.otlp_sink(sink):
        yield sink
