"""The cost of resilient-mcp's own chain per tool call, in process, without any transport or SDK in the way.

    python benchmarks/chain_cost.py [--calls 3000] [--profile]

A proxy is started in memory in front of an in-process upstream with an ``echo`` tool (``tests/harness.py``), then
the compiled chain of ``echo`` is called directly, as ``server.call_tool`` does, with the upstream call replaced by
a canned result: what is left is observe → guard → validate → output → [idempotency] → retry → breaker, their
state and the SQLite store (a file in a temporary directory, as in production). Modes: the default policy
(write_unsafe: idempotency on) and echo marked read_only. ``--profile`` prints a cProfile of the default mode.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.ops.logs import configure_logging
from resilient_mcp.proxy.pipeline import Pipeline
from tests.harness import proxied

ECHO = types.Tool(
    name="echo", input_schema={"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
)


class CannedPipeline(Pipeline):
    """The real pipeline, but the terminal answers at once instead of calling the upstream."""

    async def _terminal(self, call: ToolCall) -> types.CallToolResult:
        args = call.arguments or {}
        return types.CallToolResult(content=[types.TextContent(text=str(args.get("message", "")))])


def upstream() -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[ECHO])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="unused")])

    return Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)


async def measure(policy: dict[str, Any], calls: int, profile: cProfile.Profile | None) -> float:
    with tempfile.TemporaryDirectory(prefix="rmcp-chain-") as state:
        async with proxied({"up": upstream()}, policy, config={"state_dir": state}, pipeline=CannedPipeline) as h:
            compiled = h.proxy.routing.chains["echo"]
            entry, tag = compiled.entry, uuid.uuid4().hex

            def call(i: int) -> ToolCall:
                return ToolCall(
                    name="echo",
                    arguments={"message": f"{tag}-{i}"},
                    upstream=entry.upstream,
                    upstream_tool=entry.name,
                    rule=compiled.rule,
                    tool=entry.tool,
                    session_id="bench",
                    call_id=str(i),
                )

            for i in range(100):
                await compiled.chain(call(-i - 1))
            if profile is not None:
                profile.enable()
            started = time.perf_counter()
            for i in range(calls):
                result = await compiled.chain(call(i))
                assert not result.is_error, result
            elapsed = time.perf_counter() - started
            if profile is not None:
                profile.disable()
            return elapsed / calls * 1e6


async def run(args: argparse.Namespace) -> None:
    configure_logging("info", "json")  # as the CLI does by default: per-call events are debug, not rendered
    unlimited = {"session": {"max_tool_calls": None}}
    modes = {
        "default (write_unsafe, idempotency on)": unlimited,
        "echo read_only (no idempotency)": {**unlimited, "tools": {"echo": {"effect": "read_only"}}},
    }
    profile = cProfile.Profile() if args.profile else None
    for i, (name, policy) in enumerate(modes.items()):
        us = await measure(policy, args.calls, profile if i == 0 else None)
        print(f"{name:<42} {us:8.1f} µs per call")
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--profile", action="store_true", help="cProfile the default mode")
    anyio.run(run, p.parse_args())


if __name__ == "__main__":
    main()
