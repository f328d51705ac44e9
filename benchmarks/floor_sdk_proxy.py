"""Floor 2 of ``latency.py --floors``: the MCP SDK on both sides and nothing else. A low-level ``Server`` (over
resilient-mcp's thread-free stdio transport) whose ``tools/call`` handler forwards with ``ClientSession.send_request``
to the raw upstream: no chain, no state, no validation. What any SDK-based proxy pays before doing anything.

    python benchmarks/floor_sdk_proxy.py [ARGS FOR raw_upstream.py]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.server import Server

from resilient_mcp.host.stdio import stdio_transport

RAW = str(Path(__file__).with_name("raw_upstream.py"))


async def main() -> None:
    params = StdioServerParameters(command=sys.executable, args=[RAW, *sys.argv[1:]])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as upstream:
        await upstream.initialize()
        tools = (await upstream.list_tools()).tools

        async def list_tools(ctx: Any, p: types.PaginatedRequestParams) -> types.ListToolsResult:
            return types.ListToolsResult(tools=tools)

        async def call_tool(ctx: Any, p: types.CallToolRequestParams) -> types.CallToolResult:
            request = types.CallToolRequest(params=types.CallToolRequestParams(name=p.name, arguments=p.arguments))
            return await upstream.send_request(request, types.CallToolResult)

        server: Server[Any] = Server("floor-sdk-proxy", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_transport() as (server_read, server_write):
            await server.run(server_read, server_write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
