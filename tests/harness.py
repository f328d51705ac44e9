"""Test harness: the real client → proxy → upstream path, in memory, through JSON-RPC framing; and the upstream as
one stage sees it (``ScriptedNext``, a scripted ``call_next``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server import Server

from resilient_mcp.app import chaos_calls
from resilient_mcp.call.chain import ToolCall
from resilient_mcp.faults import Fault
from resilient_mcp.host.server import build_server
from resilient_mcp.policy import Policy, PolicyFile
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.proxy.pipeline import Pipeline
from resilient_mcp.proxy.proxy import Proxy
from resilient_mcp.proxy.routing import CallLayer, Router

if TYPE_CHECKING:
    from tests.conftest import FakeClock


@dataclass
class Harness:
    client: Client
    proxy: Proxy


@asynccontextmanager
async def proxied(
    upstreams: dict[str, Server[Any]],
    policy: dict[str, Any] | Policy | None = None,
    *,
    config: dict[str, Any] | None = None,
    client_kwargs: dict[str, Any] | None = None,
    pipeline: Callable[[Router, Policy], Pipeline] = Pipeline,
    protocol: str = "legacy",
    calls: CallLayer | None = None,
) -> AsyncIterator[Harness]:
    """A proxy in front of in-process upstream servers, and a legacy-mode client connected to it.

    ``protocol``: each upstream's ``protocol`` (``legacy`` here, one connection; the configuration's default is
    ``auto``, whose second connection for 2026-07-28 hosts tests ask for explicitly). ``calls``: how the proxy calls
    its upstreams (e.g. a ``FaultInjector`` on a fake clock); by default chaos mode's, when ``config`` has
    ``faults``."""
    data: dict[str, Any] = {
        "upstreams": {name: {"command": "in-memory", "protocol": protocol} for name in upstreams},
        "state_dir": ":memory:",
    }
    data.update(config or {})
    cfg = ProxyConfig.model_validate(data)
    pol = policy if isinstance(policy, Policy) else Policy(PolicyFile.model_validate(policy or {}))
    transports = {name: (lambda s=server: InMemoryTransport(s)) for name, server in upstreams.items()}
    proxy = Proxy(cfg, pol, pipeline, transports=transports, calls=calls or chaos_calls(cfg))
    async with proxy.running(startup_timeout_s=5):
        server = build_server(proxy)
        async with Client(server, mode="legacy", cache=None, **(client_kwargs or {})) as client:
            yield Harness(client=client, proxy=proxy)


def classification(obs: dict[str, Any]) -> tuple[Any, ...]:
    """The fields every acceptance test pins, in a fixed order."""
    keys = ("fault_category", "fault_type", "is_transient", "retry_safety", "side_effect_status", "repair_action")
    return (*(obs[k] for k in keys), obs["max_retry"])


def observation(result: types.CallToolResult) -> dict[str, Any]:
    """The structured observation of an error result (fails the test if the call did not fail)."""
    assert result.is_error, result
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


# --- one stage's view of the upstream ---------------------------------------------------------------------------------

OK = types.CallToolResult(content=[types.TextContent(type="text", text="done")])
"""What ``ScriptedNext`` answers for a step of ``None``."""


@dataclass
class ScriptedNext:
    """A stage's ``call_next`` that plays a script: each call takes the next step (a fault to raise, or ``None`` for
    success: ``OK``; past the end, success) and is kept in ``calls``. With ``clock``, each call moves that fake clock
    on by ``takes_s`` (the time an execution takes)."""

    steps: list[Fault | None] = field(default_factory=list)
    clock: FakeClock | None = None
    takes_s: float = 0.0
    calls: list[ToolCall] = field(default_factory=list)

    async def __call__(self, call: ToolCall) -> types.CallToolResult:
        self.calls.append(call)
        if self.clock is not None:
            self.clock.now += self.takes_s
        step = self.steps.pop(0) if self.steps else None
        if step is not None:
            raise step
        return OK
