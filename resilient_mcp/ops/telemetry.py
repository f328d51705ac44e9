"""OpenTelemetry traces: one span per tool call, a child per upstream attempt and per wait between attempts.

The proxy's tracer provider is its own: the MCP SDK's spans of every message (which it opens through the global
provider) stay no-ops, so a call costs two spans, not four. Those no-op spans still carry the trace context along:
the call span (``tools/call NAME``, kind SERVER) is a child of the host's trace from ``_meta.traceparent`` (and over
HTTP of the request's ``traceparent`` header when ``_meta`` names no trace, ``HeaderTraceContext``), and while an
attempt span (kind CLIENT) is current, the SDK puts ``traceparent``/``tracestate`` of that attempt into the ``_meta``
it sends upstream, so a chained proxy or an instrumented server continues the trace. When a recording span is
already current (a global SDK provider installed by auto-instrumentation), the proxy adds its attributes to that
span instead of opening a second one. Spans never carry argument values: names, classes, counts.

The SDK, the OTLP/HTTP exporter and the batching processor come with the ``[otel]`` extra; the exporter is configured
by the standard ``OTEL_*`` environment variables.
"""

from __future__ import annotations

import os
from contextvars import Token
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..call.chain import ToolCall
from ..call.events import CallEnd, CallEvents, Sleep

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult
    from opentelemetry.sdk.trace import TracerProvider

    from ..proxy.proxy import Ctx

TRACER_NAME = "resilient-mcp"


class _CallSpans:
    __slots__ = ("attempt", "attempt_token", "own", "span", "token")

    def __init__(self, span: trace.Span, token: Token[otel_context.Context] | None, own: bool) -> None:
        self.span, self.token, self.own = span, token, own
        self.attempt: trace.Span | None = None
        self.attempt_token: Token[otel_context.Context] | None = None


def _parent(call: ToolCall) -> otel_context.Context | None:
    """The trace in the call's ``_meta`` (when no span is current, e.g. a chain run outside the SDK's server)."""
    if call.meta and "traceparent" in call.meta:
        ctx = extract(call.meta)
        if trace.get_current_span(ctx).get_span_context().is_valid:
            return ctx
    return None


class TraceRecorder(CallEvents):
    """Spans of tool calls. The call's span is the MCP SDK's server span of the request (``tools/call NAME``, kind
    SERVER), which already joined the host's trace: the proxy adds its attributes to it rather than opening a second
    span per call. Without a recording server span (a chain run outside the SDK) the proxy opens its own."""

    enabled = True

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)

    def call_started(self, call: ToolCall) -> None:
        # Few attributes, set once: each costs the SDK a validation on the hot path. The tool's name is on the SDK's
        # span already (gen_ai.tool.name); the upstream's own name for it only when it differs.
        attributes: dict[str, Any] = {
            "resilient_mcp.upstream": call.upstream,
            "resilient_mcp.effect": call.rule.effect.value,
        }
        if call.upstream_tool != call.name:
            attributes["resilient_mcp.upstream_tool"] = call.upstream_tool
        current = trace.get_current_span()
        if current.is_recording():
            current.set_attributes(attributes)
            call.record.ops = _CallSpans(current, None, own=False)
            return
        attributes["mcp.method.name"] = "tools/call"
        attributes["gen_ai.operation.name"] = "execute_tool"
        attributes["gen_ai.tool.name"] = call.name
        if call.call_id != "-":
            attributes["jsonrpc.request.id"] = call.call_id
        parent = None if current.get_span_context().is_valid else _parent(call)
        span = self._tracer.start_span(
            f"tools/call {call.name}", context=parent, kind=SpanKind.SERVER, attributes=attributes
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        call.record.ops = _CallSpans(span, token, own=True)

    def call_finished(self, call: ToolCall, end: CallEnd) -> None:
        spans = call.record.ops
        if not isinstance(spans, _CallSpans):
            return
        span = spans.span
        attributes: dict[str, Any] = {"resilient_mcp.outcome": end.outcome, "resilient_mcp.attempts": end.attempts}
        for key, flag in (
            ("resilient_mcp.replay", end.replay),
            ("resilient_mcp.cache_hit", end.cache_hit),
            ("resilient_mcp.capped", end.capped),
            ("resilient_mcp.fallback", end.fallback),
        ):
            if flag:
                attributes[key] = True
        for key, value in (
            ("resilient_mcp.fault_type", end.fault_type),
            ("resilient_mcp.fault_category", end.category),
            ("resilient_mcp.repair_action", end.repair_action),
            ("resilient_mcp.decided_by", end.decided_by),
        ):
            if value is not None:
                attributes[key] = value
        span.set_attributes(attributes)
        if end.outcome in ("error", "refused"):
            span.set_status(Status(StatusCode.ERROR, end.fault_type or end.outcome))
        if spans.attempt is not None:  # cancelled mid-attempt
            self._end_attempt(spans, "cancelled", None)
        if spans.own and spans.token is not None:
            otel_context.detach(spans.token)
            span.end()

    def attempt_started(self, call: ToolCall) -> None:
        spans = call.record.ops
        if not isinstance(spans, _CallSpans):
            return
        n = call.record.sent
        attempt = self._tracer.start_span(
            f"resilient-mcp attempt {n}", kind=SpanKind.CLIENT, attributes={"resilient_mcp.attempt": n}
        )
        spans.attempt = attempt
        spans.attempt_token = otel_context.attach(trace.set_span_in_context(attempt))

    def attempt_finished(self, call: ToolCall, error: BaseException | None) -> None:
        spans = call.record.ops
        if not isinstance(spans, _CallSpans) or spans.attempt is None:
            return
        if error is None:
            self._end_attempt(spans, "ok", None)
            return
        fault_type = getattr(error, "fault_type", None)
        if isinstance(fault_type, str):
            self._end_attempt(spans, "error", fault_type)
        else:
            self._end_attempt(spans, "internal_error" if isinstance(error, Exception) else "cancelled", None)

    def _end_attempt(self, spans: _CallSpans, outcome: str, fault_type: str | None) -> None:
        attempt, spans.attempt = spans.attempt, None
        token, spans.attempt_token = spans.attempt_token, None
        assert attempt is not None and token is not None
        attempt.set_attribute("resilient_mcp.outcome", outcome)
        if fault_type is not None:  # as on the call's span and in the metrics: the type has its own attribute
            attempt.set_attribute("resilient_mcp.fault_type", fault_type)
            attempt.set_status(Status(StatusCode.ERROR, fault_type))
        otel_context.detach(token)
        attempt.end()

    def wrap_sleep(self, sleep: Sleep) -> Sleep:
        tracer = self._tracer

        async def backoff(delay_s: float) -> None:
            attributes = {"resilient_mcp.backoff_ms": round(delay_s * 1000)}
            with tracer.start_as_current_span("resilient-mcp backoff", attributes=attributes):
                await sleep(delay_s)

        return backoff


class HeaderTraceContext:
    """Server middleware (placed before the SDK's span middleware): an HTTP request whose ``_meta`` carries no
    ``traceparent`` joins the trace of its ``traceparent``/``tracestate`` headers."""

    async def __call__(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        headers = getattr(ctx.request, "headers", None)
        meta = ctx.meta
        if headers is None or "traceparent" not in headers or (meta and "traceparent" in meta):
            return await call_next(ctx)
        carrier = {k: headers[k] for k in ("traceparent", "tracestate") if k in headers}
        joined = extract(carrier)
        if not trace.get_current_span(joined).get_span_context().is_valid:
            return await call_next(ctx)
        token = otel_context.attach(joined)
        try:
            return await call_next(ctx)
        finally:
            otel_context.detach(token)


def sdk_available() -> bool:
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True


def start_tracing(service_name: str = "resilient-mcp") -> TracerProvider:
    """The proxy's tracer provider: OTLP/HTTP through a batching processor, configured by ``OTEL_*``. Not installed
    as the global provider (see the module docstring). ``shutdown()`` flushes what is queued."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from .. import __version__

    attributes = {"service.version": __version__}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = service_name
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider
