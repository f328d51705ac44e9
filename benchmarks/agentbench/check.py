"""Ground truth from the ledger: the facts a read must report, and whether the writes left the intended state.

Facts are named ``kind:key``: ``stock:apple`` (units in stock), ``qty:ord-2`` (an order's quantity, readable from
get_order, search or list_orders), ``count:bob`` (orders a search for "bob" finds), ``header`` (the first line of an
export). ``extract`` reads a fact from what a tool returned (structured content first, then JSON text) and gives
``MISSING`` when the result does not contain it (an empty or cut result): what an agent that does not fabricate sees.
"""

from __future__ import annotations

import json
from typing import Any

from resilient_mcp.chaos.ledger import Ledger

from .spec import Scenario, Step

MISSING: Any = object()
EXPORT_HEADER = "order_id,customer,sku,qty,status"


def truth(fact: str, ledger: Ledger) -> Any:
    kind, _, key = fact.partition(":")
    if kind == "stock":
        return ledger.stock.get(key, 0)
    if kind == "qty":
        order = ledger.orders.get(key)
        return None if order is None else order["qty"]
    if kind == "count":
        return sum(1 for o in ledger.orders.values() if key in o["customer"].lower() or key in o["sku"])
    if kind == "header":
        return EXPORT_HEADER
    raise ValueError(f"unknown fact {fact!r}")


def _data(structured: dict[str, Any] | None, text: str) -> Any:
    if structured:
        return structured
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return MISSING


def _orders(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, list):
        return [o for o in data if isinstance(o, dict)]
    if isinstance(data, dict):
        if isinstance(data.get("orders"), list):
            return [o for o in data["orders"] if isinstance(o, dict)]
        if "order_id" in data:
            return [data]
    return []


def extract(fact: str, structured: dict[str, Any] | None, text: str) -> Any:
    """The value of ``fact`` in a tool's output, or ``MISSING``."""
    kind, _, key = fact.partition(":")
    if kind == "header":
        first = text.split("\n", 1)[0].strip()
        return first if first.count(",") >= 2 else MISSING
    data = _data(structured, text)
    if kind == "stock":
        value = data.get("quantity") if isinstance(data, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else MISSING
    if kind == "qty":
        found = [o.get("qty") for o in _orders(data) if o.get("order_id") == key]
        return found[0] if found else MISSING
    if kind == "count":
        return len(_orders(data)) if data is not MISSING and isinstance(data, dict | list) else MISSING
    raise ValueError(f"unknown fact {fact!r}")


def operation(step: Step) -> str | None:
    """The ledger operation a write step commits ("create_order:R1"), None for reads."""
    if step.cls == "read_only":
        return None
    key = step.args.get("client_ref") if step.tool == "create_order" else step.args.get("order_id")
    return f"{step.tool.removesuffix('_v2')}:{key}"


def intended_state(scenario: Scenario, ledger: Ledger) -> bool:
    """Whether every write step left the state the user asked for (or, when not to be done, did not happen)."""
    for step in scenario.steps:
        op = operation(step)
        if op is None:
            continue
        wanted = scenario.expected_commits.get(op, 1)
        tool = op.split(":", 1)[0]
        if tool == "create_order":
            orders = ledger.orders_with_ref(str(step.args["client_ref"]))
            if len(orders) != 1 or orders[0]["qty"] != step.args["qty"]:
                return False
        elif tool == "set_status":
            order = ledger.orders.get(str(step.args["order_id"]))
            if order is None or order["status"] != step.args["status"]:
                return False
        elif tool == "update_order":
            order = ledger.orders.get(str(step.args["order_id"]))
            if order is None or order["qty"] != step.args["qty"]:
                return False
        elif tool == "delete_order" and (str(step.args["order_id"]) in ledger.orders) != (wanted == 0):
            return False
    return True


def commit_counts(scenario: Scenario, ledger: Ledger) -> tuple[int, int]:
    """(duplicate side effects: commits beyond the intended count, unintended writes: commits of other operations)."""
    intended = {op: scenario.expected_commits.get(op, 1) for s in scenario.steps if (op := operation(s))}
    duplicates = unintended = 0
    for op, n in ledger.commits.items():
        if intended.get(op):
            duplicates += max(0, n - intended[op])
        else:
            unintended += n
    return duplicates, unintended


def called_operation(tool: str, args: Any) -> str | None:
    """The ledger operation an agent's call of a write tool asks for ("create_order:R1"), None for other tools (and
    for arguments that are not an object: such a call cannot name an operation)."""
    if not isinstance(args, dict):
        return None
    base = tool.removesuffix("_v2")
    if base == "create_order":
        key = args.get("client_ref")
    elif base in ("update_order", "set_status", "delete_order"):
        key = args.get("order_id")
    else:
        return None
    return f"{base}:{key}" if isinstance(key, str | int) and not isinstance(key, bool) else None


def lost_writes(scenario: Scenario, ledger: Ledger, calls: list[tuple[str, Any, bool]]) -> int:
    """Intended writes lost: the agent asked for the write, was answered with a success (so it takes the write as
    done), and the write never reached the ledger: replayed from another call, answered without being sent, or a
    silent no-op. A write the agent saw fail is not lost (it knows; that is a task failure, scored as such)."""
    intended = {op for s in scenario.steps if (op := operation(s)) and scenario.expected_commits.get(op, 1) > 0}
    acknowledged = {op for tool, args, ok in calls if ok and (op := called_operation(tool, args)) in intended}
    return sum(1 for op in acknowledged if not ledger.commits.get(op))
