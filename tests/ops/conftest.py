"""Fixtures of the operations tests: an in-memory span exporter installed as the global tracer provider (so the MCP
SDK's own server and client spans land next to the proxy's) for one test, and removed afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import mcp.shared._otel as sdk_otel
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


def _set_global(provider: TracerProvider | None) -> None:
    # The API allows one global provider per process; tests install one per test and take it away again, and the
    # SDK's module-level proxy tracer forgets the tracer it resolved, so other tests run with tracing off.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    if provider is not None:
        trace.set_tracer_provider(provider)
    sdk_otel._tracer._real_tracer = None  # type: ignore[attr-defined]


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _set_global(provider)
    try:
        yield provider, exporter
    finally:
        _set_global(None)
        provider.shutdown()
