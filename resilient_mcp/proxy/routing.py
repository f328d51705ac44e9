"""The routing a call runs on, and the narrow view of the proxy that a compiled chain may use while it runs.

``Routing`` is one immutable snapshot: the catalog and one compiled chain per visible tool. The proxy builds a new
one when an upstream's catalog or the policy changes and swaps it in one assignment; a call keeps the snapshot it
started with.

``Router`` is all the pipeline and drift recovery get of the proxy: the routing in force, an upstream by name (and
the layer that sends a tool call to it), and a "tools changed" signal. The signal only marks the routing stale and
wakes the proxy: the rebuild runs outside every call (before the next host request reads the routing, or in the
proxy's own task that tells the hosts ``list_changed``), never inside the chain that noticed the change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import mcp_types as types

from ..call.chain import CallNext, Entry
from ..faults import EffectClass
from .catalog import Catalog

if TYPE_CHECKING:
    from ..policy import ToolRule
    from ..upstream import Upstream

CallTool = Callable[..., Awaitable[types.CallToolResult]]
"""One attempt of a tool call on an upstream, shaped like ``Upstream.call_tool``."""
CallLayer = Callable[["Upstream"], CallTool]
"""What sends the terminal's attempts to an upstream: ``Upstream.call_tool`` unless a layer (chaos mode) wraps it."""


def plain_calls(upstream: Upstream) -> CallTool:
    return upstream.call_tool


@dataclass(frozen=True, slots=True)
class CompiledTool:
    """One tool's chain, compiled from the policy in force when the routing was built."""

    rule: ToolRule
    chain: CallNext
    entry: Entry
    inner: CallNext
    """The chain below observe and guard: what another tool's fallback stage calls (counted once, by the
    observe of the tool the host called)."""
    effect_from: str = "policy"
    """Where ``rule.effect`` came from, in words (``Policy.effect_source``): the start-up log, ``check``, status."""


@dataclass(frozen=True, slots=True)
class Routing:
    """One consistent view for calls: the catalog and the chain compiled for each of its tools."""

    catalog: Catalog
    chains: dict[str, CompiledTool] = field(default_factory=dict)
    visible_tools: list[types.Tool] = field(default_factory=list)


class Router:
    """The proxy as a chain sees it. Owned by the proxy; the pipeline holds this, never the proxy."""

    def __init__(
        self, upstreams: Mapping[str, Upstream], prefixes: Mapping[str, str], calls: CallLayer | None = None
    ) -> None:
        self._upstreams = upstreams
        self.senders: dict[str, CallTool] = {name: (calls or plain_calls)(up) for name, up in upstreams.items()}
        """How the terminal sends an attempt to each upstream: ``Upstream.call_tool``, or the call layer's wrapper."""
        self.routing = Routing(catalog=Catalog(prefixes=dict(prefixes)))
        """The routing in force (swapped by the proxy)."""
        self.stale = False
        """Something changed since ``routing`` was built: the proxy rebuilds before the next host request reads it."""
        self._changed = anyio.Event()

    def upstream(self, name: str) -> Upstream | None:
        return self._upstreams.get(name)

    @property
    def upstreams(self) -> Mapping[str, Upstream]:
        """Every upstream by name (read-only view for side channels such as metrics and the status page)."""
        return self._upstreams

    def prefix(self, upstream: str) -> str:
        return self.routing.catalog.prefixes.get(upstream, "")

    def tools_changed(self) -> None:
        """An upstream's catalog or the proxy's own tools changed: rebuild soon (not now) and tell the hosts."""
        self.stale = True
        self._changed.set()

    async def wait_changed(self) -> None:
        """Until ``tools_changed`` is signalled (then re-armed): the proxy's announcer waits here."""
        await self._changed.wait()
        self._changed = anyio.Event()


def retried_on(rule: ToolRule) -> str:
    """Which faults the proxy retries for a tool with ``rule``, in words (rule R, ``repeat.decide``)."""
    if not rule.retry.enabled:
        return "never (retry.enabled: false)"
    if rule.effect in (EffectClass.READ_ONLY, EffectClass.WRITE_IDEMPOTENT) or rule.idempotency.forward_key_as:
        return "transient faults"
    return "only faults where the call provably did not run (not sent, rejected before execution)"


def treatment(chains: Mapping[str, CompiledTool]) -> list[dict[str, str]]:
    """How each served tool is treated and why: its effect class, where that came from, and what is retried."""
    return [
        {
            "tool": name,
            "upstream": compiled.entry.upstream,
            "effect": compiled.rule.effect.value,
            "effect_from": compiled.effect_from,
            "retried_on": retried_on(compiled.rule),
        }
        for name, compiled in sorted(chains.items())
    ]
