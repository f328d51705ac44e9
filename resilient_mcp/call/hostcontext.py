"""The host request being served, as seen from deep inside the chain and the upstream client.

The server sets ``CURRENT_HOST`` for the duration of one host request (tools/call, prompts/get, resources/read).
It says three things the upstream side needs:

* what to tell a 2026-07-28 upstream in this request's ``_meta`` envelope (the host's own capabilities and log
  level, not the proxy's), so the upstream asks only what this host can answer;
* whom an upstream's question (sampling, elicitation, roots) belongs to;
* the call's timers (``Timers``): time the upstream spends waiting for the *host* to answer is not upstream time, so
  attempt and total timeouts stop while it waits and resume afterwards. A human taking minutes over an elicitation
  is never an upstream timeout (whose outcome would be unknown and block the identical call afterwards).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types

HOST_CAPABILITIES = ("sampling", "elicitation", "roots")
"""The client capabilities the proxy can only serve by asking a host: declared upstream when the host has them."""


def host_capability_names(caps: types.ClientCapabilities | None) -> frozenset[str]:
    """Which of ``HOST_CAPABILITIES`` a host declared (``None``: nothing known, so nothing declared)."""
    if caps is None:
        return frozenset()
    return frozenset(name for name in HOST_CAPABILITIES if getattr(caps, name, None) is not None)


class Timers:
    """The cancel scopes timing one host request; paused while an upstream waits for that host."""

    def __init__(self) -> None:
        self._scopes: dict[anyio.CancelScope, float] = {}
        """Each scope and, while paused, the deadline it had."""
        self._paused = 0
        self._paused_at = 0.0

    @contextmanager
    def timing(self, scope: anyio.CancelScope) -> Iterator[anyio.CancelScope]:
        """Register ``scope`` (a timeout of this request) for as long as the block runs."""
        self._scopes[scope] = scope.deadline
        if self._paused:
            scope.deadline = math.inf
        try:
            yield scope
        finally:
            self._scopes.pop(scope, None)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop every registered timeout while the block runs; each resumes with the time it had left."""
        if self._paused == 0:
            self._paused_at = anyio.current_time()
            for scope in self._scopes:
                self._scopes[scope] = scope.deadline
                scope.deadline = math.inf
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1
            if self._paused == 0:
                waited = anyio.current_time() - self._paused_at
                for scope, deadline in self._scopes.items():
                    scope.deadline = deadline + waited


@dataclass(frozen=True, slots=True)
class HostEnvelope:
    """One host request, as the upstream side sees it."""

    ctx: Any
    """The SDK's request context of the host's request."""
    capabilities: frozenset[str]
    """Which of sampling, elicitation, roots the host declared."""
    log_level: str | None = None
    """The 2026-07-28 host's per-request log level (``None``: it asked for no log messages)."""
    modern: bool = False
    """The host speaks 2026-07-28 (else: the handshake era, where log messages flow unless ``logging/setLevel``
    says otherwise)."""
    timers: Timers = field(default_factory=Timers)


CURRENT_HOST: ContextVar[HostEnvelope | None] = ContextVar("resilient_mcp_current_host", default=None)


def current_timers() -> Timers | None:
    host = CURRENT_HOST.get()
    return host.timers if host is not None else None


@contextmanager
def timing(scope: anyio.CancelScope) -> Iterator[anyio.CancelScope]:
    """Register ``scope`` with the current host request's timers (a no-op outside one)."""
    timers = current_timers()
    if timers is None:
        yield scope
    else:
        with timers.timing(scope):
            yield scope
