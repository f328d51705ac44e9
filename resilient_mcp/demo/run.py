"""``resilient-mcp demo``: the bundled order-book server, called directly and through the proxy, side by side.

Everything runs on this machine: the example upstream is a stdio subprocess (``python -m
resilient_mcp.demo.upstream``), one copy called directly (as a host would without the proxy), one behind the proxy,
which runs in this process; both clients speak real JSON-RPC. Each step prints what the agent asked and what it got
back each way. The demo's output goes to stdout (it is a command, not an MCP server); logs go to stderr.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from ..host.server import build_server
from ..policy import Policy, PolicyFile
from ..policy.config import ProxyConfig
from ..proxy.pipeline import Pipeline
from ..proxy.proxy import Proxy
from ..verdict.observations import INSTRUCTIONS

DIRECT_TIMEOUT_S = 3.0
"""The host's own timeout for a tool call in the direct runs (hosts have one; the SDK's default is none). It bounds
calls only: starting the server and ``initialize`` get ``START_TIMEOUT_S``, as in a host, so a slow machine does not
turn a server start into a failed step."""
START_TIMEOUT_S = 60.0
"""How long one direct step may take in all: starting a fresh Python server, ``initialize``, the call."""
ATTEMPT_TIMEOUT_S = 1.0
"""The proxy's per-attempt timeout of ``lookup_order`` in the demo's policy (the hanging read's)."""

DEMO_POLICY: dict[str, Any] = {
    "upstreams": {
        "orders": {
            "trust_annotations": True,
            "tools": {
                "create_order": {"verify_with": {"tool": "search_orders", "args": {"customer": "{customer}"}}},
                "lookup_order": {"timeouts": {"attempt_s": ATTEMPT_TIMEOUT_S}},
            },
        }
    },
    "defaults": {"retry": {"backoff_base_ms": 20, "backoff_cap_ms": 200}},
}

Caller = Any  # an object with ``call_tool(name, args)``: mcp.Client


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _upstream_params(ledger: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "resilient_mcp.demo.upstream"], env={"DEMO_LEDGER": str(ledger)}
    )


def _summary(result: types.CallToolResult, max_lines: int = 8) -> list[str]:
    lines: list[str] = []
    size = sum(len(c.text.encode()) for c in result.content if isinstance(c, types.TextContent))
    for block in result.content:
        if isinstance(block, types.TextContent):
            shown = block.text.splitlines()
            if len(shown) > max_lines:
                shown = [*shown[: max_lines - 1], f"… [{len(block.text):,} chars in all]"]
            lines.extend("│ " + line for line in shown)
    if size > 20_000:
        lines.append(f"│ ({size:,} bytes of text landed in the agent's context)")
    if result.is_error and result.structured_content:
        obs = result.structured_content
        keys = ("fault_type", "retry_safety", "side_effect_status", "repair_action", "max_retry")
        lines.append("└ observation: " + ", ".join(f"{k}={obs.get(k)}" for k in keys))
    attempts = (result.meta or {}).get("io.github.resilient-mcp/attempts")
    if attempts:
        lines.append("└ absorbed by the proxy: " + ", ".join(f"#{a['n']} {a['outcome']}" for a in attempts))
    return lines


async def _call(client: Caller, tool: str, args: dict[str, Any]) -> list[str]:
    try:
        with anyio.fail_after(START_TIMEOUT_S):
            result = await client.call_tool(tool, args)
    except MCPError as exc:
        lines = [f"✗ JSON-RPC error {exc.code}: {exc.error.message}"]
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        if data.get("repair_action"):
            candidates = (data.get("details") or {}).get("candidates")
            lines.append(f"└ observation: repair_action={data['repair_action']}, candidates={candidates}")
        return lines
    return [("✗ error" if result.is_error else "✓ ok"), *_summary(result)]


async def _step(direct: Caller, proxied: Caller, title: str, tool: str, args: dict[str, Any]) -> None:
    _say(f"\n▶ {title}\n  {tool}({json.dumps(args)})")
    _say("  direct:")
    for line in await _call(direct, tool, args):
        _say("    " + line)
    _say("  through resilient-mcp:")
    for line in await _call(proxied, tool, args):
        _say("    " + line)


@asynccontextmanager
async def _direct(ledger: Path) -> AsyncIterator[Client]:
    async with Client(_upstream_params(ledger), mode="legacy", cache=None) as c:
        yield c


@asynccontextmanager
async def _proxied(tmp: Path) -> AsyncIterator[Client]:
    params = _upstream_params(tmp / "proxied-ledger.json")
    config = ProxyConfig.model_validate(
        {
            "upstreams": {"orders": {"command": params.command, "args": params.args, "env": params.env}},
            "state_dir": str(tmp / "state"),
        }
    )
    proxy = Proxy(config, Policy(PolicyFile.model_validate(DEMO_POLICY)), Pipeline)
    async with proxy.running(), Client(build_server(proxy, instructions=INSTRUCTIONS), mode="legacy", cache=None) as c:
        yield c


class _Direct:
    """The server called without the proxy, one connection per step: a server that died in one step is started
    again for the next, as a host would after showing the error (the orders are kept in its ledger file)."""

    def __init__(self, ledger: Path) -> None:
        self.ledger = ledger

    async def call_tool(self, tool: str, args: dict[str, Any]) -> types.CallToolResult:
        error: MCPError | None = None
        async with _direct(self.ledger) as client:
            try:
                return await client.call_tool(tool, args, read_timeout_seconds=DIRECT_TIMEOUT_S)
            except MCPError as exc:  # raised out of the client's task group, it would arrive as a group
                error = exc
        raise error


async def run_demo() -> int:
    with tempfile.TemporaryDirectory(prefix="resilient-mcp-demo-") as name:
        tmp = Path(name)
        direct = _Direct(tmp / "direct-ledger.json")
        async with _proxied(tmp) as proxied:
            await _script(direct, proxied)
    return 0


async def _script(direct: Caller, proxied: Caller) -> None:
    _say("resilient-mcp demo: an order-book MCP server, called directly and through the proxy.")
    tools = (await proxied.list_tools()).tools
    _say(f"\n▶ tools/list through the proxy: {len(tools)} tools, advertised unchanged")
    for tool in tools:
        _say(f"    {tool.name}: {tool.description}")
    await _step(
        direct,
        proxied,
        "Invalid arguments: the proxy answers before anything is sent, with every fix",
        "create_order",
        {"customer": "ada", "sku": "banana", "qty": "two"},
    )
    await _step(direct, proxied, "A typo in a tool name", "lookup_ordr", {"order_id": "ord-1"})
    await _step(
        direct,
        proxied,
        "A read that hangs once (the host gives up after "
        f"{DIRECT_TIMEOUT_S:.0f} s; the proxy's attempt timeout is {ATTEMPT_TIMEOUT_S:.0f} s, then it retries "
        "the read)",
        "lookup_order",
        {"order_id": "ord-1-slow"},
    )
    await _step(
        direct,
        proxied,
        "A read that fails transiently: absorbed by the proxy's retry",
        "lookup_order",
        {"order_id": "ord-2-flaky"},
    )
    await _step(
        direct,
        proxied,
        "A write whose server dies after committing: never retried; the agent is told to verify first",
        "create_order",
        {"customer": "bob", "sku": "pear", "qty": 1, "client_ref": "r-2-crash"},
    )
    await _step(
        direct,
        proxied,
        "Verifying, as the observation said: the order exists exactly once",
        "search_orders",
        {"customer": "bob"},
    )
    await _step(
        direct,
        proxied,
        "A 5 MB result: the proxy caps it (valid text, a note, the rest readable in pages)",
        "sales_report",
        {"rows": 190_000},
    )
    await _step(
        direct,
        proxied,
        "The same bad call again: the loop guard answers without calling the server",
        "create_order",
        {"customer": "ada", "sku": "banana", "qty": "two"},
    )
    _say("\nDone. Put `resilient-mcp wrap -- <your server>` in your MCP host's config to get the same guards.")
