"""HTTP endpoints of operations: ``/metrics``, ``/status`` (HTML), ``/status.json`` and the page's static files.

On the HTTP listener they sit behind the listener's bearer tokens (``/metrics`` not, with ``metrics.public``), and
the status page shows a token only the failures of calls made with that token (tenants never see each other's
arguments or errors). In stdio mode ``metrics.listen`` serves them on a loopback port of their own: behind
``metrics.token`` when it is set, else open to any local user and so without any failure's observation. Either way a
request whose ``Host`` header names something other than the listener (DNS rebinding: a web page reading a local
port) gets 421.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import structlog
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from .metrics import CONTENT_TYPE

if TYPE_CHECKING:
    from .runtime import Ops

log = structlog.get_logger(__name__)

STATIC = {"status.css": "text/css; charset=utf-8", "status.js": "text/javascript; charset=utf-8"}
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]")


def host_allowed(request: Request, patterns: Sequence[str]) -> bool:
    host = request.headers.get("host", "")
    for pattern in patterns:
        if pattern.endswith(":*"):
            if host.startswith(pattern[:-1]) and host[len(pattern) - 1 :].isdigit():
                return True
        elif host == pattern:
            return True
    return False


def ops_routes(
    ops: Ops, allowed_hosts: Sequence[str], *, per_principal: bool = False, values: bool = True
) -> list[BaseRoute]:
    """The routes the configuration asks for (none when metrics and status are both off). ``per_principal``: the
    status page shows each bearer token only its own failures; ``values``: with their observations."""
    hosts = tuple(allowed_hosts)

    def guarded(handler: Any) -> Any:
        return _guarded(handler, hosts)

    routes: list[BaseRoute] = []
    metrics, status, proxy = ops.metrics, ops.status, ops.proxy
    if metrics is not None:

        async def metrics_endpoint(request: Request) -> Response:
            return Response(metrics.render(), media_type=CONTENT_TYPE)

        routes.append(Route("/metrics", guarded(metrics_endpoint), methods=["GET"]))
    if status is not None and proxy is not None:
        from ..state.stored_outputs import http_principal, owner_principal
        from .status import render_live, render_page

        def view(request: Request) -> dict[str, Any]:
            viewer = owner_principal(http_principal(request.scope)) if per_principal else ""
            return status.snapshot(proxy, viewer=viewer or None, values=values)

        async def page(request: Request) -> Response:
            snap = view(request)
            if request.query_params.get("part") == "live":
                return HTMLResponse(render_live(snap))
            response = HTMLResponse(render_page(snap))
            response.headers["Content-Security-Policy"] = (
                "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'"
            )
            return response

        async def snapshot(request: Request) -> Response:
            return JSONResponse(view(request))

        routes += [
            Route("/status", guarded(page), methods=["GET"]),
            Route("/status.json", guarded(snapshot), methods=["GET"]),
            Route("/status/static/{name}", guarded(_static), methods=["GET"]),
        ]
    return routes


def _guarded(handler: Any, hosts: tuple[str, ...]) -> Any:
    """``handler`` answering only requests for an allowed Host, never cached, never content-sniffed."""

    async def endpoint(request: Request) -> Response:
        if not host_allowed(request, hosts):
            return PlainTextResponse("Misdirected request: unexpected Host header\n", status_code=421)
        response: Response = await handler(request)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    return endpoint


async def _static(request: Request) -> Response:
    """The status page's own scripts and styles (``ops/static``), by name; nothing else."""
    name = request.path_params["name"]
    if name not in STATIC:
        return PlainTextResponse("not found\n", status_code=404)
    body = files(__package__).joinpath("static", name).read_bytes()
    return Response(body, media_type=STATIC[name])
