"""One tools/call from a host, every way it arrives: through the compiled chain, answered as the host's version reads.

``run_tool_call`` is where every host tools/call lands (the SDK server's handler, its fast path
``ToolCallFastPath`` for a plain handshake-era call, the raw lanes of the stdio host, ``RawToolCalls`` below, and of
the streamable HTTP host, ``httpcall``): the host's request as a ``ToolCall`` (``_Host``: the chain's one channel to
the host), in flight on its upstream, through its tool's chain, the delivery hooks once it is answered;
``tool_call_answer`` puts the result through the SDK's per-version sieve. ``plain_tool_call`` is the predicate of a
call the raw lanes serve exactly as the SDK's path would.

The raw lane of the stdio host: a JSON-RPC line in, the compiled chain, a JSON-RPC line out. On the SDK's path every
request is validated into a ``JSONRPCRequest``, relayed through two memory streams and the SDK's era replay, handed
to a task by the dispatcher, wrapped in a request context and the server middleware, and its answer goes back
through another memory stream to the writer: per call that hopping, not the chain, was most of the proxy's own time
(benchmarks/README.md, "Where a call's time goes"). Here the stdio transport parses the line once, and a
``tools/call`` that ``accepts`` takes runs in a task of the transport's: ``tool_call_answer``, the answer written
as one line.

What stays the SDK's: everything that is not such a tools/call (the handshake, listings, notifications, responses to
the proxy's own requests), and the connection itself. The lane keeps its own table of calls in flight:
``notifications/cancelled`` of one of them cancels it before the next line is read, as the SDK's dispatcher does for
its own (a cancelled call is never answered). Its calls share one ``ServerSession`` over the connection's own
channel (``LaneOutbound``: on a pipe a message related to a request is written as any other), so an upstream's log
lines and roots requests during a call ride the dispatcher in the order they were written, and no SDK request
context is built per call.

``accepts`` is the explicit predicate. A call goes down the SDK's path instead, where a feature needs the SDK's
session or request machinery:

- before ``notifications/initialized`` (the lane learns the connection from it), and on a 2026-07-28 connection
  (input-required rounds, the ``io.modelcontextprotocol/*`` envelope, durable tasks);
- a host that declared ``elicitation`` or ``sampling`` (the proxy relays an upstream's requests for them to it);
- a request carrying a progress token (``_meta.progressToken``: progress notifications relayed to the host);
- a tool whose call may become a task (``tasks`` on and ``task.handoff_s`` below the tool's ``timeouts.total_s``);
- server middleware other than the SDK's OpenTelemetry one (non-recording while the proxy's tracing is off) and the
  fast path's, or the proxy's tracing on (the SDK's span and the W3C trace context of ``_meta`` are read there);
- an envelope that is not exactly ``jsonrpc``, ``id`` (a string or an integer), ``method``, ``params`` of at most
  ``name`` (a string), ``arguments`` (an object or null) and ``_meta`` (an object the SDK reads, no
  ``io.modelcontextprotocol/`` key, no ``traceparent``); a line of 1 MiB or more, not JSON, or with NaN/Infinity.

Each call the lane runs logs ``tool_call_raw`` at debug level. The environment variable
``RESILIENT_MCP_RAW_TOOL_CALLS=off`` turns the lane off (every request then takes the SDK's path); tests run both.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
import structlog
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params, handler_exception_to_error_data
from mcp_types import LOG_LEVEL_META_KEY, methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..adapters.sdk import host_connection, interrupts_on_cancel, loop_dispatcher, sdk_tracing_middleware
from ..call.chain import HostEnvelope, ToolCall
from ..diagnosis.providers import Answer
from ..proxy.proxy import MISSING_CAPABILITY, Ctx, Proxy, output_owner, session_key
from ..tasks.host import principal as task_principal
from ..upstream import host_capability_names

log = structlog.get_logger(__name__)

PROGRESS_TOKEN = "progressToken"
RESERVED_META_PREFIX = "io.modelcontextprotocol/"


class _Host:
    """``HostLink`` over the request context of one tools/call."""

    def __init__(self, ctx: Ctx, proxy: Proxy) -> None:
        self._ctx = ctx
        self._proxy = proxy
        self.envelope: HostEnvelope = host_envelope(ctx)
        """What the upstream side may know of this request: handed down the chain to the upstream call."""

    def refused_capabilities(self) -> set[str]:
        """Host capabilities an upstream asked for during this call and the proxy refused (the host lacks them)."""
        return self._proxy.refused_capabilities(self._ctx)

    @property
    def supports_elicitation(self) -> bool:
        caps = self._ctx.session.client_capabilities
        return caps is not None and caps.elicitation is not None and self._ctx.session.can_send_request

    async def report_progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self._ctx.session.report_progress(progress, total, message)

    async def elicit(self, message: str, requested_schema: dict[str, Any]) -> types.ElicitResult:
        return await self._ctx.session.elicit(message, requested_schema, related_request_id=self._ctx.request_id)

    @property
    def supports_sampling(self) -> bool:
        caps = self._ctx.session.client_capabilities
        return caps is not None and caps.sampling is not None and self._ctx.session.can_send_request

    async def create_message(self, system: str, user: str, *, max_tokens: int, model: str | None) -> Answer:
        """Ask the host's own model (MCP sampling), for the diagnose step."""
        prefs = types.ModelPreferences(hints=[types.ModelHint(name=model)]) if model else None
        result = await self._ctx.session.create_message(
            [types.SamplingMessage(role="user", content=types.TextContent(text=user))],
            max_tokens=max_tokens,
            system_prompt=system,
            temperature=0,
            model_preferences=prefs,
            related_request_id=self._ctx.request_id,
        )
        content = result.content
        return Answer(content.text if isinstance(content, types.TextContent) else "")


def hop_meta(meta: types.RequestParamsMeta | None) -> dict[str, Any] | None:
    if meta is None:
        return None
    # The progress token and the protocol's own envelope (2026-07-28: protocol version, client capabilities, log
    # level, ...) belong to this hop: the proxy speaks for itself toward the upstream.
    data = {k: v for k, v in meta.items() if k != PROGRESS_TOKEN and not k.startswith(RESERVED_META_PREFIX)}
    return data or None


def host_envelope(ctx: Ctx) -> HostEnvelope:
    """What the upstream side may know of the host of request ``ctx`` (see ``HostEnvelope``)."""
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    level = ctx.meta.get(LOG_LEVEL_META_KEY) if modern and ctx.meta is not None else None
    return HostEnvelope(
        ctx=ctx,
        capabilities=host_capability_names(ctx.session.client_capabilities),
        log_level=level if isinstance(level, str) else None,
        modern=modern,
    )


async def run_tool_call(
    proxy: Proxy, ctx: Ctx, name: str, arguments: dict[str, Any] | None, meta: types.RequestParamsMeta | None
) -> types.CallToolResult:
    """One downstream tools/call through its compiled chain: the SDK handler and the fast path both land here."""
    proxy.seen(ctx)
    await proxy.follow_host(ctx)
    handoff_s = legacy_handoff(proxy, ctx, name)
    if handoff_s is None:
        result = await _run_tool_call(proxy, ctx, name, arguments, meta)
    else:  # a host that cannot poll: a handle once it has waited long enough (``tasks``)
        result = await proxy.tasks.handoff(
            task_principal(ctx),
            name,
            arguments,
            handoff_s,
            lambda: _run_tool_call(proxy, ctx, name, arguments, meta),
            proxy.router.tools_changed,
        )
    missing = _missing_host_capability(result) if result.is_error else None
    if missing is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # 2026-07-28 (SEP-2575): a request the host cannot serve is the JSON-RPC error -32021, the observation in data.
        raise MCPError(
            MISSING_CAPABILITY,
            f"Missing required client capability: {', '.join(missing)}",
            {"requiredCapabilities": missing, "observation": result.structured_content},
        )
    return result


def _missing_host_capability(result: types.CallToolResult) -> dict[str, Any] | None:
    obs = result.structured_content
    if not isinstance(obs, dict) or obs.get("code") != "PROTOCOL_MISMATCH":
        return None
    details = obs.get("details")
    missing = details.get("missing_capability") if isinstance(details, dict) else None
    if isinstance(missing, dict) and missing:
        return missing
    if isinstance(missing, str):
        return {missing: {}}
    return None


async def _run_tool_call(
    proxy: Proxy, ctx: Ctx, name: str, arguments: dict[str, Any] | None, meta: types.RequestParamsMeta | None
) -> types.CallToolResult:
    routing = proxy.routing
    compiled = routing.chains.get(name)
    call_id = str(ctx.request_id) if ctx.request_id is not None else uuid.uuid4().hex[:12]
    session = session_key(ctx)
    owner = output_owner(ctx.request, session)
    if compiled is None:
        return await proxy.pipeline.call_unlisted(
            name, arguments, routing, session=session, owner=owner, call_id=call_id, host=_Host(ctx, proxy)
        )
    entry = compiled.entry
    call = ToolCall(
        name=name,
        arguments=arguments,
        upstream=entry.upstream,
        upstream_tool=entry.name,
        rule=compiled.rule,
        tool=entry.tool,
        meta=hop_meta(meta),
        session_id=session,
        owner=owner,
        call_id=call_id,
        host=_Host(ctx, proxy),
    )
    async with proxy.in_flight(entry.upstream, ctx, call.envelope):
        result = await compiled.chain(call)
    if call.record.on_delivered:
        await delivered(call)
    return result


async def delivered(call: ToolCall) -> None:
    """The chain's result goes to the host now: run what waited for that (shielded, errors logged)."""
    with anyio.CancelScope(shield=True):
        for hook in call.record.on_delivered:
            try:
                await hook()
            except Exception:
                log.exception("delivery_hook_failed", tool=call.name)


async def tool_call_answer(proxy: Proxy, ctx: Ctx, name: str, arguments: Any) -> dict[str, Any]:
    """One tools/call through the proxy, as the JSON the host's protocol version reads (the fast path and the raw
    lane both answer with it)."""
    result = await run_tool_call(proxy, ctx, name, arguments, ctx.meta)
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    try:
        return methods.serialize_server_result("tools/call", ctx.protocol_version, dumped)
    except ValidationError:  # as the SDK's runner does: the detail echoes the result, so it stays in the log
        log.exception("tool_call_invalid_result", tool=name)
        raise MCPError(types.INTERNAL_ERROR, "Handler returned an invalid result") from None


class ToolCallFastPath:
    """``Server.middleware``: a well-formed handshake-era tools/call runs without the SDK's request models.

    The SDK would validate the raw params twice (surface, then ``CallToolRequestParams``) before the handler.
    Here a plain ``{name, arguments?, _meta?}`` goes straight to ``run_tool_call``; the result is still put through
    the SDK's per-version sieve (a short-circuiting middleware is only dumped), so the wire is what the handler path
    sends. Anything else (2026-era, before initialize, extra keys such as ``task``, malformed shapes) goes to
    ``call_next``, so the SDK rejects it exactly as before.
    """

    def __init__(self, proxy: Proxy) -> None:
        self._proxy = proxy

    async def __call__(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        name = _plain_call_name(ctx) if ctx.method == "tools/call" else None
        if name is None or ctx.params is None:
            return await call_next(ctx)
        return await tool_call_answer(self._proxy, ctx, name, ctx.params.get("arguments"))


_PLAIN_KEYS = frozenset({"name", "arguments", "_meta"})


def _plain_call_name(ctx: Ctx) -> str | None:
    """The tool name of a tools/call the SDK would accept unchanged and hand to its handler, else ``None``.

    Only an initialized handshake-era connection, params of at most ``name`` (a string), ``arguments`` (an object
    or null) and ``_meta`` (an object the SDK parsed into ``ctx.meta``)."""
    params = ctx.params
    if (
        ctx.request_id is None
        or params is None
        or ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS
        or ctx.session.client_params is None
        or not _PLAIN_KEYS.issuperset(params)
    ):
        return None
    name, args, raw_meta = params.get("name"), params.get("arguments"), params.get("_meta")
    if not isinstance(name, str) or not (args is None or type(args) is dict):
        return None
    return name if raw_meta is None or (type(raw_meta) is dict and ctx.meta is not None) else None


def legacy_handoff(proxy: Proxy, ctx: Ctx, name: str) -> float | None:
    """For a handshake-era host (it cannot poll): how long it waits before it gets a handle instead of the result,
    for a tool allowed to run longer than that (``task.handoff_s`` below ``timeouts.total_s``); else ``None``."""
    return None if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else handoff_after(proxy, name)


def handoff_after(proxy: Proxy, name: str) -> float | None:
    """How long a handshake-era host waits for a call of ``name`` before it gets a task handle instead (``None``: it
    gets the result, however long the call takes)."""
    compiled = proxy.routing.chains.get(name) if proxy.policy.tasks.enabled else None
    if compiled is None:
        return None
    rule = compiled.rule
    if rule.task.mode == "never" or rule.timeouts.total_s <= rule.task.handoff_s:
        return None
    return rule.task.handoff_s


SendLine = Callable[[bytes], Awaitable[None]]
"""Writes one whole line to the host (the transport's writer, shared with the SDK's messages)."""

RAW_SWITCH = "RESILIENT_MCP_RAW_TOOL_CALLS"
"""``off`` turns the lane off (and the HTTP one, ``httpcall``)."""


def raw_lanes_on() -> bool:
    """Whether the raw tools/call lanes serve (``RESILIENT_MCP_RAW_TOOL_CALLS`` is not ``off``)."""
    return os.environ.get(RAW_SWITCH, "").lower() != "off"


_ENVELOPE = frozenset({"jsonrpc", "id", "method", "params"})
_PARAMS = frozenset({"name", "arguments", "_meta"})
_SDK_META = frozenset({PROGRESS_TOKEN, "traceparent", "tracestate"})
"""``_meta`` keys the SDK's path serves (progress relayed to the host; the W3C trace context its span reads)."""
_CLOSED_WRITE_S = 1.0
"""How long the answer to a call cut short by the connection's end may take to write (as the SDK's dispatcher)."""


class _Flight:
    """One of the lane's calls in flight: its cancel scope, and whether the host cancelled it."""

    __slots__ = ("cancelled", "scope")

    def __init__(self, scope: anyio.CancelScope | None) -> None:
        self.scope = scope if scope is not None else anyio.CancelScope()
        self.cancelled = False


class LaneOutbound:
    """The request-scoped channel of the lane's calls: the connection's own (``connection.outbound``, the SDK's
    dispatcher). On a stdio connection a message related to a request is written as any other, so one channel, and
    one ``ServerSession`` over it, serve every call of the lane (the SDK builds a dispatch context and a session per
    request). No call of the lane carries a progress token (``accepts``): progress goes nowhere, as the SDK's does
    without one."""

    can_send_request = True
    """A stdio pipe carries the server's requests (roots relayed to the host) at any time."""

    def __init__(self, outbound: Any) -> None:
        self._outbound = outbound

    async def notify(self, method: str, params: Any, opts: Any = None) -> None:
        await self._outbound.notify(method, params, opts)

    async def send_raw_request(self, method: str, params: Any, opts: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = await self._outbound.send_raw_request(method, params, opts)
        return result

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


class RawToolCalls:
    """The raw tools/call lane of one stdio host connection (see the module's docstring)."""

    def __init__(self) -> None:
        self._proxy: Proxy | None = None
        self._session: ServerSession | None = None
        """The lane's session over the connection (``LaneOutbound``), built once it is known."""
        self._interrupt = True
        """``notifications/cancelled`` cancels the call (the SDK's ``interrupt`` mode), not only flags it."""
        self._running: dict[Any, _Flight] = {}
        """The lane's calls in flight, by id as the SDK correlates them."""

    def attach(self, proxy: Proxy, server: Server[Any], *, tracing: bool) -> None:
        """Serve ``proxy``'s calls once the connection is known, unless the server has middleware the lane would
        skip (anything but the SDK's OpenTelemetry middleware and the fast path) or tracing is on."""
        known = all(isinstance(m, ToolCallFastPath) or sdk_tracing_middleware(m) for m in server.middleware)
        self._proxy = proxy if known and not tracing else None

    def adopt(self, ctx: Ctx) -> None:
        """``notifications/initialized`` came on ``ctx``'s connection: a handshake-era loop connection is served."""
        dispatcher = loop_dispatcher(ctx.session)
        caps = ctx.session.client_capabilities
        relays = caps is not None and (caps.elicitation is not None or caps.sampling is not None)
        if dispatcher is not None and ctx.session.client_params is not None and not relays:
            connection: Any = host_connection(ctx.session)
            outbound: Any = LaneOutbound(dispatcher)  # all of a dispatch context that ServerSession reads
            self._session = ServerSession(outbound, connection)
            self._interrupt = interrupts_on_cancel(dispatcher)

    def accepts(self, message: Any) -> bool:
        """Whether ``message`` (a parsed line) is a tools/call this lane runs exactly as the SDK's path would."""
        session = self._session
        if self._proxy is None or session is None or session.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return False
        return plain_tool_call(self._proxy, message)

    def cancelled(self, message: Any) -> None:
        """A ``notifications/cancelled`` of one of the lane's calls takes effect before the transport reads the next
        line, as the SDK's dispatcher loop applies it to its own requests before it dispatches the next message (an
        identical call sent right after the cancel must find the first one cancelled, not still running). It still
        goes on to the SDK (which knows nothing of the lane's calls)."""
        params = message.get("params") if type(message) is dict else None
        rid = cancelled_request_id_from_params(params) if type(params) is dict else None
        flight = self._running.get(coerce_request_id(rid)) if rid is not None else None
        if flight is not None:
            flight.cancelled = True
            if self._interrupt:
                flight.scope.cancel()

    async def run(self, message: dict[str, Any], send: SendLine, scope: anyio.CancelScope | None = None) -> None:
        """Answer ``message`` (``accepts`` said yes) as the SDK's dispatcher answers a request: the result, or the
        error its handler raised, never an answer once the host cancelled it, "Connection closed" when the proxy
        stops first: ``scope`` (the transport's, cancelled when the host's input ends; the call's own cancel scope
        as well, so a call enters one scope here, not two) or a scope around the task."""
        assert self._proxy is not None and self._session is not None
        rid, params = message["id"], message["params"]
        log.debug("tool_call_raw", request_id=rid)
        key = coerce_request_id(rid)
        flight = self._running[key] = _Flight(scope)
        session = self._session
        ctx: Ctx = ServerRequestContext(
            session=session,
            lifespan_context={},
            method="tools/call",
            params=params,
            request_id=rid,
            meta=request_meta(params),  # readable: ``accepts`` checked
            protocol_version=session.protocol_version,
        )
        answered = False
        try:
            with flight.scope:
                try:
                    result = await tool_call_answer(self._proxy, ctx, params["name"], params.get("arguments"))
                finally:
                    if self._running.get(key) is flight:
                        del self._running[key]
                if not flight.cancelled:
                    answered = True
                    await _deliver(send, {"jsonrpc": "2.0", "id": rid, "result": result})
        except anyio.get_cancelled_exc_class():
            if not answered and not flight.cancelled:
                await _closed(send, rid)
            raise
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:  # as the SDK's loop dispatcher answers (code 0, the message)
                log.exception("tool_call_raised", tool=params.get("name"))
                error = types.ErrorData(code=0, message=str(exc))
            if not flight.cancelled:
                data = error.model_dump(by_alias=True, mode="json", exclude_none=True)
                await _deliver(send, {"jsonrpc": "2.0", "id": rid, "error": data})
        else:
            if flight.scope.cancelled_caught and not answered and not flight.cancelled:  # the transport's scope
                await _closed(send, rid)


def plain_tool_call(proxy: Proxy, message: Any) -> bool:
    """Whether ``message`` (parsed JSON) is a tools/call whose envelope a raw lane serves as the SDK's path would
    (the envelope rules of the module's docstring; the HTTP lane, ``httpcall``, asks the same)."""
    if type(message) is not dict or message.keys() != _ENVELOPE or message.get("jsonrpc") != "2.0":
        return False
    rid, params = message["id"], message["params"]
    if message["method"] != "tools/call" or type(rid) not in (int, str) or type(params) is not dict:
        return False
    name = params.get("name")
    if not _PARAMS.issuperset(params) or type(name) is not str or handoff_after(proxy, name) is not None:
        return False
    args, meta = params.get("arguments"), params.get("_meta", {})
    if args is not None and type(args) is not dict:
        return False
    if type(meta) is not dict or not _SDK_META.isdisjoint(meta):
        return False
    if any(k.startswith(RESERVED_META_PREFIX) for k in meta):
        return False
    return not meta or request_meta(params) is not _INVALID


_INVALID: Any = object()


def request_meta(params: dict[str, Any]) -> Any:
    """The request's ``_meta`` as the SDK reads it (``None`` when absent, ``_INVALID`` when it cannot)."""
    if "_meta" not in params:
        return None
    try:
        return types.RequestParams.model_validate(params, by_name=False).meta
    except ValidationError:
        return _INVALID


async def _closed(send: SendLine, rid: Any) -> None:
    """The SDK's answer to a request still running when the connection ends (bounded, shielded)."""
    closed = {"code": types.CONNECTION_CLOSED, "message": "Connection closed"}
    with anyio.move_on_after(_CLOSED_WRITE_S, shield=True):
        await _deliver(send, {"jsonrpc": "2.0", "id": rid, "error": closed})


async def _deliver(send: SendLine, message: dict[str, Any]) -> None:
    """Write ``message`` as one line; a host that is gone is not an error (the SDK drops such answers too)."""
    try:
        await send(pydantic_core.to_json(message) + b"\n")
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        log.debug("answer_dropped", request_id=message["id"])
