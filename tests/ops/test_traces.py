"""OpenTelemetry spans of tool calls, captured with the SDK's in-memory exporter through the real client → proxy →
upstream path: a success, a retried transient fault, a refusal and a replay; the host's trace context as the parent
and carried on to the upstream in ``_meta``."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import context, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags, TraceState

from tests.fixtures.scripted import ScriptedUpstream, ok_text
from tests.ops.support import call, ops_proxy

pytestmark = pytest.mark.anyio

Spans = tuple[TracerProvider, InMemorySpanExporter]
SECRET_ARG = "s3cr3t-argument-value"
HOST_TRACE = "0af7651916cd43dd8448eb211c80319c"
HOST_SPAN = "b7ad6b7169203331"


def by_name(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def one(spans: list[ReadableSpan], prefix: str) -> ReadableSpan:
    found = by_name(spans, prefix)
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def child(spans: list[ReadableSpan], name: str, parent: ReadableSpan) -> ReadableSpan:
    found = [s for s in spans if s.name == name and parent_of(s) == parent.context.span_id]
    assert len(found) == 1, [(s.name, parent_of(s)) for s in spans]
    return found[0]


def call_span(spans: list[ReadableSpan], tool: str) -> ReadableSpan:
    """The proxy's span of the call: the SDK's server span of the request, with the proxy's attributes."""
    found = [s for s in spans if s.name == f"tools/call {tool}" and "resilient_mcp.outcome" in attrs(s)]
    assert len(found) == 1, [(s.name, attrs(s)) for s in spans]
    assert found[0].kind is SpanKind.SERVER
    return found[0]


def upstream_server(spans: list[ReadableSpan], tool: str) -> ReadableSpan:
    """The in-process upstream's own server span of the request (an SDK server continuing the trace)."""
    found = [s for s in spans if s.name == f"tools/call {tool}" and "resilient_mcp.outcome" not in attrs(s)]
    assert len(found) == 1, [(s.name, attrs(s)) for s in spans]
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def shop() -> ScriptedUpstream:
    up = ScriptedUpstream(name="shop")
    schema = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    up.tool("get_stock", lambda args: ok_text("12 in stock", n=12), schema=schema)
    up.tool("create_order", lambda args: ok_text("order 1 created", id=1), schema=schema)
    return up


TOOLS = {"get_stock": {"effect": "read_only"}, "create_order": {"effect": "write_unsafe"}}


async def test_a_successful_call_is_the_request_span_with_one_attempt_and_the_sdk_client_span_inside_it(
    spans: Spans,
) -> None:
    provider, exporter = spans
    async with ops_proxy(shop(), TOOLS, tracer_provider=provider) as (h, _):
        result = await call(h, "get_stock", {"sku": SECRET_ARG})
    assert not result.is_error
    finished = list(exporter.get_finished_spans())
    span = call_span(finished, "get_stock")
    attempt = one(finished, "resilient-mcp attempt")
    client = child(finished, "MCP send tools/call get_stock", attempt)
    upstream = upstream_server(finished, "get_stock")
    assert client.kind is SpanKind.CLIENT
    assert parent_of(attempt) == span.context.span_id
    assert parent_of(upstream) == client.context.span_id, "the upstream (an SDK server) continues the trace"
    assert len({s.context.trace_id for s in (span, attempt, client, upstream)}) == 1
    a = attrs(span)
    assert a["gen_ai.tool.name"] == "get_stock" and a["resilient_mcp.upstream"] == "shop"
    assert a["resilient_mcp.effect"] == "read_only" and a["resilient_mcp.outcome"] == "ok"
    assert a["resilient_mcp.attempts"] == 1
    assert not {"resilient_mcp.replay", "resilient_mcp.cache_hit", "resilient_mcp.capped"} & set(a), "flags: when set"
    assert "resilient_mcp.fault_type" not in a and span.status.status_code is not StatusCode.ERROR
    assert attrs(attempt) == {"resilient_mcp.attempt": 1, "resilient_mcp.outcome": "ok"}
    for span in finished:  # no argument values anywhere in spans
        assert SECRET_ARG not in repr(attrs(span)) and SECRET_ARG not in span.name


async def test_a_retried_transient_fault_shows_a_failed_attempt_a_backoff_wait_and_a_successful_attempt(
    spans: Spans,
) -> None:
    provider, exporter = spans
    rule = {"match": {"tool": "get_stock", "nth_call": 1}, "fault": "rate_limit", "params": {"retry_after_ms": 20}}
    faults = {"rules": [rule]}
    async with ops_proxy(shop(), TOOLS, tracer_provider=provider, config={"faults": faults}) as (h, _):
        result = await call(h, "get_stock", {"sku": "apple"})
    assert not result.is_error
    finished = list(exporter.get_finished_spans())
    span = call_span(finished, "get_stock")
    attempts = sorted(by_name(finished, "resilient-mcp attempt"), key=lambda s: s.start_time or 0)
    backoff = one(finished, "resilient-mcp backoff")
    assert [attrs(s)["resilient_mcp.outcome"] for s in attempts] == ["D2_rate_limited", "ok"]
    assert attempts[0].status.status_code is StatusCode.ERROR
    assert {parent_of(s) for s in (*attempts, backoff)} == {span.context.span_id}
    assert attempts[0].end_time <= backoff.start_time and backoff.end_time <= attempts[1].start_time  # type: ignore[operator]
    assert attrs(backoff)["resilient_mcp.backoff_ms"] >= 20
    a = attrs(span)
    assert a["resilient_mcp.outcome"] == "ok" and a["resilient_mcp.attempts"] == 2


async def test_a_refused_call_has_no_attempt_and_names_the_stage_that_refused_it(spans: Spans) -> None:
    provider, exporter = spans
    up = shop()
    async with ops_proxy(up, TOOLS, tracer_provider=provider) as (h, _):
        result = await call(h, "create_order", {"qty": 2})  # sku is required
    assert result.is_error and up.count("create_order") == 0
    finished = list(exporter.get_finished_spans())
    span = call_span(finished, "create_order")
    assert by_name(finished, "resilient-mcp attempt") == []
    assert len(by_name(finished, "MCP send tools/call")) == 1, "only the host's request: nothing was sent upstream"
    a = attrs(span)
    assert a["resilient_mcp.outcome"] == "refused" and a["resilient_mcp.decided_by"] == "validate"
    assert a["resilient_mcp.fault_type"] == "B1_missing_required_argument"
    assert a["resilient_mcp.fault_category"] == "arguments" and a["resilient_mcp.repair_action"]
    assert a["resilient_mcp.attempts"] == 0 and span.status.status_code is StatusCode.ERROR


async def test_a_replayed_write_is_marked_and_never_reaches_the_upstream(spans: Spans) -> None:
    provider, exporter = spans
    up = shop()
    meta = {"idempotency-key": "order-77"}
    async with ops_proxy(up, TOOLS, tracer_provider=provider) as (h, _):
        await call(h, "create_order", {"sku": "S"}, meta)
        exporter.clear()
        second = await call(h, "create_order", {"sku": "S"}, meta)
    assert not second.is_error and up.count("create_order") == 1
    finished = list(exporter.get_finished_spans())
    span = call_span(finished, "create_order")
    assert by_name(finished, "resilient-mcp attempt") == []
    a = attrs(span)
    assert a["resilient_mcp.replay"] is True and a["resilient_mcp.decided_by"] == "idempotency"
    assert a["resilient_mcp.outcome"] == "ok" and a["resilient_mcp.effect"] == "write_unsafe"


async def test_the_hosts_trace_context_is_the_parent_and_reaches_the_upstream_in_meta(spans: Spans) -> None:
    provider, exporter = spans
    up = shop()
    # The host (an in-process SDK client here) is inside a trace of its own; its request carries it in _meta.
    state = TraceState([("vendor", "abc")])
    host = SpanContext(int(HOST_TRACE, 16), int(HOST_SPAN, 16), True, TraceFlags(1), state)
    async with ops_proxy(up, TOOLS, tracer_provider=provider) as (h, _):
        token = context.attach(trace.set_span_in_context(NonRecordingSpan(host)))
        try:
            await call(h, "get_stock", {"sku": "apple"})
        finally:
            context.detach(token)
    finished = list(exporter.get_finished_spans())
    span = call_span(finished, "get_stock")
    attempt = one(finished, "resilient-mcp attempt")
    sends = [s for s in finished if s.name == "MCP send tools/call get_stock"]
    host_client = next(s for s in sends if parent_of(s) == host.span_id)
    proxy_client = child(finished, "MCP send tools/call get_stock", attempt)
    assert parent_of(span) == host_client.context.span_id, "the proxy's span of the call joins the host's trace"
    assert {f"{s.context.trace_id:032x}" for s in (span, attempt, proxy_client)} == {HOST_TRACE}
    sent = up.metas[-1]
    version, trace_id, parent_id, flags = sent["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", HOST_TRACE, "01")
    assert parent_id == f"{proxy_client.context.span_id:016x}", "the upstream continues from the proxy's attempt"
    assert sent["tracestate"] == "vendor=abc"


async def test_with_tracing_off_the_hosts_trace_context_passes_through_unchanged() -> None:
    up = shop()
    traceparent = f"00-{HOST_TRACE}-{HOST_SPAN}-01"
    async with ops_proxy(up, TOOLS) as (h, ops):
        assert ops.tracing is None
        await call(h, "get_stock", {"sku": "apple"}, {"traceparent": traceparent})
    assert up.metas[-1]["traceparent"] == traceparent


async def test_a_tool_without_the_retry_stage_still_counts_its_one_attempt(spans: Spans) -> None:
    provider, exporter = spans
    tools = {**TOOLS, "get_stock": {"effect": "read_only", "retry": {"enabled": False}}}
    async with ops_proxy(shop(), tools, tracer_provider=provider) as (h, _):
        await call(h, "get_stock", {"sku": "apple"})
    finished = list(exporter.get_finished_spans())
    assert attrs(call_span(finished, "get_stock"))["resilient_mcp.attempts"] == 1
    assert attrs(one(finished, "resilient-mcp attempt 1"))["resilient_mcp.outcome"] == "ok"
