"""The streamable HTTP listener: sessions, DNS-rebinding protection, static bearer tokens, connection limits.

DNS-rebinding protection is on for loopback binds (Host and Origin must name the loopback address, plus whatever
``listen.allowed_hosts``/``allowed_origins`` add). With ``listen.auth_tokens`` set, every request must carry
``Authorization: Bearer <one of them>`` (compared in constant time) or gets 401; the token it carried is the
request's principal (``token-1``, ``token-2``, ... by position), and an MCP session, and what it stores, belongs to
the principal that opened it. Binding a non-loopback address without tokens needs ``allow_unauthenticated_remote``
and is logged as a warning. ``/healthz`` reports upstreams.

Hostile clients are bounded before authentication (``GuardedH11Protocol``): a request's headers must arrive within
``listen.header_timeout_s`` and its whole body within ``listen.body_timeout_s`` of them, and at most
``listen.max_connections`` connections are open: a new one closes, to make room, the oldest one without a request in
progress, else the one whose request body has gone longest without a byte, so that partial-header and slow-body
sockets can neither exhaust the descriptors nor crowd out health checks and real calls. Request bodies
(``JsonBodyGuard``) are checked before the SDK parses them: a batch array, or more than ``listen.max_json_items`` JSON
items, gets a short JSON-RPC error.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import logging
import re
import resource
import socket
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread
import structlog
import uvicorn
from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..ops.web import LOOPBACK_HOSTS, ops_routes
from ..policy.config import ListenConfig, is_loopback
from ..proxy.proxy import Proxy
from ..tasks.host import HEADER_MISMATCH, routing_header_mismatch
from ..text.jsonlines import TooComplex, count_items, items_at_most
from .heap import settled_heap

if TYPE_CHECKING:
    from ..ops.runtime import Ops
    from .httpcall import HttpToolCalls

log = structlog.get_logger(__name__)


class BearerAuth:
    """ASGI middleware: 401 unless the request carries one of the configured bearer tokens.

    An accepted request gets ``scope["user"]``: the SDK's session manager then serves a session only to requests
    carrying the token that opened it (any other gets 404, as for an unknown session)."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: list[str],
        exempt: tuple[str, ...] = ("/healthz",),
        setting: str = "listen.auth_tokens",
    ) -> None:
        self.app = app
        self.setting = setting
        self.tokens = [t.encode() for t in tokens]
        self.exempt = exempt
        self.users = [
            AuthenticatedUser(AccessToken(token=f"token-{i}", client_id=f"token-{i}", scopes=[]))
            for i in range(1, len(tokens) + 1)
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = header.partition(b" ")
        if scheme.lower() == b"bearer":
            matches = [hmac.compare_digest(token.strip(), t) for t in self.tokens]  # every one: constant time
            if any(matches):
                scope["user"] = self.users[matches.index(True)]
                scope["auth"] = AuthCredentials([])
                await self.app(scope, receive, send)
                return
        response = JSONResponse(
            {"error": "unauthorized", "error_description": f"send Authorization: Bearer <token> ({self.setting})"},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="resilient-mcp"'},
        )
        await response(scope, receive, send)


# --- request bodies ---------------------------------------------------------------------------------------------------

_BATCH = re.compile(rb"[ \t\r\n]*\[")
"""A body whose JSON is an array: a JSON-RPC batch."""


def _jsonrpc_error(code: int, message: str, status: int, request_id: Any = None) -> Response:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json")


class JsonBodyGuard:
    """ASGI middleware for the MCP endpoint: bounded bodies and short errors, before the SDK parses anything.

    - a body over the SDK's size limit: 413 before it is buffered whole;
    - a JSON-RPC batch (an array): one short -32600 error (MCP has no batches since 2025-06-18); the SDK would answer
      with its whole pydantic error text;
    - more than ``max_items`` JSON items (strings and keys, numbers, literals, objects, arrays): 413 with a short
      -32600 error. Without this a 3.6 MB body of 200,000 keys is parsed and walked on the event loop, stalling
      every session for seconds. A cheap upper bound clears almost every body at once; only a body over it is
      counted exactly, in a worker thread that yields the interpreter between tokens.

    Whatever passes is handed to the SDK unchanged."""

    def __init__(self, app: ASGIApp, max_items: int, max_bytes: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> None:
        self.app = app
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._counters: anyio.CapacityLimiter | None = None
        """Two bodies counted at a time; more wait (the CPU they take stays bounded)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        trailing: Message | None = None
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # gone before its body was complete (closed, timed out, evicted): nothing to answer
            if message["type"] != "http.request":
                trailing = message
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await Response("Request body too large", status_code=413)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        rejection = await self._check(body) or _task_routing(scope, body)
        if rejection is not None:
            await rejection(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return trailing if trailing is not None else await receive()

        await self.app(scope, replay, send)

    async def _check(self, body: bytes) -> Response | None:
        if _BATCH.match(body):
            return _jsonrpc_error(
                -32600, "Invalid Request: JSON-RPC batches are not supported; send one message per request", 400
            )
        if items_at_most(body) <= self.max_items:
            return None
        if self._counters is None:
            self._counters = anyio.CapacityLimiter(2)
        try:
            await anyio.to_thread.run_sync(functools.partial(count_items, body, self.max_items), limiter=self._counters)
        except TooComplex as exc:
            log.warning("http_body_refused", bytes=len(body), reason=str(exc))
            return _jsonrpc_error(-32600, f"Request too complex: {exc} (listen.max_json_items)", 413)
        return None


def _task_routing(scope: Scope, body: bytes) -> Response | None:
    """-32020 (HTTP 400) for a tasks/* request whose ``Mcp-Name`` header is not its taskId (``tasks.host``)."""
    name = next((v for k, v in scope.get("headers", ()) if k == b"mcp-name"), None)
    mismatch = routing_header_mismatch(body, name.decode("latin-1") if name is not None else None)
    return None if mismatch is None else _jsonrpc_error(HEADER_MISMATCH, mismatch[1], 400, mismatch[0])


# --- connections ------------------------------------------------------------------------------------------------------

SHED_LOG_INTERVAL_S = 10.0
BACKLOG = 64
"""The listen queue, and so the most connections asyncio accepts per event-loop turn. A shed connection's descriptor
is freed three turns after its accept (task, ``connection_made``, close), so up to ~4 x BACKLOG are open beyond the
cap during a flood."""


def open_files_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 65536 if soft == resource.RLIM_INFINITY or soft <= 0 else soft


def descriptor_reserve(open_files: int) -> int:
    """Descriptors kept out of the connection cap: accept bursts not yet shed (4 x ``BACKLOG``), upstream pipes and
    sockets, the state database, logs and the event loop. A quarter of the limit, at least 4 x ``BACKLOG`` + 64."""
    return max(4 * BACKLOG + 64, open_files // 4)


def default_max_connections() -> int:
    """What the open-file limit leaves after ``descriptor_reserve``, at most 4096 (1024 descriptors: 704)."""
    open_files = open_files_limit()
    return max(8, min(4096, open_files - descriptor_reserve(open_files)))


class ConnectionLimits:
    """The connections of one listener: the cap, header deadlines, and a rate-limited account of what was shed."""

    def __init__(self, max_connections: int, header_timeout_s: float, body_timeout_s: float = 30.0) -> None:
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.open = 0
        self.waiting: OrderedDict[GuardedH11Protocol, None] = OrderedDict()
        """Connections without a request in progress, the longest waiting first: the ones that may be closed."""
        self.receiving: OrderedDict[GuardedH11Protocol, None] = OrderedDict()
        """Connections whose request body is still arriving, the longest without a byte first: closed to make room
        when no connection is waiting."""
        self.shed = {"evicted": 0, "refused": 0, "header_timeouts": 0, "body_timeouts": 0}
        self._report: asyncio.TimerHandle | None = None

    def count(self, what: str, loop: asyncio.AbstractEventLoop) -> None:
        """Count a shed connection; one log line per ``SHED_LOG_INTERVAL_S`` at most, never one per connection."""
        self.shed[what] += 1
        if self._report is None:
            self._report = loop.call_later(SHED_LOG_INTERVAL_S, self._flush)

    def _flush(self) -> None:
        self._report = None
        if any(self.shed.values()):
            log.warning(
                "http_connections_shed",
                **self.shed,
                open=self.open,
                max_connections=self.max_connections,
                header_timeout_s=self.header_timeout_s,
                body_timeout_s=self.body_timeout_s,
                interval_s=SHED_LOG_INTERVAL_S,
            )
            self.shed = dict.fromkeys(self.shed, 0)

    def close(self) -> None:
        if self._report is not None:
            self._report.cancel()
            self._flush()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header and body deadlines and a connection cap (uvicorn has none of them).

    A connection is *waiting* from when it opens, or its last response ends, until a request's headers are complete;
    the headers of each request must arrive within ``header_timeout_s`` of its first byte (of the connection's
    opening when nothing arrives), else 408 and close. It is then *receiving* until its body is complete, which must
    be within ``body_timeout_s`` of the headers (else 408 and close: a body sent a byte at a time is not progress
    enough). Over ``max_connections`` the longest-waiting connection is closed to make room, else the receiving one
    that has gone longest without a byte; when every connection has a complete request in progress the new one is
    closed instead."""

    def __init__(self, *args: Any, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self._deadline: asyncio.TimerHandle | None = None
        self._request_begun = False
        self._counted = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limits = self.limits
        limits.open += 1
        self._counted = True
        limits.waiting[self] = None
        self._arm()
        if limits.open > limits.max_connections:
            victim = next(iter(limits.waiting))
            if victim is self and limits.receiving:
                victim = next(iter(limits.receiving))  # a slow body makes room before a new connection is refused
            limits.count("evicted" if victim is not self else "refused", self.loop)
            victim._drop()

    def connection_lost(self, exc: Exception | None) -> None:
        self._uncount()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._update()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._request_begun = False
        self._update()
        if not self._request_begun:
            self._disarm()  # idle between requests: uvicorn's keep-alive timeout applies

    def _busy(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _update(self) -> None:
        if self.transport.is_closing():
            return
        if self._busy():
            limits = self.limits
            limits.waiting.pop(self, None)
            self._request_begun = False
            if self.cycle is not None and self.cycle.more_body:  # the body is still arriving
                if self in limits.receiving:
                    limits.receiving.move_to_end(self)  # a byte arrived: the last to make room
                else:
                    limits.receiving[self] = None
                    self._arm(limits.body_timeout_s, self._body_timeout)  # the whole body, from its headers
            else:
                limits.receiving.pop(self, None)
                self._disarm()
            return
        self.limits.receiving.pop(self, None)
        if self not in self.limits.waiting:
            self.limits.waiting[self] = None
        if not self._request_begun and self.conn.trailing_data[0]:
            self._request_begun = True  # the first bytes of a request: its headers are due from now
            self._arm()

    def _arm(self, delay: float | None = None, then: Callable[[], None] | None = None) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(
            self.limits.header_timeout_s if delay is None else delay, then or self._header_timeout
        )

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _header_timeout(self) -> None:
        self._deadline = None
        if self._busy() or self.transport.is_closing():
            return
        self.limits.count("header_timeouts", self.loop)
        if self._request_begun:
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")
        self._drop()

    def _body_timeout(self) -> None:
        self._deadline = None
        cycle = self.cycle
        if cycle is None or not cycle.more_body or cycle.response_complete or self.transport.is_closing():
            return
        self.limits.count("body_timeouts", self.loop)
        if not cycle.response_started:
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")
        self._drop()

    def _drop(self) -> None:
        self._uncount()  # now, not when the close completes: a burst of new connections must not evict twice
        self.transport.close()

    def _uncount(self) -> None:
        self.limits.waiting.pop(self, None)
        self.limits.receiving.pop(self, None)
        self._disarm()
        if self._counted:
            self._counted = False
            self.limits.open -= 1


class _RateLimited(logging.Filter):
    """At most ``per_window`` records of one message per ``window_s`` on a logger (uvicorn's and asyncio's lines
    about invalid requests and failed accepts would otherwise be written once per hostile connection)."""

    def __init__(self, per_window: int = 5, window_s: float = SHED_LOG_INTERVAL_S) -> None:
        super().__init__()
        self.per_window = per_window
        self.window_s = window_s
        self._seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        key = str(record.msg)
        start, n = self._seen.get(key, (now, 0))
        if now - start >= self.window_s:
            start, n = now, 0
        if len(self._seen) > 1000:
            self._seen.clear()
        self._seen[key] = (start, n + 1)
        return n < self.per_window


@contextlib.contextmanager
def _quiet_server_loggers() -> Iterator[None]:
    flt = _RateLimited()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "asyncio")]
    for logger in loggers:
        logger.addFilter(flt)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(flt)


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: the CLI owns SIGTERM/SIGINT and stops everything in order."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def security_settings(host: str, listen: ListenConfig) -> TransportSecuritySettings:
    hosts = list(listen.allowed_hosts)
    origins = list(listen.allowed_origins)
    if is_loopback(host) or host in ("0.0.0.0", "::"):
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        origins += ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    else:
        hosts += [host, f"{host}:*"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def build_app(
    proxy: Proxy,
    server: Server[Any],
    host: str,
    listen: ListenConfig,
    ops: Ops | None = None,
    lane: HttpToolCalls | None = None,
) -> ASGIApp:
    """The listener's ASGI app. ``lane``: the raw tools/call lane (``httpcall``) in front of the SDK's endpoint."""
    security = security_settings(host, listen)
    manager = StreamableHTTPSessionManager(app=server, stateless=listen.stateless, security_settings=security)

    async def health(request: Request) -> JSONResponse:
        # Unauthenticated and outside DNS-rebinding protection: says only how many upstreams are ready, no names.
        ready = sum(1 for up in proxy.upstreams.values() if up.state == "ready")
        ok = ready == len(proxy.upstreams)
        body: dict[str, Any] = {"ok": ok, "ready": ready, "upstreams": len(proxy.upstreams)}
        store = proxy.pipeline.services.store
        if store is not None and store.journal_mode == "redis":  # reads still work without it: not a 503
            body["state"] = getattr(store, "state", "ok")  # ok | unavailable | reset (Redis was wiped)
        return JSONResponse(body, status_code=200 if ok else 503)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    sdk_endpoint: ASGIApp = StreamableHTTPASGIApp(manager)
    if lane is not None and not listen.stateless:
        sdk_endpoint = lane.wrap(sdk_endpoint, manager)
    mcp_endpoint = JsonBodyGuard(sdk_endpoint, listen.max_json_items)
    app: ASGIApp = Starlette(
        routes=[
            Route(listen.path, endpoint=mcp_endpoint, methods=["GET", "POST", "DELETE"]),
            Route("/healthz", endpoint=health),
            *(ops_routes(ops, security.allowed_hosts or [], per_principal=bool(listen.auth_tokens)) if ops else []),
        ],
        lifespan=lifespan,
    )
    if listen.auth_tokens:
        app = BearerAuth(app, listen.auth_tokens, exempt=("/healthz", *(ops.public_paths() if ops else ())))
    return app


async def serve_http(
    proxy: Proxy,
    server: Server[Any],
    host: str,
    port: int,
    listen: ListenConfig,
    ops: Ops | None = None,
    *,
    lane: HttpToolCalls | None = None,
) -> None:
    _warn_of_risky_listen(host, port, listen)
    app = build_app(proxy, server, host, listen, ops, lane)
    limits = _connection_limits(listen)
    protocol = cast(type[asyncio.Protocol], functools.partial(GuardedH11Protocol, limits=limits))
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
        http=protocol,
        backlog=BACKLOG,
    )
    userver = _Uvicorn(config)
    log.info(
        "http_listening",
        url=f"http://{host}:{port}{listen.path}",
        auth=bool(listen.auth_tokens),
        max_connections=limits.max_connections,
        header_timeout_s=limits.header_timeout_s,
        body_timeout_s=limits.body_timeout_s,
    )

    async def run() -> None:
        with anyio.CancelScope(shield=True):  # stopped by should_exit, gracefully, never by cancellation
            await userver.serve()
        tg.cancel_scope.cancel()

    with _quiet_server_loggers(), settled_heap():  # started: the collector never walks start-up's heap again
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            try:
                await anyio.sleep_forever()
            finally:
                userver.should_exit = True
                limits.close()
    if not userver.started:
        log.error("http_listen_failed", host=host, port=port)


def _warn_of_risky_listen(host: str, port: int, listen: ListenConfig) -> None:
    """Say what a listen setting gives up: no authentication on a non-loopback address, sessions when stateless."""
    if not is_loopback(host) and not listen.auth_tokens:
        log.warning("http_unauthenticated_remote_bind", host=host, port=port)
    if listen.stateless:
        log.warning(
            "http_stateless",
            lost="cancellation, out-of-band notifications, and per-session guards (loop guard, budgets, replay of "
            "writes identified by a hash of their arguments): each request is its own session",
        )


def _connection_limits(listen: ListenConfig) -> ConnectionLimits:
    """The listener's connection limits, with a warning when they exceed what the open-file limit allows."""
    limits = ConnectionLimits(
        listen.max_connections or default_max_connections(), listen.header_timeout_s, listen.body_timeout_s
    )
    open_files = open_files_limit()
    if limits.max_connections > open_files - descriptor_reserve(open_files):
        log.warning(
            "http_max_connections_above_open_files",
            max_connections=limits.max_connections,
            open_files_limit=open_files,
            hint="lower listen.max_connections or raise the open-file limit (ulimit -n): past it, new connections "
            "fail in accept() instead of being shed",
        )
    return limits


def ensure_bindable(host: str, port: int) -> None:
    """Fail early, before any upstream starts, when the address cannot be bound (in use, not local, ...)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise OSError(f"cannot serve HTTP on {host}:{port}: {exc.strerror or exc}") from None


async def serve_loopback(ops: Ops, host: str, port: int) -> None:
    """``metrics.listen`` in stdio mode: /metrics and /status on a loopback port, until cancelled. With
    ``metrics.token`` every request must carry it; without, the status page shows no failure's observation."""
    token = ops.config.metrics.token
    app: Any = Starlette(routes=ops_routes(ops, LOOPBACK_HOSTS, values=token is not None))
    if token is not None:
        app = BearerAuth(app, [token], exempt=(), setting="metrics.token")
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="off")
    server = _Uvicorn(config)
    log.info("ops_listening", url=f"http://{host}:{port}/metrics", auth=token is not None)

    async def run() -> None:
        with anyio.CancelScope(shield=True):  # stopped by should_exit, gracefully
            await server.serve()
        tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            await anyio.sleep_forever()
        finally:
            server.should_exit = True
    if not server.started:
        log.error("ops_listen_failed", host=host, port=port)
