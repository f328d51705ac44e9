"""The proxy's start waits for each upstream's own verdict: its safety limit counts from when the upstream's handshake
began, not from before the process was spawned (a spawn slowed by load used to use up the margin, and ``check
--connect`` reported "starting" with no reason)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client._memory import InMemoryTransport
from mcp.server import Server, ServerRequestContext

from resilient_mcp.policy import Policy, PolicyFile
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.proxy.pipeline import Pipeline
from resilient_mcp.proxy.proxy import Proxy
from tests.helpers import virtual_time

pytestmark = pytest.mark.anyio


def _server() -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="ping", input_schema={"type": "object"})])

    return Server("slow-spawn", on_list_tools=list_tools)


class _SlowFirstSend:
    """The client's write stream, whose first message (initialize) reaches the server ``delay_s`` late: a server
    that takes that long to start answering."""

    def __init__(self, inner: Any, delay_s: float) -> None:
        self._inner, self._delay_s = inner, delay_s

    async def send(self, item: Any) -> None:
        if self._delay_s:
            delay, self._delay_s = self._delay_s, 0.0
            await anyio.sleep(delay)
        await self._inner.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> _SlowFirstSend:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._inner.__aexit__(*exc)


def _proxy(spawn_s: float, answer_after_s: float) -> Proxy:
    """A proxy with one upstream whose transport takes ``spawn_s`` to open (the process start, slowed by load) and
    which answers initialize ``answer_after_s`` after that."""
    server = _server()

    @asynccontextmanager
    async def slow_spawn() -> AsyncIterator[Any]:
        await anyio.sleep(spawn_s)
        async with InMemoryTransport(server) as (read, write):
            yield read, _SlowFirstSend(write, answer_after_s)

    cfg = ProxyConfig.model_validate(
        {
            "upstreams": {"slow": {"command": "in-memory", "protocol": "legacy", "connect_timeout_s": 2}},
            "state_dir": ":memory:",
        }
    )
    return Proxy(cfg, Policy(PolicyFile.model_validate({})), Pipeline, transports={"slow": slow_spawn})


@virtual_time
async def test_a_spawn_slower_than_the_margin_still_gets_its_own_verdict() -> None:
    # connect_timeout_s 2 and a margin of 2 s: counted from before the spawn, a 3 s spawn and an answer 1.5 s later
    # (within the upstream's own 2 s) left the start "starting" at 4 s (the upstream then listed no tools); counted
    # from the handshake, the upstream is ready when the start ends.
    proxy = _proxy(spawn_s=3.0, answer_after_s=1.5)
    async with proxy.running():
        up = proxy.upstreams["slow"]
        assert up.state == "ready", (up.state, up.last_error)
        assert "ping" in proxy.routing.chains


@virtual_time
async def test_a_handshake_that_never_ends_is_reported_by_the_upstream_itself() -> None:
    # The transport opens (after a slow spawn) and then never answers: the upstream's own timer fires first and the
    # start reports its verdict (it was "starting" with no reason: the safety net fired at 4 s, before the
    # upstream's own 2 s counted from 3 s).
    proxy = _proxy(spawn_s=3.0, answer_after_s=3600.0)
    async with proxy.running():
        up = proxy.upstreams["slow"]
        assert up.last_error is not None and "did not answer initialize" in up.last_error
