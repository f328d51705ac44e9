"""A proxy with operations on, in front of a scripted upstream, through the real client → proxy → upstream path."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from opentelemetry.sdk.trace import TracerProvider

from resilient_mcp.app import pipeline_factory
from resilient_mcp.ops.runtime import Ops
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.proxy.pipeline import Services
from tests.fixtures.scripted import ScriptedUpstream
from tests.harness import Harness, proxied

LIMIT_S = 30


class Sleeps:
    """The retry stage's sleep: records the delays, never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@asynccontextmanager
async def ops_proxy(
    up: ScriptedUpstream,
    tools: dict[str, Any],
    *,
    tracer_provider: TracerProvider | None = None,
    served: bool = True,
    config: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[Harness, Ops]]:
    data = {"upstreams": {up.name: {"command": "in-memory"}}, "state_dir": ":memory:", **(config or {})}
    ops = Ops(ProxyConfig.model_validate(data), served=served, tracer_provider=tracer_provider)
    pipeline = pipeline_factory(ops, Services(sleep=Sleeps()))
    async with proxied({up.name: up.server()}, {"tools": tools}, config=config, pipeline=pipeline) as h:
        yield h, ops


async def call(h: Harness, name: str, args: dict[str, Any], meta: dict[str, Any] | None = None) -> types.CallToolResult:
    with anyio.fail_after(LIMIT_S):
        return await h.client.call_tool(name, args, meta=meta)  # type: ignore[arg-type]


def internal_error(args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(types.INTERNAL_ERROR, "backend unavailable")
