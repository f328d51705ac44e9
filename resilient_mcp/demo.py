"""``resilient-mcp demo``: the proxy in front of the bundled order-book server, driven by a scripted client.

Everything runs on this machine: the example upstream is a stdio subprocess (``python -m
resilient_mcp.demo_upstream``), the proxy runs in this process, and the client talks to it over the real JSON-RPC
path. Each step prints what the agent asked, and what it got back through the proxy. The demo's own output goes to
stdout (it is a command, not an MCP server); logs go to stderr.
"""

from __future__ import annotations

import json
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

from .config import ProxyConfig
from .observations import INSTRUCTIONS
from .pipeline import Pipeline
from .policy import Policy, PolicyFile
from .proxy import Proxy
from .server import build_server

DEMO_POLICY: dict[str, Any] = {
    "upstreams": {
        "orders": {
            "trust_annotations": True,
            "tools": {
                "create_order": {"verify_with": {"tool": "search_orders", "args": {"customer": "{customer}"}}},
            },
        }
    },
    "defaults": {"retry": {"backoff_base_ms": 20, "backoff_cap_ms": 200}},
}


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _show(result: types.CallToolResult) -> None:
    for block in result.content:
        if isinstance(block, types.TextContent):
            text = block.text if len(block.text) < 600 else block.text[:600] + f"… [{len(block.text)} chars]"
            _say(textwrap.indent(text, "    │ "))
    if result.is_error and result.structured_content:
        obs = result.structured_content
        keys = ("fault_type", "is_transient", "retry_safety", "side_effect_status", "repair_action", "max_retry")
        _say("    └ observation: " + json.dumps({k: obs.get(k) for k in keys}))
    elif result.meta:
        _say("    └ _meta: " + json.dumps(result.meta)[:300])


async def _step(client: Client, title: str, tool: str, args: dict[str, Any]) -> types.CallToolResult:
    _say(f"\n▶ {title}\n  call {tool}({json.dumps(args)})")
    try:
        result = await client.call_tool(tool, args)
    except MCPError as exc:  # an unknown tool is a JSON-RPC error by the spec, with the observation as its data
        _say(f"  ← JSON-RPC error {exc.code}: {exc.error.message}")
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        candidates = (data.get("details") or {}).get("candidates")
        _say(f"    └ observation: repair_action={data.get('repair_action')}, candidates={candidates}")
        return types.CallToolResult(content=[], is_error=True)
    _say(f"  ← {'ERROR' if result.is_error else 'ok'}")
    _show(result)
    return result


async def run_demo() -> int:
    with tempfile.TemporaryDirectory(prefix="resilient-mcp-demo-") as tmp:
        ledger = Path(tmp) / "ledger.json"
        config = ProxyConfig.model_validate(
            {
                "upstreams": {
                    "orders": {
                        "command": sys.executable,
                        "args": ["-m", "resilient_mcp.demo_upstream"],
                        "env": {"DEMO_LEDGER": str(ledger)},
                    }
                },
                "state_dir": str(Path(tmp) / "state"),
            }
        )
        proxy = Proxy(config, Policy(PolicyFile.model_validate(DEMO_POLICY)), Pipeline)
        async with proxy.running():
            server = build_server(proxy, instructions=INSTRUCTIONS)
            async with Client(server, mode="legacy", cache=None) as client:
                await _script(client)
    return 0


async def _script(client: Client) -> None:
    _say("resilient-mcp demo: an agent's calls to an order-book MCP server, through the proxy.")
    tools = (await client.list_tools()).tools
    _say(f"\n▶ tools/list: {len(tools)} tools, advertised unchanged")
    for tool in tools:
        _say(f"    {tool.name}: {tool.description}")
    await _step(client, "A normal write passes through", "create_order",
                {"customer": "ada", "sku": "apple", "qty": 2, "client_ref": "r-1"})  # fmt: skip
    await _step(client, "Invalid arguments never reach the server; every error comes back with a fix",
                "create_order", {"customer": "ada", "sku": "banana", "qty": "two"})  # fmt: skip
    await _step(client, "A typo in the tool name gets close candidates", "lookup_ordr", {"order_id": "ord-1"})
    await _step(client, "A read that fails transiently is retried by the proxy (see attempts in _meta/logs)",
                "lookup_order", {"order_id": "ord-1-flaky"})  # fmt: skip
    await _step(client, "A write whose server dies after committing is NOT retried: the agent is told to verify",
                "create_order", {"customer": "bob", "sku": "pear", "qty": 1, "client_ref": "r-2-crash"})  # fmt: skip
    await _step(client, "Verifying, as the observation said: exactly one order exists", "search_orders",
                {"customer": "bob"})  # fmt: skip
    await _step(client, "The same failing call again is answered from the last observation (loop guard)",
                "create_order", {"customer": "ada", "sku": "banana", "qty": "two"})  # fmt: skip
    _say("\nDone. Put `resilient-mcp wrap -- <your server>` in your MCP host's config to get the same guards.")


def main() -> None:  # pragma: no cover - exercised through the CLI
    anyio.run(run_demo)
