"""Private members of the MCP SDK (mcp 2.3), read or wrapped here and nowhere else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client._probe import negotiate_auto as _negotiate_auto
from mcp.client.session import _later_revision_fields
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import _ABANDON_WRITE_TIMEOUT, JSONRPCDispatcher, _InFlight, _JSONRPCDispatchContext
from mcp.shared.transport_context import TransportContext

SDK_SERIES = "2.3."
"""The mcp releases these adapters were written against (``tests/adapters/test_adapters.py`` checks it)."""

ABANDON_WRITE_TIMEOUT_S: float = _ABANDON_WRITE_TIMEOUT
"""How long the SDK's dispatcher gives the courtesy ``notifications/cancelled`` of an abandoned request."""


def later_revision_fields(method: str, version: str) -> frozenset[str]:
    """Result keys of ``method`` that a revision later than ``version`` declares and ``version`` does not: what the
    SDK's ``ClientSession.send_request`` drops from a result before validating it (cached there)."""
    return _later_revision_fields(method, version)


async def negotiate_auto(session: ClientSession) -> None:
    """Open ``session`` as ``mcp.Client(mode="auto")`` does: ``server/discover`` first, ``initialize`` when the server
    does not answer it (the SDK's ``mcp.client._probe``, which ``mcp.client.client`` runs and exports nothing of)."""
    await _negotiate_auto(session)


def after_envelope_stamp(
    session: ClientSession, after: Callable[[dict[str, Any], Any], None], private_key: str
) -> None:
    """Call ``after(data, private)`` on every outgoing request once the SDK has stamped its envelope on it (``_meta``
    with the session's capabilities and log level). ``private``: the value the caller put under ``private_key`` in
    the request's ``_meta`` (``None`` when absent), removed here so it is never sent. The SDK replaces its stamp when
    the session connects: call this after ``initialize``/``discover``."""
    inner = session._stamp

    def stamp(data: dict[str, Any], opts: Any) -> None:
        params = data.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        private = meta.pop(private_key, None) if isinstance(meta, dict) else None
        inner(data, opts)
        after(data, private)

    session._stamp = stamp


def host_connection(session: object) -> object:
    """The SDK's ``Connection`` a server-side request came on (one per host connection), else ``session`` itself."""
    connection: object = getattr(session, "_connection", None) or session
    return connection


def loop_dispatcher(session: object) -> JSONRPCDispatcher[Any] | None:
    """The SDK's JSON-RPC dispatcher of the handshake-era loop connection ``session`` (a ``ServerSession``) came on,
    else ``None`` (HTTP, 2026-07-28, in-memory ``Client``): on a loop connection it is the connection's outbound."""
    outbound = getattr(host_connection(session), "outbound", None)
    return outbound if isinstance(outbound, JSONRPCDispatcher) else None


def open_request(
    dispatcher: JSONRPCDispatcher[Any], request_id: Any, progress_token: Any, message_metadata: Any = None
) -> tuple[_JSONRPCDispatchContext[Any], anyio.CancelScope]:
    """A request context of ``dispatcher`` for an inbound request it did not read (the HTTP raw lane), and its
    cancel scope, registered as the dispatcher registers its own: a ``notifications/cancelled`` for ``request_id``
    sets ``cancel_requested`` and cancels the scope; progress, server→client requests and notifications ride the
    dispatcher, related to ``request_id``. ``message_metadata``: what the transport would have framed the request
    with (over HTTP: the request, and whether its response can carry the server's requests). ``close_request``
    undoes it."""
    can_send = getattr(message_metadata, "can_send_request", True)
    dctx = _JSONRPCDispatchContext(
        transport=TransportContext(kind="jsonrpc", can_send_request=can_send),
        _dispatcher=dispatcher,
        _request_id=request_id,
        message_metadata=message_metadata,
        _progress_token=progress_token,
    )
    scope = anyio.CancelScope()
    dispatcher._in_flight[coerce_request_id(request_id)] = _InFlight(scope=scope, dctx=dctx)
    return dctx, scope


def interrupts_on_cancel(dispatcher: JSONRPCDispatcher[Any]) -> bool:
    """Whether ``dispatcher`` cancels a request's handler on ``notifications/cancelled`` (``interrupt``, the SDK's
    default), rather than only flagging it (``signal``)."""
    return dispatcher._peer_cancel_mode == "interrupt"


def close_request(dispatcher: JSONRPCDispatcher[Any], dctx: _JSONRPCDispatchContext[Any]) -> None:
    """``dctx`` is done: its back-channel closes and a later cancel for its id finds nothing (a newer request that
    reused the id keeps its entry)."""
    dctx.close()
    if dctx.request_id is None:
        return
    key = coerce_request_id(dctx.request_id)
    entry = dispatcher._in_flight.get(key)
    if entry is not None and entry.dctx is dctx:
        del dispatcher._in_flight[key]


def sdk_tracing_middleware(middleware: object) -> bool:
    """Whether ``middleware`` is the SDK's own OpenTelemetry server middleware (on every ``Server`` by default)."""
    return isinstance(middleware, OpenTelemetryMiddleware)


# --- streamable HTTP (the raw tools/call lane of ``host/httpcall.py``) ------------------------------------------------


def http_request_metadata(request: Any, *, can_send_request: bool) -> Any:
    """The metadata the SDK's streamable HTTP transport frames an inbound request with (``request_context`` is what
    a handler reads as ``ctx.request``)."""
    from mcp.shared.message import ServerMessageMetadata

    return ServerMessageMetadata(request_context=request, can_send_request=can_send_request)


def http_session_transport(manager: Any, session_id: str, requestor: Any) -> Any:
    """The live transport of stateful session ``session_id`` of a ``StreamableHTTPSessionManager`` when the SDK would
    serve ``requestor`` (an ``AuthorizationContext`` or ``None``) on it, else ``None`` (unknown, ended, another
    principal's, or idle-expired: the SDK's own path answers those)."""
    transport = manager._server_instances.get(session_id)
    if transport is None or transport.is_terminated or requestor != manager._session_owners.get(session_id):
        return None
    idle = transport.idle_scope
    if idle is not None and idle.cancel_called:
        return None
    return transport


def http_session_ids(manager: Any) -> Any:
    """The ids of the stateful sessions a ``StreamableHTTPSessionManager`` serves now (a live view)."""
    return manager._server_instances.keys()


def http_json_response(manager: Any) -> bool:
    """Whether the session manager answers requests with a JSON body (else with an SSE stream)."""
    return bool(manager.json_response)


async def http_security_refusal(transport: Any, request: Any) -> Any:
    """What the transport's DNS-rebinding and Content-Type check answers a POST (``None``: it passes). It never
    suspends (no await inside), so a caller's view of the session registry stays current across it."""
    return await transport._security.validate_request(request, is_post=True)


class HttpRequestHold:
    """A request in flight on ``transport`` as its own ``handle_request`` counts one: the session's idle countdown
    is suspended while it runs and restarts when the last request ends."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def __enter__(self) -> None:
        t = self._transport
        if t.idle_scope is not None and t._idle_timeout is not None:
            t._requests_in_flight += 1
            t.idle_scope.deadline = float("inf")

    def __exit__(self, *exc: object) -> None:
        t = self._transport
        if t.idle_scope is not None and t._idle_timeout is not None:
            t._requests_in_flight -= 1
            if not t._requests_in_flight:
                t.idle_scope.deadline = anyio.current_time() + t._idle_timeout


def dispatcher_live(dispatcher: JSONRPCDispatcher[Any]) -> bool:
    """Whether ``dispatcher``'s receive loop still runs (its task group takes new handlers)."""
    return dispatcher._running and dispatcher._tg is not None


def spawn_handler(dispatcher: JSONRPCDispatcher[Any], fn: Callable[[], Any]) -> None:
    """Run ``fn()`` in ``dispatcher``'s task group, where the SDK runs its own request handlers (cancelled, as they
    are, when the connection ends), in the caller's context (contextvars), as the dispatcher spawns a handler in
    the context of the task that wrote its request. ``dispatcher_live`` must hold."""
    import contextvars

    assert dispatcher._tg is not None
    contextvars.copy_context().run(dispatcher._tg.start_soon, fn)


class _Related:
    """Both ends of a request stream the transport's message router writes to (``send``) and its clean-up closes:
    the messages are only kept, for the answer (a list, not a memory stream: nobody reads them before it)."""

    def __init__(self) -> None:
        self.held: list[Any] = []
        self.closed = False

    async def send(self, event: Any) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        self.held.append(event.message)

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


def http_related_messages(transport: Any, request_id: str) -> Any:
    """Register a request stream for ``request_id`` on ``transport`` as its POST handler does, so messages the proxy
    sends related to the request (an upstream's log lines) are kept for the answer's SSE stream instead of dropped;
    ``None`` when the id is in use (the SDK's path serves it)."""
    if request_id in transport._request_streams:
        return None
    related = _Related()
    transport._request_streams[request_id] = (related, related)
    return related


def http_forget_related(transport: Any, request_id: str, related: Any) -> list[Any]:
    """Unregister ``request_id``'s stream (if it is still ``related``) and return the messages it holds."""
    streams = transport._request_streams.get(request_id)
    if streams is not None and streams[1] is related:
        del transport._request_streams[request_id]
    related.close()
    return list(related.held)
