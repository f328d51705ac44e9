"""The direct point of ``latency.py``'s HTTP load: an ``echo`` tool served by the MCP SDK over streamable HTTP.

A low-level ``Server`` (the same ``echo`` as ``raw_upstream.py``: its ``message`` back as text) behind the SDK's own
``streamable_http_app`` (stateful sessions, SSE responses, as a default SDK server runs), on 127.0.0.1 only.

    python benchmarks/sdk_http_server.py --port PORT [--run-id ID]
"""

from __future__ import annotations

import argparse
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server import Server

ECHO = types.Tool(
    name="echo",
    description="Echo the message back.",
    input_schema={"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
)


def build() -> Server[Any]:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[ECHO])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = str((params.arguments or {}).get("message", ""))
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server("sdk-http-echo", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--run-id", default="")  # only marks the process as this run's (``bench_procs.reap_leftovers``)
    args = p.parse_args()
    app = build().streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
