"""The calendar surface: one person's calendar of every effect class (``--domain calendar``).

==================  ==================  ==========================================================
tool                effect              notes
==================  ==================  ==========================================================
list_events         read_only           one day's events by start time, paginated
get_event           read_only           by event_id or client_ref; the verify_with of create_event
find_free_slot      read_only           has an outputSchema (E2, E5: ``free_minutes`` ``minimum: 0``)
create_event        write_unsafe        each call creates an event (committed per client_ref)
reschedule_event    write_unsafe        optimistic lock on ``version`` (a stale one: D5 aborted)
cancel_event        destructive         the event stays, cancelled; cancelling twice: failed_precondition
==================  ==================  ==========================================================

Records live in ``ledger.records["events"]`` keyed by event id ("evt-2"); the working day is 09:00-17:00.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from ..ledger import Ledger
from ..tools import DESTRUCTIVE, NONEMPTY, READ, WRITE_UNSAFE, ToolError, object_schema, ok, paged, stale

COLLECTION = "events"
DAY = {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}
TIME = {"type": "string", "pattern": "^([01]\\d|2[0-3]):[0-5]\\d$"}
MINUTES = {"type": "integer", "minimum": 15, "maximum": 480}
OPEN, CLOSE = 9 * 60, 17 * 60
SLOT_OUTPUT = object_schema(
    {
        "day": {"type": "string"},
        "start": {"type": "string"},
        "free_minutes": {"type": "integer", "minimum": 0},
        "checked_at": {"type": "string"},
    },
    ["day", "start", "free_minutes", "checked_at"],
)
OP_KEYS = {"create_event": "client_ref", "reschedule_event": "event_id", "cancel_event": "event_id"}
SEED: list[tuple[str, str, str, str, int]] = [
    ("evt-1", "Standup", "2026-12-01", "09:00", 15),
    ("evt-2", "Budget review", "2026-12-01", "10:00", 60),
    ("evt-3", "Lunch with Sam", "2026-12-01", "12:00", 60),
    ("evt-4", "1:1 with Dana", "2026-12-02", "09:30", 30),
]


def event(event_id: str, title: str, day: str, start: str, minutes: int, **more: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "event_id": event_id,
        "title": title,
        "day": day,
        "start": start,
        "minutes": minutes,
        "version": 1,
        "status": "confirmed",
        "client_ref": f"seed-{event_id}",
    }
    return base | more


def seed(ledger: Ledger) -> None:
    ledger.records[COLLECTION] = {e[0]: event(*e) for e in SEED}


def tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="list_events",
            description="The events of one day (YYYY-MM-DD) by start time, a page at a time.",
            input_schema=object_schema(
                {
                    "day": DAY,
                    "cursor": {"type": "string"},
                    "page_size": {"type": "integer", "minimum": 1, "maximum": 50},
                },
                ["day"],
            ),
            annotations=READ,
        ),
        types.Tool(
            name="get_event",
            description="One event by event_id, or the events created with your client_ref.",
            input_schema={
                "type": "object",
                "properties": {"event_id": NONEMPTY, "client_ref": NONEMPTY},
                "additionalProperties": False,
                "minProperties": 1,
            },
            annotations=READ,
        ),
        types.Tool(
            name="find_free_slot",
            description="The first free slot of at least `minutes` on a day (working hours 09:00-17:00).",
            input_schema=object_schema({"day": DAY, "minutes": MINUTES}, ["day", "minutes"]),
            output_schema=SLOT_OUTPUT,
            annotations=READ,
        ),
        types.Tool(
            name="create_event",
            description="Create an event. Not idempotent: each call creates one.",
            input_schema=object_schema(
                {"title": NONEMPTY, "day": DAY, "start": TIME, "minutes": MINUTES, "client_ref": NONEMPTY},
                ["title", "day", "start", "minutes", "client_ref"],
            ),
            annotations=WRITE_UNSAFE,
        ),
        types.Tool(
            name="reschedule_event",
            description="Move an event to another start time; `version` must be the current one.",
            input_schema=object_schema(
                {"event_id": NONEMPTY, "start": TIME, "day": DAY, "version": {"type": "integer", "minimum": 1}},
                ["event_id", "start", "version"],
            ),
            annotations=WRITE_UNSAFE,
        ),
        types.Tool(
            name="cancel_event",
            description="Cancel an event (its attendees are told; it cannot be undone).",
            input_schema=object_schema({"event_id": NONEMPTY}, ["event_id"]),
            annotations=DESTRUCTIVE,
        ),
    ]


def events(ledger: Ledger) -> dict[str, dict[str, Any]]:
    return ledger.collection(COLLECTION)


def minutes_of(hhmm: str) -> int:
    h, m = hhmm.split(":")
    return int(h) * 60 + int(m)


def hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def on_day(ledger: Ledger, day: str) -> list[dict[str, Any]]:
    return sorted((e for e in events(ledger).values() if e["day"] == day), key=lambda e: (e["start"], e["event_id"]))


def free_slot(ledger: Ledger, day: str, minutes: int) -> dict[str, Any] | None:
    """The first gap of at least ``minutes`` between confirmed events in working hours: its start and length."""
    t = OPEN
    for e in on_day(ledger, day):
        if e["status"] != "confirmed":
            continue
        start = minutes_of(e["start"])
        if start - t >= minutes:
            return {"day": day, "start": hhmm(t), "free_minutes": start - t}
        t = max(t, start + int(e["minutes"]))
    if CLOSE - t >= minutes:
        return {"day": day, "start": hhmm(t), "free_minutes": CLOSE - t}
    return None


def _event(ledger: Ledger, event_id: Any) -> dict[str, Any]:
    found = events(ledger).get(str(event_id))
    if found is None:
        raise ToolError("not_found", f"event {event_id} not found", field="event_id")
    return found


def execute(name: str, args: dict[str, Any], ledger: Ledger) -> types.CallToolResult:
    """Run one calendar tool (its effect happens here). Raises ``ToolError`` for business failures."""
    if name == "list_events":
        return paged(on_day(ledger, str(args["day"])), args, "events", day=args["day"])
    if name == "get_event":
        if "event_id" in args:
            e = _event(ledger, args["event_id"])
            return ok(json.dumps(e), e)
        found = [e for e in events(ledger).values() if e["client_ref"] == args.get("client_ref")]
        if not found:
            raise ToolError("not_found", f"no event with client_ref {args.get('client_ref')}", field="client_ref")
        return ok(json.dumps(found), {"events": found})
    if name == "find_free_slot":
        slot = free_slot(ledger, str(args["day"]), int(args["minutes"]))
        if slot is None:
            raise ToolError("not_found", f"no free slot of {args['minutes']} minutes on {args['day']}", field="day")
        slot["checked_at"] = "2026-12-01T08:00:00Z"
        return ok(json.dumps(slot), slot)
    return _write(name, args, ledger)


def _write(name: str, args: dict[str, Any], ledger: Ledger) -> types.CallToolResult:
    if name == "create_event":
        eid = f"evt-{ledger.new_number(COLLECTION)}"
        fields = {k: args[k] for k in ("title", "day", "start", "minutes", "client_ref")}
        e = events(ledger)[eid] = event(eid, **fields)
        ledger.commit(name, str(args["client_ref"]), args)
        return ok(f"created {eid}", e)
    e = _event(ledger, args["event_id"])
    if name == "reschedule_event":
        if int(args["version"]) != e["version"]:
            raise stale("event", args["version"], e["version"])
        if e["status"] != "confirmed":
            raise ToolError("failed_precondition", f"event {e['event_id']} is {e['status']}", field="event_id")
        e.update(start=args["start"], day=args.get("day", e["day"]), version=e["version"] + 1)
    elif name == "cancel_event":
        if e["status"] == "cancelled":
            raise ToolError("failed_precondition", f"event {e['event_id']} is already cancelled", field="event_id")
        e.update(status="cancelled", version=e["version"] + 1)
    else:
        raise ToolError("not_found", f"unknown tool {name}")
    ledger.commit(name, e["event_id"], args)
    return ok(f"{name} {e['event_id']}: done", e)
