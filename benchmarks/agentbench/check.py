"""Ground truth from the ledger: the facts a read must report, and whether the writes left the intended state.

Facts are named ``kind:key``: ``stock:apple`` (units in stock), ``qty:ord-2`` (an order's quantity, readable from
get_order, search or list_orders), ``count:bob`` (orders a search for "bob" finds), ``header`` (the first line of an
export). ``extract`` reads a fact from what a tool returned (structured content first, then JSON text) and gives
``MISSING`` when the result does not contain it (an empty or cut result): what an agent that does not fabricate sees.

The held-out domains' facts: ``size:/notes/todo.txt`` (a file's bytes, from stat, read_file or list_dir),
``matches:deadline`` (files containing a word), ``start:evt-2`` (an event's start, from get_event or list_events),
``free:2026-12-01/90`` (the length of the first free slot of 90 minutes that day), ``total:login`` (tickets whose
title has the word, from search_tickets), ``prio:TCK-102`` (a ticket's priority, from get_ticket or search_tickets).
Which argument names a write's logical operation comes from the chaos server's surfaces (``OP_KEYS``).
"""

from __future__ import annotations

import json
from typing import Any

from resilient_mcp.chaos.domains import OP_KEYS
from resilient_mcp.chaos.domains import calendar as cal
from resilient_mcp.chaos.domains import files as fs
from resilient_mcp.chaos.domains import tickets as tix
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
    return _domain_truth(kind, key, ledger)


def _domain_truth(kind: str, key: str, ledger: Ledger) -> Any:
    if kind == "size":
        f = fs.files(ledger).get(key)
        return None if f is None else fs.size(f["content"])
    if kind == "matches":
        return len(fs.matches(ledger, key))
    if kind == "start":
        e = cal.events(ledger).get(key)
        return None if e is None else e["start"]
    if kind == "free":
        day, _, minutes = key.partition("/")
        slot = cal.free_slot(ledger, day, int(minutes))
        return None if slot is None else slot["free_minutes"]
    if kind == "total":
        return len(tix.search(ledger, key))
    if kind == "prio":
        t = tix.tickets(ledger).get(key)
        return None if t is None else t["priority"]
    raise ValueError(f"unknown fact {kind}:{key}")


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
    return _domain_extract(kind, key, data)


_ID = {"size": ("path", "size"), "start": ("event_id", "start"), "prio": ("ticket_id", "priority")}
_NUMBER = {"free": "free_minutes", "total": "total"}


def records(data: Any) -> list[dict[str, Any]]:
    """The records a read returned: the object itself and the objects in its lists (or a list of objects)."""
    if isinstance(data, list):
        return [r for r in data if isinstance(r, dict)]
    if not isinstance(data, dict):
        return []
    inner = [r for v in data.values() if isinstance(v, list) for r in v if isinstance(r, dict)]
    return [data, *inner]


def _domain_extract(kind: str, key: str, data: Any) -> Any:
    if kind in _ID:
        id_field, value_field = _ID[kind]
        found = [r.get(value_field) for r in records(data) if r.get(id_field) == key and value_field in r]
        first = found[0] if found else None
        return first if first is not None and not isinstance(first, bool) else MISSING
    if kind in _NUMBER:
        value = data.get(_NUMBER[kind]) if isinstance(data, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else MISSING
    if kind == "matches":
        hits = data.get("matches") if isinstance(data, dict) else None
        return len(hits) if isinstance(hits, list) else MISSING
    raise ValueError(f"unknown fact {kind}:{key}")


def effect_shown(shows: dict[str, Any] | None, ok: bool, structured: dict[str, Any] | None, text: str) -> bool:
    """Whether a verifying read shows a write: a returned record has every field of ``shows`` (a list field contains
    the value); ``shows`` None: the read failed, the record is gone."""
    if shows is None:
        return not ok
    if not ok:
        return False
    data = _data(structured, text)
    return any(
        all(r.get(k) == v or (isinstance(r.get(k), list) and v in r[k]) for k, v in shows.items())
        for r in records(data)
    )


def operation(step: Step) -> str | None:
    """The ledger operation a write step commits ("create_order:R1"), None for reads."""
    if step.cls == "read_only":
        return None
    tool = step.tool.removesuffix("_v2")
    return f"{tool}:{step.args.get(OP_KEYS[tool])}"


def intended_state(scenario: Scenario, ledger: Ledger) -> bool:
    """Whether every write step left the state the user asked for (or, when not to be done, did not happen)."""
    for step in scenario.steps:
        op = operation(step)
        if op is None:
            continue
        wanted = scenario.expected_commits.get(op, 1)
        tool = op.split(":", 1)[0]
        if tool in _DONE:  # the held-out domains' writes
            if not _DONE[tool](step.args, ledger, wanted):
                return False
            continue
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


def _one(found: list[dict[str, Any]], **fields: Any) -> bool:
    return len(found) == 1 and all(found[0].get(k) == v for k, v in fields.items())


def _by_ref(collection: dict[str, dict[str, Any]], ref: Any) -> list[dict[str, Any]]:
    return [r for r in collection.values() if r.get("client_ref") == ref]


def _field(collection: dict[str, dict[str, Any]], key: Any, name: str) -> Any:
    return collection.get(str(key), {}).get(name, MISSING)


_DONE: dict[str, Any] = {  # write tool -> (args, ledger, wanted commits) -> the intended state holds
    "write_file": lambda a, lg, w: _field(fs.files(lg), a["path"], "content") == a["content"],
    "append_line": lambda a, lg, w: str(_field(fs.files(lg), a["path"], "content")).splitlines().count(a["line"]) == 1,
    "move_file": lambda a, lg, w: a["src"] not in fs.files(lg) and a["dest"] in fs.files(lg),
    "delete_file": lambda a, lg, w: (a["path"] in fs.files(lg)) == (w == 0),
    "create_event": lambda a, lg, w: _one(_by_ref(cal.events(lg), a["client_ref"]), day=a["day"], start=a["start"]),
    "reschedule_event": lambda a, lg, w: _field(cal.events(lg), a["event_id"], "start") == a["start"],
    "cancel_event": lambda a, lg, w: (_field(cal.events(lg), a["event_id"], "status") == "cancelled") == (w != 0),
    "create_ticket": lambda a, lg, w: _one(_by_ref(tix.tickets(lg), a["client_ref"]), priority=a["priority"]),
    "set_priority": lambda a, lg, w: _field(tix.tickets(lg), a["ticket_id"], "priority") == a["priority"],
    "assign": lambda a, lg, w: _field(tix.tickets(lg), a["ticket_id"], "assignee") == a["assignee"],
    "add_comment": lambda a, lg, w: (
        list(_field(tix.tickets(lg), a["ticket_id"], "comments") or []).count(a["body"]) == 1
    ),
    "close_ticket": lambda a, lg, w: (_field(tix.tickets(lg), a["ticket_id"], "status") == "closed") == (w != 0),
}


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
    if base not in OP_KEYS:
        return None
    key = args.get(OP_KEYS[base])
    return f"{base}:{key}" if isinstance(key, str | int) and not isinstance(key, bool) else None


def lost_writes(scenario: Scenario, ledger: Ledger, calls: list[tuple[str, Any, bool]]) -> int:
    """Intended writes lost: the agent asked for the write, was answered with a success (so it takes the write as
    done), and the write never reached the ledger: replayed from another call, answered without being sent, or a
    silent no-op. A write the agent saw fail is not lost (it knows; that is a task failure, scored as such)."""
    intended = {op for s in scenario.steps if (op := operation(s)) and scenario.expected_commits.get(op, 1) > 0}
    acknowledged = {op for tool, args, ok in calls if ok and (op := called_operation(tool, args)) in intended}
    return sum(1 for op in acknowledged if not ledger.commits.get(op))
