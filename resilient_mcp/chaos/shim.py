"""A loopback fault shim: a TCP proxy on 127.0.0.1 in front of an HTTP MCP upstream, faulting requests by a plan.

It reads each HTTP request, and for a ``tools/call`` POST asks the plan's ``Planner`` (same plan format, same
counting by tool) what to do; other requests (initialize, tools/list, the GET stream, DELETE) pass untouched. Every
request is forwarded with ``Connection: close``, so one connection carries one request and a fault hits exactly one.

=================================  =================================================================================
fault                              what the client sees
=================================  =================================================================================
C1, C5                             the connection is reset (RST) before anything is forwarded
C2 ``commit: before`` / ``none``   forwarded, then reset when the upstream starts answering / reset first
C3                                 held: nothing forwarded (``never``) or the answer withheld (``before_hang``) for
                                   ``hang_ms`` (default: until the client gives up); then closed
D3                                 forwarded after ``delay_ms``
C4                                 an HTTP 5xx (with Retry-After), without or after forwarding (``forward``)
A1 A4 B* D1 D2 D4 D5 F1 F2 F3      that error as an HTTP status (429 + Retry-After, 401 + WWW-Authenticate, 403, ...)
=================================  =================================================================================

``refuse()`` / ``accept()`` close and reopen the listening port: connection attempts meanwhile get ECONNREFUSED
(a closed loopback port, catalog C1/C5). Binds loopback only.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import anyio
import structlog
from anyio.abc import SocketAttribute, SocketStream, TaskGroup

from ..policy.config import is_loopback, split_host_port
from . import params as pm
from .plan import Decision, FaultPlan, Planner
from .responses import http_error

log = structlog.get_logger(__name__)
_MAX_HEAD = 64 * 1024
_SHIM_FAULTS = (
    "A1",
    "A4",
    "B1",
    "B2",
    "B3",
    "B4",
    "C1",
    "C2",
    "C3",
    "C4",
    "C5",
    "D1",
    "D2",
    "D3",
    "D4",
    "D5",
    "F1",
    "F2",
    "F3",
)


def check_shim_plan(plan: FaultPlan) -> list[str]:
    return [
        f"rules[{i}]: {r.fault} is not a transport fault; the chaos server or the proxy's chaos mode injects it"
        for i, r in enumerate(plan.rules)
        if r.fault[:2] not in _SHIM_FAULTS
    ]


@dataclass
class _Request:
    head: bytes
    body: bytes
    method: str = ""
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


class FaultShim:
    def __init__(self, target: str, plan: FaultPlan | None = None, *, host: str = "127.0.0.1", port: int = 0) -> None:
        if not is_loopback(host):
            raise ValueError(f"the fault shim binds loopback addresses only, not {host}")
        self.plan = plan or FaultPlan()
        problems = check_shim_plan(self.plan)
        if problems:
            raise ValueError("; ".join(problems))
        self.target = split_host_port(target)
        self.host, self.port = host, port
        self.planner = Planner(self.plan)
        self.connections = 0
        self._listener: Any = None
        self._tg: TaskGroup | None = None

    def url(self, path: str = "/mcp") -> str:
        return f"http://{self.host}:{self.port}{path}"

    @asynccontextmanager
    async def running(self) -> AsyncIterator[FaultShim]:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await self.accept()
            try:
                yield self
            finally:
                # Shielded: an await in a cancelled scope would replace the body's own exception with the
                # cancellation, which the task group then swallows (a failing test would look like a pass).
                with anyio.CancelScope(shield=True):
                    await self.refuse()
                tg.cancel_scope.cancel()

    async def accept(self) -> None:
        """Listen (again) on the shim's port."""
        if self._listener is None and self._tg is not None:
            self._listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port)
            self.port = self._listener.extra(SocketAttribute.local_port)
            self._tg.start_soon(self._serve, self._listener)

    async def _serve(self, listener: Any) -> None:
        try:
            await listener.serve(self._handle)
        except* (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # refuse() closed the port

    async def refuse(self) -> None:
        """Close the listening port: new connections are refused until ``accept``."""
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.aclose()

    # --- one connection ---------------------------------------------------------------------------------------------

    async def _handle(self, client: SocketStream) -> None:
        self.connections += 1
        async with client:
            try:
                request = await _read_request(client)
            except (anyio.EndOfStream, anyio.BrokenResourceError, ValueError):
                return
            decision = None
            if request.tool is not None:
                decision = self.planner.decide(request.tool, request.arguments)
            if decision is None:
                await self._forward(client, request)
                return
            log.warning("shim_fault_injected", tool=request.tool, fault=decision.fault, rule=decision.rule)
            await self._inject(client, request, decision)

    async def _inject(self, client: SocketStream, request: _Request, d: Decision) -> None:
        p = d.params
        if d.fault[:2] in ("C1", "C5") or (isinstance(p, pm.DieParams) and p.commit == "none"):
            await _reset(client)
        elif isinstance(p, pm.DieParams):
            await self._forward(client, request, reset_after=0)
        elif isinstance(p, pm.HangParams):
            hang = math.inf if p.hang_ms is None else p.hang_ms / 1000
            if p.commit == "never":
                await anyio.sleep(hang) if not math.isinf(hang) else await anyio.sleep_forever()
            else:
                await self._forward(client, request, hold_s=hang)
        elif isinstance(p, pm.SlowParams):
            await anyio.sleep(p.delay_ms / 1000)
            await self._forward(client, request)
        elif isinstance(p, pm.GatewayParams):
            if p.forward:
                await self._forward(None, request)
            headers = {"Retry-After": f"{math.ceil(p.retry_after_s)}"} if p.retry_after_s is not None else {}
            await _respond(client, p.status, headers, f"upstream error {p.status}")
        elif isinstance(p, pm.ErrorParams):
            status, headers, body = http_error(d.fault, p, d.tool)
            await _respond(client, status, headers, body)

    async def _forward(
        self, client: SocketStream | None, request: _Request, *, reset_after: int | None = None, hold_s: float = 0.0
    ) -> None:
        """Send the request upstream and relay the answer (to nobody when ``client`` is None)."""
        async with await anyio.connect_tcp(*self.target) as upstream:
            await upstream.send(request.head + request.body)
            first = True
            while True:
                try:
                    chunk = await upstream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return
                if first and hold_s:
                    await (anyio.sleep_forever() if math.isinf(hold_s) else anyio.sleep(hold_s))
                    return  # the withheld answer is never delivered
                first = False
                if client is None:
                    continue
                if reset_after is not None:
                    await _reset(client)
                    return
                try:
                    await client.send(chunk)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return


async def _read_request(client: SocketStream) -> _Request:
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > _MAX_HEAD:
            raise ValueError("request head too large")
        buf += await client.receive()
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0") or 0)
    while len(body) < length:
        body += await client.receive()
    kept = [line for line in lines[1:] if not line.lower().startswith(("connection:", "keep-alive:"))]
    new_head = "\r\n".join([lines[0], *kept, "Connection: close"]).encode("latin-1") + b"\r\n\r\n"
    request = _Request(head=new_head, body=body, method=lines[0].split(" ", 1)[0])
    if request.method == "POST" and body:
        try:
            message = json.loads(body)
        except ValueError:
            return request
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params") or {}
            request.tool = str(params.get("name"))
            request.arguments = params.get("arguments") or {}
    return request


async def _respond(client: SocketStream, status: int, headers: dict[str, str], body: str) -> None:
    data = body.encode()
    reason = HTTPStatus(status).phrase if status in {s.value for s in HTTPStatus} else "Error"
    lines = [
        f"HTTP/1.1 {status} {reason}",
        "Content-Type: text/plain; charset=utf-8",
        f"Content-Length: {len(data)}",
        "Connection: close",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await client.send("\r\n".join(lines).encode() + b"\r\n\r\n" + data)


async def _reset(client: SocketStream) -> None:
    """Abort the connection with a TCP RST (SO_LINGER 0), as a crashed peer or a middlebox would."""
    sock: socket.socket = client.extra(SocketAttribute.raw_socket)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    await client.aclose()
