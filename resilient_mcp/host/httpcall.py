"""The raw tools/call lane of the streamable HTTP host: one POST in, the compiled chain, one answer out.

On the SDK's path a POST on an established session is validated into a ``JSONRPCRequest``, sent through the
transport's read stream to the session's dispatcher, run in the server runner and its middleware, and its answer
goes back through the write stream, the transport's message router, a per-request stream and the SSE writer into an
``EventSourceResponse`` (with its own task group, ping and disconnect tasks): per call that machinery, not the chain,
was most of what the proxy added over a direct SDK server (benchmarks/README.md, "HTTP load"). Here a POST whose body
is a tools/call the lane ``accepts`` is parsed once and run by ``tool_call_answer`` (the function the SDK handler,
the fast path and the stdio lane call: every stage, the delivery hooks, the per-version sieve are the same), in the
session dispatcher's task group (where the SDK runs its handlers: cancelled with them when the session ends), with a
request context built as the SDK builds it (``ctx.request`` the HTTP request, the session's connection, principal
and guards). The answer is the response the SDK would send: one SSE event (``event: message``, the same headers),
or a JSON body when the session manager answers in JSON.

What stays the SDK's: every request that is not such a tools/call, and every error path: no or unknown session id,
a session ended, idle-expired or opened with another bearer token (404), a ``Mcp-Protocol-Version`` header outside
the handshake era (the 2026-07-28 entry), a wrong Accept or Content-Type, a Host or Origin the DNS-rebinding check
refuses, a body not JSON or with NaN/Infinity, batches (``JsonBodyGuard`` refuses them first), GET streams, DELETE.
The session is looked up, checked and handed its call with no await in between that could yield to the event loop,
so a session that ends is either seen ended (the SDK's path answers) or ends with the call in its task group
(cancelled with its other handlers).

``accepts`` is the stdio lane's predicate (``toolcall.plain_tool_call``: no progress token, no trace context, no
``io.modelcontextprotocol/*`` key, no extra keys, no task hand-off, tracing off, no middleware but the SDK's
OpenTelemetry one and the fast path), on a session whose host has sent ``notifications/initialized`` and declared
none of ``elicitation``, ``sampling``, ``roots`` (a request the proxy relays to the host rides the call's SSE stream,
which this lane writes only once, at the end). Messages the proxy sends related to the call meanwhile (an upstream's
log lines) are kept and written as events before the answer, as the SDK would write them, but at the answer's time.

A client that disconnects does not cancel its call (as on the SDK's path: the call completes, its outcome is
recorded and replayable, the answer is dropped); ``notifications/cancelled`` for it (a POST of its own, on the SDK's
path) cancels it, and it is answered ``-32800 Request cancelled`` as the SDK's 2025-era transport answers. A
session that ends while the call runs cancels it; the answer is then an SSE stream without events (JSON: 500), as
the SDK's. ``RESILIENT_MCP_RAW_TOOL_CALLS=off`` turns this lane off with the stdio one.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pydantic_core
import structlog
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.session import ServerSession
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data, progress_token_from_params
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..adapters.sdk import (
    HttpRequestHold,
    close_request,
    dispatcher_live,
    host_connection,
    http_forget_related,
    http_json_response,
    http_related_messages,
    http_request_metadata,
    http_security_refusal,
    http_session_ids,
    http_session_transport,
    loop_dispatcher,
    open_request,
    sdk_tracing_middleware,
    spawn_handler,
)
from ..proxy.proxy import Ctx, Proxy
from .toolcall import ToolCallFastPath, plain_tool_call, request_meta, tool_call_answer

log = structlog.get_logger(__name__)

REQUEST_CANCELLED = -32800
"""What the SDK's 2025-era streamable HTTP transport answers a request the client cancelled."""
_TOOLS_CALL = b'"tools/call"'
_SSE_HEADERS = [
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"content-type", b"text/event-stream"),
]
"""As the SDK's POST handler sends them (``EventSourceResponse`` adds ``x-accel-buffering`` after the session id)."""
_SESSIONS_SLACK = 64
"""Ended sessions the lane may still remember beyond twice the live ones before it forgets them."""


class HttpToolCalls:
    """The raw tools/call lane of one streamable HTTP listener (see the module's docstring)."""

    def __init__(self) -> None:
        self._proxy: Proxy | None = None
        self._sessions: dict[str, tuple[ServerSession, Any]] = {}
        """Initialized sessions the lane serves: MCP session id -> (the server session, its dispatcher)."""
        self._manager: Any = None

    def attach(self, proxy: Proxy, server: Server[Any], *, tracing: bool) -> None:
        """Serve ``proxy``'s calls, unless the server has middleware the lane would skip or tracing is on."""
        known = all(isinstance(m, ToolCallFastPath) or sdk_tracing_middleware(m) for m in server.middleware)
        self._proxy = proxy if known and not tracing else None

    def adopt(self, ctx: Ctx) -> None:
        """``notifications/initialized`` came on ``ctx``'s session: a handshake-era session of a host that declared
        no capability the proxy relays requests to is served."""
        connection = host_connection(ctx.session)
        session_id = getattr(connection, "session_id", None)
        dispatcher = loop_dispatcher(ctx.session)
        caps = ctx.session.client_capabilities
        relays = caps is not None and (
            caps.elicitation is not None or caps.sampling is not None or caps.roots is not None
        )
        if not session_id or dispatcher is None or ctx.session.client_params is None or relays:
            return
        live = http_session_ids(self._manager) if self._manager is not None else None
        if live is not None and len(self._sessions) > 2 * len(live) + _SESSIONS_SLACK:  # forget the ended ones
            self._sessions = {sid: entry for sid, entry in self._sessions.items() if sid in live}
        self._sessions[session_id] = (ctx.session, dispatcher)

    def wrap(self, app: ASGIApp, manager: Any) -> ASGIApp:
        """``app`` (the SDK's streamable HTTP endpoint of ``manager``) with this lane in front of it."""
        self._manager = manager

        async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            await self._serve(app, scope, receive, send)

        return endpoint

    async def _serve(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        if self._proxy is None or scope["type"] != "http" or scope["method"] != "POST" or not self._sessions:
            await app(scope, receive, send)
            return
        first = await receive()
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first
            return await receive()

        body = first.get("body", b"") if first["type"] == "http.request" and not first.get("more_body") else b""
        if not (_TOOLS_CALL in body and await self._answered(scope, replay, send, body)):
            await app(scope, replay, send)

    async def _answered(self, scope: Scope, receive: Receive, send: Send, body: bytes) -> bool:
        """Run and answer the call in ``body`` when the lane accepts it (``True``), else leave it (``False``)."""
        session_id = version = None
        for key, value in scope["headers"]:
            if key == b"mcp-session-id":
                session_id = value.decode("latin-1")
            elif key == b"mcp-protocol-version":
                version = value.decode("latin-1")
        entry = self._sessions.get(session_id) if session_id is not None else None
        if entry is None or (version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS):
            return False
        try:
            message = pydantic_core.from_json(body, allow_inf_nan=False)
        except ValueError:
            return False
        proxy = self._proxy
        assert proxy is not None and session_id is not None
        session, dispatcher = entry
        if session.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS or not plain_tool_call(proxy, message):
            return False
        request = Request(scope, receive)
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        transport = http_session_transport(self._manager, session_id, requestor)
        json_mode = http_json_response(self._manager)
        if transport is None or not _acceptable(request, json_mode):
            return False
        if await http_security_refusal(transport, request) is not None:
            return False
        # From here to the spawn nothing yields: the session is live and stays so until the call is in its task group.
        if not dispatcher_live(dispatcher) or http_session_transport(self._manager, session_id, requestor) is None:
            return False
        related = None if json_mode else http_related_messages(transport, str(message["id"]))
        if not json_mode and related is None:  # a request of this id is still open: the SDK's path decides
            return False
        await self._run(proxy, transport, session, dispatcher, request, message, related, send)
        return True

    async def _run(
        self,
        proxy: Proxy,
        transport: Any,
        session: ServerSession,
        dispatcher: Any,
        request: Request,
        message: dict[str, Any],
        related: Any,
        send: Send,
    ) -> None:
        """Run the call in the session's task group and answer it (``related``: the stream that collects the
        messages related to it, ``None`` in JSON-response mode)."""
        rid, params = message["id"], message["params"]
        json_mode = related is None
        log.debug("tool_call_raw_http", request_id=rid)
        meta = request_meta(params)  # readable: ``accepts`` checked
        metadata = http_request_metadata(request, can_send_request=not json_mode)
        dctx, scope = open_request(dispatcher, rid, progress_token_from_params(params), metadata)
        ctx = lane_context(session, dctx, rid, params, meta, request)
        outcome: dict[str, Any] = {}
        done = anyio.Event()

        async def call() -> None:
            try:
                with scope:
                    try:
                        outcome["result"] = await tool_call_answer(proxy, ctx, params["name"], params.get("arguments"))
                    except anyio.get_cancelled_exc_class():
                        raise
                    except Exception as exc:
                        error = handler_exception_to_error_data(exc)
                        if error is None:  # as the SDK's dispatcher answers (code 0, the message)
                            log.exception("tool_call_raised", tool=params.get("name"))
                            error = types.ErrorData(code=0, message=str(exc))
                        outcome["error"] = error.model_dump(by_alias=True, mode="json", exclude_unset=True)
                    finally:
                        close_request(dispatcher, dctx)
            finally:
                if dctx.cancel_requested.is_set():  # the client cancelled it: never its result
                    outcome.clear()
                    outcome["error"] = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}
                done.set()

        with HttpRequestHold(transport):
            spawn_handler(dispatcher, call)
            try:
                await done.wait()
            finally:
                held = http_forget_related(transport, str(rid), related) if related is not None else []
        await _answer(send, transport.mcp_session_id, rid, outcome, held, json_mode)


def _acceptable(request: Request, json_mode: bool) -> bool:
    """The Accept and Content-Type checks of the SDK's POST handler (a request failing them keeps the SDK's path)."""
    accept = [t.strip().split(";")[0].strip().lower() for t in request.headers.get("accept", "").split(",")]
    wildcard = "*/*" in accept
    has_json = wildcard or "application/json" in accept or "application/*" in accept
    has_sse = wildcard or "text/event-stream" in accept or "text/*" in accept
    if not has_json or (not json_mode and not has_sse):
        return False
    content_type = request.headers.get("content-type", "")
    return any(part.strip() == "application/json" for part in content_type.split(";")[0].split(","))


async def _answer(
    send: Send, session_id: str | None, rid: Any, outcome: dict[str, Any], held: list[Any], json_mode: bool
) -> None:
    """The HTTP response the SDK's transport sends for the call's outcome (nothing to send when the client is gone)."""
    sid = [(b"mcp-session-id", session_id.encode())] if session_id else []
    if json_mode:
        if outcome:
            body = pydantic_core.to_json({"jsonrpc": "2.0", "id": rid, **outcome})
            status = 200
        else:  # the session ended with the call in flight
            error = {"code": types.INTERNAL_ERROR, "message": "Session terminated before the request completed"}
            body, status = pydantic_core.to_json({"jsonrpc": "2.0", "id": None, "error": error}), 500
        headers = [(b"content-type", b"application/json"), *sid, (b"content-length", str(len(body)).encode())]
    else:
        events = [_event(m.model_dump_json(by_alias=True, exclude_unset=True).encode()) for m in held]
        if outcome:
            events.append(_event(pydantic_core.to_json({"jsonrpc": "2.0", "id": rid, **outcome})))
        body, status = b"".join(events), 200
        headers = [*_SSE_HEADERS, *sid, (b"x-accel-buffering", b"no")]
    try:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
    except OSError:  # the client is gone (uvicorn raises nothing then; another server may)
        log.debug("answer_dropped", request_id=rid)


def _event(data: bytes) -> bytes:
    return b"event: message\r\ndata: " + data + b"\r\n\r\n"


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
