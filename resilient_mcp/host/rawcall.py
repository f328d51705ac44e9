"""The raw tools/call path of the stdio host: a JSON-RPC line in, the compiled chain, a JSON-RPC line out.

On the SDK's path every request is validated into a ``JSONRPCRequest``, relayed through two memory streams and the
SDK's era replay, handed to a task by the dispatcher, wrapped in a request context and the server middleware, and its
answer goes back through another memory stream to the writer: per call that hopping, not the chain, was most of the
proxy's own time (benchmarks/README.md, "Where a call's time goes"). Here the stdio transport parses the line once,
and a ``tools/call`` that ``accepts`` takes runs in the transport's own task: ``run_tool_call`` (the same function the
SDK handler and the fast path call, so every stage, the delivery hooks and the legacy task handoff are the same), the
result through the SDK's per-version sieve, the answer written as one line.

What stays the SDK's: everything that is not such a tools/call (the handshake, listings, notifications, responses to
the proxy's own requests), and the connection itself. The request is registered in the SDK dispatcher's table of
in-flight requests (``adapters.sdk.open_request``), so ``notifications/cancelled`` cancels it as it cancels the SDK's
own (a cancelled call is never answered), and progress, elicitation and sampling of the call ride the dispatcher,
related to its id, in the order they were written.

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
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
import structlog
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import (
    cancelled_request_id_from_params,
    handler_exception_to_error_data,
    progress_token_from_params,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..adapters.sdk import (
    cancel_request,
    close_request,
    host_connection,
    loop_dispatcher,
    open_request,
    sdk_tracing_middleware,
)
from ..proxy.proxy import Ctx, Proxy
from .server import PROGRESS_TOKEN, RESERVED_META_PREFIX, ToolCallFastPath, handoff_after, tool_call_answer

log = structlog.get_logger(__name__)

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


class RawToolCalls:
    """The raw tools/call lane of one stdio host connection (see the module's docstring)."""

    def __init__(self) -> None:
        self._proxy: Proxy | None = None
        self._session: ServerSession | None = None
        self._dispatcher: Any = None
        self._running: set[Any] = set()
        """Ids (as the SDK correlates them) of the lane's calls in flight."""

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
            self._session, self._dispatcher = ctx.session, dispatcher

    def accepts(self, message: Any) -> bool:
        """Whether ``message`` (a parsed line) is a tools/call this lane runs exactly as the SDK's path would."""
        session = self._session
        if self._proxy is None or session is None or session.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return False
        return plain_tool_call(self._proxy, message)

    def cancelled(self, message: Any) -> None:
        """A ``notifications/cancelled`` of one of the lane's calls takes effect before the transport reads the next
        line, as the SDK's dispatcher loop applies it before it dispatches the next message (an identical call sent
        right after the cancel must find the first one cancelled, not still running). It still goes on to the SDK."""
        params = message.get("params") if type(message) is dict else None
        rid = cancelled_request_id_from_params(params) if type(params) is dict else None
        if rid is not None and coerce_request_id(rid) in self._running:
            cancel_request(self._dispatcher, rid)

    async def run(self, message: dict[str, Any], send: SendLine) -> None:
        """Answer ``message`` (``accepts`` said yes) as the SDK's dispatcher answers a request: the result, or the
        error its handler raised, never an answer once the host cancelled it, "Connection closed" when the proxy
        stops first."""
        assert self._proxy is not None and self._session is not None
        rid, params = message["id"], message["params"]
        log.debug("tool_call_raw", request_id=rid)
        meta = request_meta(params)  # readable: ``accepts`` checked
        dctx, scope = open_request(self._dispatcher, rid, progress_token_from_params(params))
        key = coerce_request_id(rid)
        self._running.add(key)
        ctx = lane_context(self._session, dctx, rid, params, meta)
        answered = False
        try:
            with scope:
                try:
                    result = await self._call(ctx, params)
                finally:
                    close_request(self._dispatcher, dctx)
                    self._running.discard(key)
                if not dctx.cancel_requested.is_set():
                    answered = True
                    await _deliver(send, {"jsonrpc": "2.0", "id": rid, "result": result})
        except anyio.get_cancelled_exc_class():
            if not answered and not dctx.cancel_requested.is_set():
                closed = {"code": types.CONNECTION_CLOSED, "message": "Connection closed"}
                with anyio.move_on_after(_CLOSED_WRITE_S, shield=True):
                    await _deliver(send, {"jsonrpc": "2.0", "id": rid, "error": closed})
            raise
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:  # as the SDK's loop dispatcher answers (code 0, the message)
                log.exception("tool_call_raised", tool=params.get("name"))
                error = types.ErrorData(code=0, message=str(exc))
            if not dctx.cancel_requested.is_set():
                data = error.model_dump(by_alias=True, mode="json", exclude_none=True)
                await _deliver(send, {"jsonrpc": "2.0", "id": rid, "error": data})

    async def _call(self, ctx: Ctx, params: dict[str, Any]) -> dict[str, Any]:
        assert self._proxy is not None
        return await tool_call_answer(self._proxy, ctx, params["name"], params.get("arguments"))


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


def lane_context(
    session: ServerSession, dctx: Any, rid: Any, params: dict[str, Any], meta: Any, request: Any = None
) -> Ctx:
    """The request context a lane's ``tools/call`` runs with: the SDK's, as its server runner builds it for the host
    ``session`` (stdio's lane and streamable HTTP's, which also passes the HTTP ``request``)."""
    connection: Any = host_connection(session)
    return ServerRequestContext(
        session=ServerSession(dctx, connection, request_meta=meta),
        lifespan_context={},
        method="tools/call",
        params=params,
        request_id=rid,
        meta=meta,
        protocol_version=connection.protocol_version,
        request=request,
    )


def request_meta(params: dict[str, Any]) -> Any:
    """The request's ``_meta`` as the SDK reads it (``None`` when absent, ``_INVALID`` when it cannot)."""
    if "_meta" not in params:
        return None
    try:
        return types.RequestParams.model_validate(params, by_name=False).meta
    except ValidationError:
        return _INVALID


async def _deliver(send: SendLine, message: dict[str, Any]) -> None:
    """Write ``message`` as one line; a host that is gone is not an error (the SDK drops such answers too)."""
    try:
        await send(pydantic_core.to_json(message) + b"\n")
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        log.debug("answer_dropped", request_id=message["id"])
