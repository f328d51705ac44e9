"""A small example MCP server bundled with the package: an order book, for ``resilient-mcp demo`` and the README.

Run it alone with ``python -m resilient_mcp.demo.upstream`` (stdio). Tools of every effect class:

- ``lookup_order(order_id)`` and ``search_orders(customer, limit)``: reads;
- ``create_order(customer, sku, qty, client_ref)``: a write that is not safe to repeat;
- ``sales_report(rows)``: a read whose output can be very large;
- ``slow_count(steps)``: reports progress.

The demo's faults are asked for by arguments, so the demo is deterministic: ``lookup_order`` fails transiently the
first time an id ending in ``-flaky`` is looked up, and hangs (until the caller gives up and cancels the request)
the first time an id ending in ``-slow`` is;
``create_order`` with ``client_ref`` ending in ``-crash``
commits the order and then exits the process before answering. Orders persist in the file named by
``DEMO_LEDGER`` so a restarted process still knows them. Logs go to stderr; stdout is the wire.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

Ctx = ServerRequestContext[Any, Any]

TOOLS = [
    types.Tool(
        name="lookup_order",
        description="Look up one order by its id.",
        input_schema={
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": "The order id, e.g. ord-1"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="search_orders",
        description="Orders of one customer, newest first.",
        input_schema={
            "type": "object",
            "properties": {
                "customer": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
            },
            "required": ["customer"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="create_order",
        description="Create an order. Not idempotent: each call creates a new order.",
        input_schema={
            "type": "object",
            "properties": {
                "customer": {"type": "string"},
                "sku": {"type": "string", "enum": ["apple", "pear", "plum"]},
                "qty": {"type": "integer", "minimum": 1},
                "client_ref": {"type": "string", "description": "Your reference for this order"},
            },
            "required": ["customer", "sku", "qty", "client_ref"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    ),
    types.Tool(
        name="sales_report",
        description="A sales report with one line per row.",
        input_schema={"type": "object", "properties": {"rows": {"type": "integer", "minimum": 1}}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="slow_count",
        description="Counts to `steps`, reporting progress.",
        input_schema={"type": "object", "properties": {"steps": {"type": "integer", "minimum": 1, "maximum": 50}}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
]


class Ledger:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.orders: list[dict[str, Any]] = []
        if path is not None and path.exists():
            self.orders = json.loads(path.read_text() or "[]")

    def add(self, order: dict[str, Any]) -> dict[str, Any]:
        order = {"order_id": f"ord-{len(self.orders) + 1}", **order}
        self.orders.append(order)
        if self.path is not None:
            self.path.write_text(json.dumps(self.orders))
        return order


def _text(text: str, structured: dict[str, Any] | None = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured, is_error=error)


def build_server(ledger: Ledger) -> Server[Any]:
    flaky_seen: set[str] = set()

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "lookup_order":
            oid = str(args.get("order_id", ""))
            if oid.endswith("-slow") and oid not in flaky_seen:
                flaky_seen.add(oid)
                await anyio.sleep_forever()  # ended by the caller's timeout (cancellation or disconnect)
            if oid.endswith("-flaky") and oid not in flaky_seen:
                flaky_seen.add(oid)
                meta = {"io.github.resilient-mcp/error": {"type": "transient", "retryable": True}}
                return types.CallToolResult(
                    content=[types.TextContent(text="database briefly unavailable")], is_error=True, _meta=meta
                )
            found = [o for o in ledger.orders if o["order_id"] == oid]
            return _text(json.dumps(found[0]) if found else f"no order {oid}", found[0] if found else None)
        if params.name == "search_orders":
            mine = [o for o in ledger.orders if o["customer"] == args.get("customer")]
            mine = mine[::-1][: int(args.get("limit", 10))]
            return _text(json.dumps(mine), {"orders": mine})
        if params.name == "create_order":
            order = ledger.add({k: args[k] for k in ("customer", "sku", "qty", "client_ref")})
            if str(args["client_ref"]).endswith("-crash"):
                sys.stderr.write("demo upstream: committed the order, now crashing before answering\n")
                sys.stderr.flush()
                os._exit(3)
            return _text(f"created {order['order_id']}", order)
        if params.name == "sales_report":
            rows = int(args.get("rows", 10))
            line = "2026-11-29,apple,3,1.20,ok\n"
            return _text("date,sku,qty,price,status\n" + line * rows)
        if params.name == "slow_count":
            steps = int(args.get("steps", 3))
            for i in range(1, steps + 1):
                await ctx.session.report_progress(i, steps, f"step {i}")
                await anyio.sleep(0.01)
            return _text(f"counted to {steps}")
        return _text(f"unknown tool {params.name}", error=True)

    return Server("demo-orders", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def _main() -> None:
    ledger_path = os.environ.get("DEMO_LEDGER")
    server = build_server(Ledger(Path(ledger_path) if ledger_path else None))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    anyio.run(_main)


if __name__ == "__main__":
    main()
