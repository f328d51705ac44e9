"""Private members of the MCP SDK (mcp 2.3), read or wrapped here and nowhere else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from mcp import ClientSession
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
    dispatcher: JSONRPCDispatcher[Any], request_id: Any, progress_token: Any
) -> tuple[_JSONRPCDispatchContext[Any], anyio.CancelScope]:
    """A request context of ``dispatcher`` for an inbound request it did not read (the raw tools/call path), and its
    cancel scope, registered as the dispatcher registers its own: a ``notifications/cancelled`` for ``request_id``
    sets ``cancel_requested`` and cancels the scope; progress, server→client requests and notifications ride the
    dispatcher, related to ``request_id``. ``close_request`` undoes it."""
    dctx = _JSONRPCDispatchContext(
        transport=TransportContext(kind="jsonrpc", can_send_request=True),
        _dispatcher=dispatcher,
        _request_id=request_id,
        _progress_token=progress_token,
    )
    scope = anyio.CancelScope()
    dispatcher._in_flight[coerce_request_id(request_id)] = _InFlight(scope=scope, dctx=dctx)
    return dctx, scope


def cancel_request(dispatcher: JSONRPCDispatcher[Any], request_id: Any) -> None:
    """What the dispatcher does for a ``notifications/cancelled`` of ``request_id``, done now (it may also do it when
    the notification reaches it: both steps are idempotent)."""
    entry = dispatcher._in_flight.get(coerce_request_id(request_id))
    if entry is not None:
        entry.dctx.cancel_requested.set()
        if dispatcher._peer_cancel_mode == "interrupt":
            entry.scope.cancel()


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
