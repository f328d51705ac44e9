"""The chaos server's tools: an order service of every effect class, executed against the ``Ledger``.

==================  ==================  ==========================================================
tool                effect              notes
==================  ==================  ==========================================================
get_order           read_only           by order_id or client_ref; the verify_with of create_order
search              read_only           ``query`` over customers and skus (A3 drifts it to ``q``)
list_orders         read_only           paginated: ``cursor`` / ``next_cursor``
get_stock           read_only           has an outputSchema (E2, E5)
export_orders       read_only           output grows with ``rows`` (E4)
create_order        write_unsafe        each call creates an order (committed per client_ref)
update_order        write_unsafe        optimistic lock on ``version`` (a stale one: D5 aborted)
set_status          write_idempotent    same status twice = one effect
delete_order        destructive
==================  ==================  ==========================================================

Business failures (an unknown order, a stale version) are ``ToolError``s: the server shows them as ``isError``
results with the typed hint, as a convention-following server would. The other domains' surfaces (files, calendar,
tickets: ``domains/``) follow the same conventions and use the helpers here.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from .ledger import SKUS, Ledger


class ToolError(Exception):
    """A failure of the tool's own logic: ``type`` is the typed hint's type."""

    def __init__(
        self, type_: str, message: str, *, retryable: bool = False, field: str | None = None, **extra: Any
    ) -> None:
        super().__init__(message)
        self.type, self.message, self.retryable, self.field, self.extra = type_, message, retryable, field, extra


def object_schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


NONEMPTY = {"type": "string", "minLength": 1}
READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE_UNSAFE = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
WRITE_IDEMPOTENT = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
DESTRUCTIVE = types.ToolAnnotations(read_only_hint=False, destructive_hint=True)
OP_KEYS = {
    "create_order": "client_ref",
    "update_order": "order_id",
    "set_status": "order_id",
    "delete_order": "order_id",
}
"""Write tool -> the argument that names its logical operation in the ledger ("create_order:R1")."""
STOCK_OUTPUT = object_schema(
    {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 0}, "updated_at": {"type": "string"}},
    ["sku", "quantity", "updated_at"],
)


def default_tools() -> list[types.Tool]:
    """A fresh copy of the tool list (the server mutates its own for A2/A3/F4)."""
    return [*_read_tools(), *_write_tools()]


def _read_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="get_order",
            description="Look up one order by order_id or by your client_ref.",
            input_schema={
                "type": "object",
                "properties": {"order_id": NONEMPTY, "client_ref": NONEMPTY},
                "additionalProperties": False,
                "minProperties": 1,
            },
            annotations=READ,
        ),
        types.Tool(
            name="search",
            description="Search orders by customer or sku.",
            input_schema=object_schema({"query": NONEMPTY}, ["query"]),
            annotations=READ,
        ),
        types.Tool(
            name="list_orders",
            description="All orders, a page at a time (pass next_cursor back as cursor).",
            input_schema=object_schema(
                {"cursor": {"type": "string"}, "page_size": {"type": "integer", "minimum": 1, "maximum": 100}}, []
            ),
            annotations=READ,
        ),
        types.Tool(
            name="get_stock",
            description="Units in stock of one sku.",
            input_schema=object_schema({"sku": {"type": "string", "enum": list(SKUS)}}, ["sku"]),
            output_schema=STOCK_OUTPUT,
            annotations=READ,
        ),
        types.Tool(
            name="export_orders",
            description="A CSV export with `rows` lines (large).",
            input_schema=object_schema({"rows": {"type": "integer", "minimum": 1, "maximum": 10_000_000}}, []),
            annotations=READ,
        ),
    ]


def _write_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="create_order",
            description="Create an order. Not idempotent: each call creates one.",
            input_schema=object_schema(
                {
                    "customer": NONEMPTY,
                    "sku": {"type": "string", "enum": list(SKUS)},
                    "qty": {"type": "integer", "minimum": 1},
                    "client_ref": NONEMPTY,
                },
                ["customer", "sku", "qty", "client_ref"],
            ),
            annotations=WRITE_UNSAFE,
        ),
        types.Tool(
            name="update_order",
            description="Change an order's qty; `version` must be the current one.",
            input_schema=object_schema(
                {
                    "order_id": NONEMPTY,
                    "qty": {"type": "integer", "minimum": 1},
                    "version": {"type": "integer", "minimum": 1},
                },
                ["order_id", "qty", "version"],
            ),
            annotations=WRITE_UNSAFE,
        ),
        types.Tool(
            name="set_status",
            description="Set an order's status.",
            input_schema=object_schema(
                {"order_id": NONEMPTY, "status": {"type": "string", "enum": ["open", "shipped", "cancelled"]}},
                ["order_id", "status"],
            ),
            annotations=WRITE_IDEMPOTENT,
        ),
        types.Tool(
            name="delete_order",
            description="Delete an order for good.",
            input_schema=object_schema({"order_id": NONEMPTY}, ["order_id"]),
            annotations=DESTRUCTIVE,
        ),
    ]


def ok(text: str, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


def paged(items: list[dict[str, Any]], args: dict[str, Any], key: str, **extra: Any) -> types.CallToolResult:
    """One page of ``items`` under ``key`` (``cursor`` / ``page_size`` in, ``next_cursor`` out), as JSON text and
    structured content."""
    try:
        start = int(args.get("cursor") or 0)
    except ValueError:
        raise ToolError("invalid_argument", f"invalid cursor {args.get('cursor')!r}", field="cursor") from None
    size = int(args.get("page_size", 10))
    nxt = str(start + size) if start + size < len(items) else None
    body = {**extra, key: items[start : start + size], "next_cursor": nxt}
    return ok(json.dumps(body), body)


def stale(what: str, sent: Any, current: int) -> ToolError:
    """D5 as a server shows it: the optimistic lock's ``version`` is not the current one."""
    return ToolError(
        "aborted",
        f"version {sent} is stale; the {what} is at {current}",
        field="version",
        current_version=current,
    )


def _order(ledger: Ledger, order_id: Any) -> dict[str, Any]:
    found = ledger.orders.get(str(order_id))
    if found is None:
        raise ToolError("not_found", f"no order {order_id}", field="order_id")
    return found


def execute(name: str, args: dict[str, Any], ledger: Ledger) -> types.CallToolResult:
    """Run one tool (its effect happens here). Raises ``ToolError`` for business failures."""
    if name == "get_order":
        if "order_id" in args:
            return ok(json.dumps(o := _order(ledger, args["order_id"])), o)
        found = ledger.orders_with_ref(str(args.get("client_ref")))
        if not found:
            raise ToolError("not_found", f"no order with client_ref {args.get('client_ref')}", field="client_ref")
        return ok(json.dumps(found), {"orders": found})
    if name == "search":
        q = str(args.get("query", args.get("q", ""))).lower()
        hits = [o for o in ledger.orders.values() if q in o["customer"].lower() or q in o["sku"]]
        hits = hits[: int(args.get("limit", 50))]
        return ok(json.dumps(hits), {"orders": hits})
    if name == "list_orders":
        return _page(ledger, args)
    if name == "get_stock":
        stock = {"sku": args["sku"], "quantity": ledger.stock.get(args["sku"], 0), "updated_at": "2026-11-30T12:00:00Z"}
        return ok(json.dumps(stock), stock)
    if name == "export_orders":
        line = "ord-0,alice,apple,1,open\n"
        return ok("order_id,customer,sku,qty,status\n" + line * int(args.get("rows", 100)))
    return _write(name, args, ledger)


def _page(ledger: Ledger, args: dict[str, Any]) -> types.CallToolResult:
    ids = sorted(ledger.orders, key=lambda k: int(k.split("-")[1]))
    try:
        start = int(args.get("cursor") or 0)
    except ValueError:
        raise ToolError("invalid_argument", f"invalid cursor {args.get('cursor')!r}", field="cursor") from None
    size = int(args.get("page_size", 10))
    page = [ledger.orders[k] for k in ids[start : start + size]]
    nxt = str(start + size) if start + size < len(ids) else None
    return ok(json.dumps({"orders": page, "next_cursor": nxt}), {"orders": page, "next_cursor": nxt})


def _write(name: str, args: dict[str, Any], ledger: Ledger) -> types.CallToolResult:
    if name == "create_order":
        oid = ledger.new_order_id()
        order = {
            "order_id": oid,
            "version": 1,
            "status": "open",
            **{k: args[k] for k in ("customer", "sku", "qty", "client_ref")},
        }
        ledger.orders[oid] = order
        ledger.commit(name, str(args["client_ref"]), args)
        return ok(f"created {oid}", order)
    order = _order(ledger, args.get("order_id"))
    if name == "update_order":
        if int(args["version"]) != order["version"]:
            raise stale("order", args["version"], order["version"])
        order.update(qty=args["qty"], version=order["version"] + 1)
    elif name == "set_status":
        if order["status"] == args["status"]:
            return ok(f"{order['order_id']} already {args['status']}", order)
        order.update(status=args["status"], version=order["version"] + 1)
    elif name == "delete_order":
        del ledger.orders[order["order_id"]]
    else:
        raise ToolError("not_found", f"unknown tool {name}")
    ledger.commit(name, order["order_id"], args)
    return ok(f"{name} {order['order_id']}: done", order)
