"""Fixtures of the operations tests: a tracer provider with the SDK's in-memory span exporter, handed to the proxy
(as in production, not the global provider); and, for the one test of that case, the same installed as the global
provider (auto-instrumentation), removed again afterwards so other tests run with tracing off."""

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
    # The API allows one global provider per process; the SDK's module-level proxy tracer caches the tracer it
    # resolved, so it is told to forget it too.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    if provider is not None:
        trace.set_tracer_provider(provider)
    sdk_otel._tracer._real_tracer = None  # type: ignore[attr-defined]


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    provider, exporter = _provider()
    try:
        yield provider, exporter
    finally:
        provider.shutdown()


@pytest.fixture
def global_spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    provider, exporter = _provider()
    _set_global(provider)
    try:
        yield provider, exporter
    finally:
        _set_global(None)
        provider.shutdown()
