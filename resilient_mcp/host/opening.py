"""The stdio host's opening request, read before any upstream starts: one start per upstream per session.

A stdio host spawns the proxy and sends its first request (``initialize``, or a 2026-07-28 request whose ``_meta``
envelope declares the client's capabilities) milliseconds later, while nothing is connected yet. Reading it first
lets every upstream be connected once, declaring exactly the host's own capabilities (``Upstream.declared``),
instead of connecting declaring everything and restarting at the host's first request (the server's start-up side
effects ran twice, and that request waited for the restart).

``read_opening`` takes frames off the transport's read stream until the first request (bounded in count and time);
``Replay`` hands the server those frames, in order, and then the rest of the stream.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

MAX_LEAD_FRAMES = 8
"""Frames kept ahead of the first request (a host sends none; the SDK's own replay keeps as many)."""


class Replay:
    """A read stream: ``lead`` first, then everything ``inner`` yields (the SDK's ``ReadStream`` protocol)."""

    def __init__(self, lead: list[SessionMessage | Exception], inner: Any) -> None:
        self._lead = list(lead)
        self._inner = inner

    async def receive(self) -> SessionMessage | Exception:
        if self._lead:
            return self._lead.pop(0)
        item: SessionMessage | Exception = await self._inner.receive()
        return item

    async def aclose(self) -> None:
        self._lead.clear()
        await self._inner.aclose()

    def __aiter__(self) -> Replay:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Replay:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # last_context and friends
        return getattr(self._inner, name)


async def read_opening(read: Any, timeout_s: float) -> tuple[types.JSONRPCRequest | None, Replay]:
    """The host's first request (``None`` when the stream ended, or none came within ``timeout_s`` or the first
    ``MAX_LEAD_FRAMES`` frames), and a stream that replays every frame read here before the rest."""
    lead: list[SessionMessage | Exception] = []
    opening: types.JSONRPCRequest | None = None
    with anyio.move_on_after(timeout_s):
        while opening is None and len(lead) < MAX_LEAD_FRAMES:
            try:
                item = await read.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                break
            lead.append(item)
            if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCRequest):
                opening = item.message
    return opening, Replay(lead, read)


def speaks_2026(request: types.JSONRPCRequest | None) -> bool:
    """The host's opening request is in the 2026-07-28 era: a request (``server/discover`` from a client in
    ``auto`` mode, or any other) whose ``_meta`` envelope names a 2026-07-28 protocol version. ``initialize``, no
    request, or one without that envelope: the handshake era."""
    if request is None or request.method == "initialize" or not isinstance(request.params, dict):
        return False
    meta = request.params.get("_meta")
    return isinstance(meta, dict) and meta.get(PROTOCOL_VERSION_META_KEY) in MODERN_PROTOCOL_VERSIONS


def declared_capabilities(request: types.JSONRPCRequest | None) -> types.ClientCapabilities | None:
    """What the host declared in its opening request: ``initialize``'s ``capabilities``, or the 2026-07-28 envelope's
    client capabilities. ``None`` when the request says nothing readable about them."""
    if request is None or not isinstance(request.params, dict):
        return None
    params = request.params
    raw: Any = None
    if request.method == "initialize":
        raw = params.get("capabilities")
    else:
        meta = params.get("_meta")
        raw = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    if not isinstance(raw, dict):
        return None
    try:
        return types.ClientCapabilities.model_validate(raw, by_name=False)
    except ValidationError:
        return None
