"""OpenTelemetry spans of tool calls, captured with the SDK's in-memory exporter through the real client → proxy →
upstream path: a success, a retried transient fault, a refusal and a replay (structure and attributes); the host's
trace context as the parent and carried on to the upstream in ``_meta``; and the case of a global SDK provider
(auto-instrumentation), where the proxy's attributes go on the SDK's own server span."""

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


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def named(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name.startswith(prefix)), key=lambda s: s.start_time or 0)


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, [(s.name, attrs(s)) for s in spans]
    return found[0]


def traceparent_parent(meta: dict[str, Any]) -> tuple[str, str]:
    version, trace_id, parent_id, flags = meta["traceparent"].split("-")
    assert version == "00" and int(flags, 16) & 1, "sampled"
    return trace_id, parent_id


def shop() -> ScriptedUpstream:
    up = ScriptedUpstream(name="shop")
    schema = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    up.tool("get_stock", lambda args: ok_text("12 in stock", n=12), schema=schema)
    up.tool("create_order", lambda args: ok_text("order 1 created", id=1), schema=schema)
    return up


TOOLS = {"get_stock": {"effect": "read_only"}, "create_order": {"effect": "write_unsafe"}}


async def test_a_successful_call_is_one_server_span_with_one_attempt_span_that_the_upstream_continues(
    spans: Spans,
) -> None:
    provider, exporter = spans
    up = shop()
    async with ops_proxy(up, TOOLS, tracer_provider=provider) as (h, _):
        result = await call(h, "get_stock", {"sku": SECRET_ARG})
    assert not result.is_error
    finished = list(exporter.get_finished_spans())
    assert sorted(s.name for s in finished) == ["resilient-mcp attempt 1", "tools/call get_stock"], "2 spans a call"
    span, attempt = one(finished, "tools/call get_stock"), one(finished, "resilient-mcp attempt 1")
    assert span.kind is SpanKind.SERVER and attempt.kind is SpanKind.CLIENT
    assert span.parent is None, "no trace from the host: a new one"
    assert parent_of(attempt) == span.context.span_id and attempt.context.trace_id == span.context.trace_id
    a = attrs(span)
    assert a["gen_ai.tool.name"] == "get_stock" and a["mcp.method.name"] == "tools/call"
    assert a["resilient_mcp.upstream"] == "shop" and a["resilient_mcp.effect"] == "read_only"
    assert a["resilient_mcp.outcome"] == "ok" and a["resilient_mcp.attempts"] == 1
    assert not {"resilient_mcp.replay", "resilient_mcp.cache_hit", "resilient_mcp.capped"} & set(a), "flags: when set"
    assert "resilient_mcp.fault_type" not in a and span.status.status_code is not StatusCode.ERROR
    assert attrs(attempt) == {"resilient_mcp.attempt": 1, "resilient_mcp.outcome": "ok"}
    trace_id, parent_id = traceparent_parent(up.metas[-1])
    assert (trace_id, parent_id) == (f"{span.context.trace_id:032x}", f"{attempt.context.span_id:016x}")
    for s in finished:  # no argument values anywhere in spans
        assert SECRET_ARG not in repr(attrs(s)) and SECRET_ARG not in s.name


async def test_a_retried_transient_fault_shows_a_failed_attempt_a_backoff_wait_and_a_successful_attempt(
    spans: Spans,
) -> None:
    provider, exporter = spans
    rule = {"match": {"tool": "get_stock", "nth_call": 1}, "fault": "rate_limit", "params": {"retry_after_ms": 20}}
    async with ops_proxy(shop(), TOOLS, tracer_provider=provider, config={"faults": {"rules": [rule]}}) as (h, _):
        result = await call(h, "get_stock", {"sku": "apple"})
    assert not result.is_error
    finished = list(exporter.get_finished_spans())
    span = one(finished, "tools/call get_stock")
    attempts = named(finished, "resilient-mcp attempt")
    backoff = one(finished, "resilient-mcp backoff")
    assert [s.name for s in attempts] == ["resilient-mcp attempt 1", "resilient-mcp attempt 2"]
    assert [attrs(s)["resilient_mcp.outcome"] for s in attempts] == ["error", "ok"]
    assert [attrs(s).get("resilient_mcp.fault_type") for s in attempts] == ["D2_rate_limited", None]
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
    span = one(finished, "tools/call create_order")
    assert named(finished, "resilient-mcp attempt") == []
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
    span = one(finished, "tools/call create_order")
    assert named(finished, "resilient-mcp attempt") == []
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
    span, attempt = one(finished, "tools/call get_stock"), one(finished, "resilient-mcp attempt 1")
    assert f"{span.context.trace_id:032x}" == HOST_TRACE and parent_of(span) == host.span_id
    assert attempt.context.trace_id == host.trace_id
    sent = up.metas[-1]
    assert traceparent_parent(sent) == (HOST_TRACE, f"{attempt.context.span_id:016x}"), "continued from the attempt"
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
    assert attrs(one(finished, "tools/call get_stock"))["resilient_mcp.attempts"] == 1
    assert attrs(one(finished, "resilient-mcp attempt 1"))["resilient_mcp.outcome"] == "ok"


async def test_with_a_global_sdk_provider_the_proxys_attributes_go_on_the_sdks_server_span(global_spans: Spans) -> None:
    provider, exporter = global_spans
    up = shop()
    async with ops_proxy(up, TOOLS, tracer_provider=provider) as (h, _):
        await call(h, "get_stock", {"sku": "apple"})
    finished = list(exporter.get_finished_spans())
    # The in-process client and upstream are SDK peers too: their spans are here as well.
    servers = [s for s in finished if s.name == "tools/call get_stock" and s.kind is SpanKind.SERVER]
    ours = [s for s in servers if "resilient_mcp.outcome" in attrs(s)]
    assert len(servers) == 2 and len(ours) == 1, "the upstream's server span, and the proxy's: the SDK's, enriched"
    span, attempt = ours[0], one(finished, "resilient-mcp attempt 1")
    assert attrs(span)["jsonrpc.request.id"] and attrs(span)["resilient_mcp.attempts"] == 1
    assert parent_of(attempt) == span.context.span_id
    sends = [s for s in finished if s.name == "MCP send tools/call get_stock"]
    client = [s for s in sends if parent_of(s) == attempt.context.span_id]
    assert len(client) == 1
    upstream = next(s for s in servers if s is not span)
    assert parent_of(upstream) == client[0].context.span_id, "the upstream continues from the SDK's client span"
