"""The streamable HTTP listener: sessions, DNS-rebinding protection, static bearer tokens.

DNS-rebinding protection is on for loopback binds (Host and Origin must name the loopback address, plus whatever
``listen.allowed_hosts``/``allowed_origins`` add). With ``listen.auth_tokens`` set, every request must carry
``Authorization: Bearer <one of them>`` (compared in constant time) or gets 401. Binding a non-loopback address
without tokens needs ``allow_unauthenticated_remote`` and is logged as a warning. ``/healthz`` reports upstreams.
"""

from __future__ import annotations

import contextlib
import hmac
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import structlog
import uvicorn
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .config import ListenConfig, is_loopback
from .ops.web import ops_routes
from .proxy import Proxy

if TYPE_CHECKING:
    from .ops.runtime import Ops

log = structlog.get_logger(__name__)


class BearerAuth:
    """ASGI middleware: 401 unless the request carries one of the configured bearer tokens."""

    def __init__(self, app: ASGIApp, tokens: list[str], exempt: tuple[str, ...] = ("/healthz",)) -> None:
        self.app = app
        self.tokens = [t.encode() for t in tokens]
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = header.partition(b" ")
        if scheme.lower() == b"bearer" and any(hmac.compare_digest(token.strip(), t) for t in self.tokens):
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            {"error": "unauthorized", "error_description": "send Authorization: Bearer <token> (listen.auth_tokens)"},
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="resilient-mcp"'},
        )
        await response(scope, receive, send)


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


def build_app(proxy: Proxy, server: Server[Any], host: str, listen: ListenConfig, ops: Ops | None = None) -> ASGIApp:
    security = security_settings(host, listen)
    manager = StreamableHTTPSessionManager(app=server, stateless=listen.stateless, security_settings=security)

    async def health(request: Request) -> JSONResponse:
        # Unauthenticated and outside DNS-rebinding protection: says only how many upstreams are ready, no names.
        ready = sum(1 for up in proxy.upstreams.values() if up.state == "ready")
        ok = ready == len(proxy.upstreams)
        return JSONResponse(
            {"ok": ok, "ready": ready, "upstreams": len(proxy.upstreams)}, status_code=200 if ok else 503
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app: ASGIApp = Starlette(
        routes=[
            Route(listen.path, endpoint=StreamableHTTPASGIApp(manager), methods=["GET", "POST", "DELETE"]),
            Route("/healthz", endpoint=health),
            *(ops_routes(ops, security.allowed_hosts or []) if ops is not None else []),
        ],
        lifespan=lifespan,
    )
    if listen.auth_tokens:
        app = BearerAuth(app, listen.auth_tokens, exempt=("/healthz", *(ops.public_paths() if ops else ())))
    return app


async def serve_http(
    proxy: Proxy, server: Server[Any], host: str, port: int, listen: ListenConfig, ops: Ops | None = None
) -> None:
    if not is_loopback(host) and not listen.auth_tokens:
        log.warning("http_unauthenticated_remote_bind", host=host, port=port)
    if listen.stateless:
        log.warning(
            "http_stateless",
            lost="cancellation, out-of-band notifications, and per-session guards (loop guard, budgets, replay of "
            "writes identified by a hash of their arguments): each request is its own session",
        )
    app = build_app(proxy, server, host, listen, ops)
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=2
    )
    userver = _Uvicorn(config)
    log.info("http_listening", url=f"http://{host}:{port}{listen.path}", auth=bool(listen.auth_tokens))

    async def run() -> None:
        with anyio.CancelScope(shield=True):  # stopped by should_exit, gracefully, never by cancellation
            await userver.serve()
        tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            await anyio.sleep_forever()
        finally:
            userver.should_exit = True
    if not userver.started:
        log.error("http_listen_failed", host=host, port=port)


def ensure_bindable(host: str, port: int) -> None:
    """Fail early, before any upstream starts, when the address cannot be bound (in use, not local, ...)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise OSError(f"cannot serve HTTP on {host}:{port}: {exc.strerror or exc}") from None
