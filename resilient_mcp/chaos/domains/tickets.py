"""The tickets surface: a helpdesk queue of every effect class (``--domain tickets``).

==================  ==================  ==========================================================
tool                effect              notes
==================  ==================  ==========================================================
get_ticket          read_only           by ticket_id or client_ref; the verify_with of the writes
search_tickets      read_only           has an outputSchema (E2, E5: ``total`` ``minimum: 0``)
create_ticket       write_unsafe        each call creates a ticket (committed per client_ref)
set_priority        write_idempotent    the same priority twice = one effect
assign              write_idempotent    the same assignee twice = one effect
add_comment         write_unsafe        each call adds the comment again (committed per ticket)
close_ticket        destructive         closing a closed ticket: failed_precondition
==================  ==================  ==========================================================

Records live in ``ledger.records["tickets"]`` keyed by ticket id ("TCK-102").
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from ..ledger import Ledger
from ..tools import DESTRUCTIVE, NONEMPTY, READ, WRITE_IDEMPOTENT, WRITE_UNSAFE, ToolError, object_schema, ok

COLLECTION = "tickets"
PRIORITIES = ["low", "normal", "high", "urgent"]
PRIORITY = {"type": "string", "enum": PRIORITIES}
SEARCH_OUTPUT = object_schema(
    {
        "tickets": {"type": "array", "items": {"type": "object"}},
        "total": {"type": "integer", "minimum": 0},
        "as_of": {"type": "string"},
    },
    ["tickets", "total", "as_of"],
)
OP_KEYS = {
    "create_ticket": "client_ref",
    "set_priority": "ticket_id",
    "assign": "ticket_id",
    "add_comment": "ticket_id",
    "close_ticket": "ticket_id",
}
SEED: list[tuple[str, str, str, str | None, str]] = [
    ("TCK-101", "Login fails with SSO on mobile", "high", "sam", "open"),
    ("TCK-102", "Login page slow after the release", "normal", None, "open"),
    ("TCK-103", "Printer on floor 2 offline", "low", None, "open"),
    ("TCK-104", "Duplicate invoices sent to a customer", "high", "dana", "open"),
    ("TCK-105", "Audit old login records", "low", None, "closed"),
]


def ticket(ticket_id: str, title: str, priority: str, assignee: str | None, status: str, **more: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ticket_id": ticket_id,
        "title": title,
        "priority": priority,
        "assignee": assignee,
        "status": status,
        "comments": [],
        "client_ref": f"seed-{ticket_id}",
    }
    return base | more


def seed(ledger: Ledger) -> None:
    ledger.records[COLLECTION] = {t[0]: ticket(*t) for t in SEED}


def tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="get_ticket",
            description="One ticket by ticket_id, or the tickets created with your client_ref.",
            input_schema={
                "type": "object",
                "properties": {"ticket_id": NONEMPTY, "client_ref": NONEMPTY},
                "additionalProperties": False,
                "minProperties": 1,
            },
            annotations=READ,
        ),
        types.Tool(
            name="search_tickets",
            description="Tickets whose title contains `query` (case-insensitive), optionally only open or closed.",
            input_schema=object_schema(
                {"query": NONEMPTY, "status": {"type": "string", "enum": ["open", "closed"]}}, ["query"]
            ),
            output_schema=SEARCH_OUTPUT,
            annotations=READ,
        ),
        types.Tool(
            name="create_ticket",
            description="Open a ticket. Not idempotent: each call opens one.",
            input_schema=object_schema(
                {"title": NONEMPTY, "priority": PRIORITY, "client_ref": NONEMPTY}, ["title", "priority", "client_ref"]
            ),
            annotations=WRITE_UNSAFE,
        ),
        types.Tool(
            name="set_priority",
            description="Set a ticket's priority.",
            input_schema=object_schema({"ticket_id": NONEMPTY, "priority": PRIORITY}, ["ticket_id", "priority"]),
            annotations=WRITE_IDEMPOTENT,
        ),
        types.Tool(
            name="assign",
            description="Assign a ticket to someone.",
            input_schema=object_schema({"ticket_id": NONEMPTY, "assignee": NONEMPTY}, ["ticket_id", "assignee"]),
            annotations=WRITE_IDEMPOTENT,
        ),
        types.Tool(
            name="add_comment",
            description="Add a comment to a ticket. Not idempotent: each call adds one.",
            input_schema=object_schema({"ticket_id": NONEMPTY, "body": NONEMPTY}, ["ticket_id", "body"]),
            annotations=WRITE_UNSAFE,
        ),
        types.Tool(
            name="close_ticket",
            description="Close a ticket for good (the requester is notified).",
            input_schema=object_schema({"ticket_id": NONEMPTY}, ["ticket_id"]),
            annotations=DESTRUCTIVE,
        ),
    ]


def tickets(ledger: Ledger) -> dict[str, dict[str, Any]]:
    return ledger.collection(COLLECTION)


def search(ledger: Ledger, query: str, status: str | None = None) -> list[dict[str, Any]]:
    q = query.lower()
    found = [t for t in tickets(ledger).values() if q in t["title"].lower() and status in (None, t["status"])]
    return sorted(found, key=lambda t: t["ticket_id"])


def _ticket(ledger: Ledger, ticket_id: Any) -> dict[str, Any]:
    found = tickets(ledger).get(str(ticket_id))
    if found is None:
        raise ToolError("not_found", f"ticket {ticket_id} does not exist", field="ticket_id")
    return found


def execute(name: str, args: dict[str, Any], ledger: Ledger) -> types.CallToolResult:
    """Run one tickets tool (its effect happens here). Raises ``ToolError`` for business failures."""
    if name == "get_ticket":
        if "ticket_id" in args:
            t = _ticket(ledger, args["ticket_id"])
            return ok(json.dumps(t), t)
        found = [t for t in tickets(ledger).values() if t["client_ref"] == args.get("client_ref")]
        if not found:
            raise ToolError("not_found", f"no ticket with client_ref {args.get('client_ref')}", field="client_ref")
        return ok(json.dumps(found), {"tickets": found})
    if name == "search_tickets":
        hits = search(ledger, str(args["query"]), args.get("status"))
        body = {"tickets": hits, "total": len(hits), "as_of": "2026-12-01T08:00:00Z"}
        return ok(json.dumps(body), body)
    return _write(name, args, ledger)


def _write(name: str, args: dict[str, Any], ledger: Ledger) -> types.CallToolResult:
    if name == "create_ticket":
        tid = f"TCK-{ledger.new_number(COLLECTION)}"
        t = tickets(ledger)[tid] = ticket(
            tid, args["title"], args["priority"], None, "open", client_ref=args["client_ref"]
        )
        ledger.commit(name, str(args["client_ref"]), args)
        return ok(f"opened {tid}", t)
    t = _ticket(ledger, args["ticket_id"])
    if t["status"] == "closed":
        raise ToolError("failed_precondition", f"ticket {t['ticket_id']} is closed", field="ticket_id")
    if name in ("set_priority", "assign"):
        field = "priority" if name == "set_priority" else "assignee"
        if t[field] == args[field]:
            return ok(f"{t['ticket_id']} already has {field} {args[field]}", t)
        t[field] = args[field]
    elif name == "add_comment":
        t["comments"].append(args["body"])
    elif name == "close_ticket":
        t["status"] = "closed"
    else:
        raise ToolError("not_found", f"unknown tool {name}")
    ledger.commit(name, t["ticket_id"], args)
    return ok(f"{name} {t['ticket_id']}: done", t)
