"""The chaos server's other tool surfaces (``domain: files | calendar | tickets``) keep the order shop's conventions.

Each surface is served in process through the SDK's real JSON-RPC path, as ``test_server.py`` here serves the order
tools: writes are counted in the ledger per logical operation (a duplicate of a non-idempotent write shows as two
commits, an idempotent write repeated as one), optimistic locks and missing records are typed ``isError`` results,
the read with an outputSchema keeps it, and fault rules match each surface's tool names. One test runs
``resilient-mcp chaos-server --domain tickets`` over stdio.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema  # type: ignore[import-untyped]
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from resilient_mcp.chaos.clock import FakeClock
from resilient_mcp.chaos.domains import DESTRUCTIVE_TOOLS, OP_KEYS, SURFACES, surface
from resilient_mcp.chaos.ledger import Ledger, read_ledger
from resilient_mcp.chaos.plan import FaultPlan
from resilient_mcp.chaos.server import ChaosServer
from resilient_mcp.chaos.transports import connect
from resilient_mcp.faults.error_results import ERROR_META_KEY
from tests.helpers import child_env, proxy_argv

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def domain_client(
    domain: str, *rules: dict[str, Any], ledger: Ledger | None = None
) -> AsyncIterator[tuple[Client, ChaosServer]]:
    plan = FaultPlan.model_validate({"rules": list(rules)})
    chaos = ChaosServer(plan, clock=FakeClock(), ledger=ledger, domain=domain)
    with anyio.fail_after(20):
        async with Client(connect(chaos), mode="legacy", cache=None) as client:
            yield client, chaos


async def call(client: Client, name: str, args: dict[str, Any]) -> types.CallToolResult:
    """The result as the proxy's upstream connection gets it (no client-side output validation)."""
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=args))
    return await client.session.send_request(request, types.CallToolResult)


def hint(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    return dict((result.meta or {})[ERROR_META_KEY])


def output_errors(chaos: ChaosServer, tool: str, result: types.CallToolResult) -> list[Any]:
    found = chaos.tool(tool)
    assert found is not None and found.output_schema is not None
    return list(jsonschema.Draft202012Validator(found.output_schema).iter_errors(result.structured_content))


# --- the surfaces ------------------------------------------------------------------------------------------------


async def test_each_domain_lists_its_own_tools_and_orders_stays_the_default() -> None:
    listed = {}
    for domain in SURFACES:
        async with domain_client(domain) as (client, chaos):
            listed[domain] = {t.name for t in (await client.list_tools()).tools}
            assert chaos.server.name == f"chaos-{domain}"
    assert {t.name for t in ChaosServer().tools} == listed["orders"] >= {"get_order", "create_order"}
    assert listed["files"] == {
        "read_file",
        "list_dir",
        "stat",
        "search_files",
        "write_file",
        "append_line",
        "move_file",
        "delete_file",
    }
    assert {"get_event", "find_free_slot", "reschedule_event", "cancel_event"} <= listed["calendar"]
    assert {"get_ticket", "search_tickets", "set_priority", "assign", "add_comment", "close_ticket"} <= listed[
        "tickets"
    ]
    assert not (listed["files"] & listed["calendar"]) and not (listed["calendar"] & listed["tickets"])
    assert {"delete_order", "delete_file", "cancel_event", "close_ticket"} == DESTRUCTIVE_TOOLS
    with pytest.raises(ValueError, match="unknown chaos-server domain 'mail'"):
        ChaosServer(domain="mail")


@pytest.mark.parametrize("domain", ["files", "calendar", "tickets"])
def test_every_write_tool_names_its_operation_and_every_read_with_an_output_schema_is_read_only(domain: str) -> None:
    tools = surface(domain).tools()
    writes = {t.name for t in tools if not (t.annotations and t.annotations.read_only_hint)}
    assert writes == set(surface(domain).op_keys)
    assert all(OP_KEYS[w] in tools[[t.name for t in tools].index(w)].input_schema["properties"] for w in writes)
    with_output = [t for t in tools if t.output_schema]
    assert with_output and all(t.annotations and t.annotations.read_only_hint for t in with_output)


async def test_files_an_append_twice_is_a_duplicate_and_the_same_write_twice_is_one_effect() -> None:
    line = {"path": "/notes/todo.txt", "line": "- call the vendor"}
    async with domain_client("files") as (client, chaos):
        await call(client, "append_line", line)
        await call(client, "append_line", line)
        first = await call(client, "write_file", {"path": "/notes/plan.txt", "content": "v1\n"})
        again = await call(client, "write_file", {"path": "/notes/plan.txt", "content": "v1\n"})
        read = await call(client, "read_file", {"path": "/notes/todo.txt"})
    ledger = chaos.ledger
    assert ledger.commits_for("append_line", "/notes/todo.txt") == 2
    assert read.structured_content is not None and read.structured_content["lines"].count("- call the vendor") == 2
    assert not first.is_error and "unchanged" in again.content[0].text  # type: ignore[union-attr]
    assert ledger.commits_for("write_file", "/notes/plan.txt") == 1


async def test_files_a_stale_version_a_missing_file_and_an_existing_destination_are_typed_failures() -> None:
    async with domain_client("files") as (client, chaos):
        await call(client, "write_file", {"path": "/docs/readme.md", "content": "new\n", "version": 1})
        stale = await call(client, "write_file", {"path": "/docs/readme.md", "content": "newer\n", "version": 1})
        missing = await call(client, "stat", {"path": "/notes/nope.txt"})
        exists = await call(client, "move_file", {"src": "/notes/todo.txt", "dest": "/docs/readme.md"})
        moved = await call(client, "move_file", {"src": "/inbox/scan-7.pdf", "dest": "/archive/scan-7.pdf"})
        gone = await call(client, "delete_file", {"path": "/tmp/old.log"})
        stat = await call(client, "stat", {"path": "/archive/scan-7.pdf"})
    assert hint(stale) == {"type": "aborted", "retryable": False, "field": "version", "current_version": 2}
    assert hint(missing)["type"] == "not_found" and "no such file" in missing.content[0].text  # type: ignore[union-attr]
    assert hint(exists)["type"] == "already_exists"
    assert not moved.is_error and not gone.is_error and not output_errors(chaos, "stat", stat)
    assert set(chaos.ledger.commits) == {
        "write_file:/docs/readme.md",
        "move_file:/inbox/scan-7.pdf",
        "delete_file:/tmp/old.log",
    }
    assert "/tmp/old.log" not in chaos.ledger.records["files"]


async def test_calendar_creates_count_per_client_ref_and_a_reschedule_needs_the_current_version() -> None:
    new = {"title": "Design review", "day": "2026-12-01", "start": "14:00", "minutes": 60, "client_ref": "C-7"}
    async with domain_client("calendar") as (client, chaos):
        await call(client, "create_event", new)
        await call(client, "create_event", new)
        by_ref = await call(client, "get_event", {"client_ref": "C-7"})
        stale = await call(client, "reschedule_event", {"event_id": "evt-2", "start": "15:00", "version": 2})
        moved = await call(client, "reschedule_event", {"event_id": "evt-2", "start": "15:00", "version": 1})
        await call(client, "cancel_event", {"event_id": "evt-1"})
        twice = await call(client, "cancel_event", {"event_id": "evt-1"})
        missing = await call(client, "get_event", {"event_id": "evt-99"})
    assert chaos.ledger.commits_for("create_event", "C-7") == 2
    assert by_ref.structured_content is not None
    assert [e["event_id"] for e in by_ref.structured_content["events"]] == ["evt-5", "evt-6"]
    assert hint(stale) == {"type": "aborted", "retryable": False, "field": "version", "current_version": 1}
    assert moved.structured_content is not None and moved.structured_content["start"] == "15:00"
    assert hint(twice)["type"] == "failed_precondition" and chaos.ledger.commits_for("cancel_event", "evt-1") == 1
    assert hint(missing)["type"] == "not_found"


async def test_calendar_the_free_slot_follows_the_events_and_keeps_its_output_schema() -> None:
    async with domain_client("calendar") as (client, chaos):
        before = await call(client, "find_free_slot", {"day": "2026-12-01", "minutes": 60})
        await call(client, "cancel_event", {"event_id": "evt-2"})
        after = await call(client, "find_free_slot", {"day": "2026-12-01", "minutes": 60})
        none = await call(client, "find_free_slot", {"day": "2026-12-01", "minutes": 480})
    assert before.structured_content is not None and after.structured_content is not None
    assert (before.structured_content["start"], before.structured_content["free_minutes"]) == ("11:00", 60)
    assert (after.structured_content["start"], after.structured_content["free_minutes"]) == ("09:15", 165)
    assert not output_errors(chaos, "find_free_slot", before) and hint(none)["type"] == "not_found"


async def test_tickets_idempotent_writes_commit_once_and_comments_count_every_call() -> None:
    async with domain_client("tickets") as (client, chaos):
        for _ in range(2):
            await call(client, "set_priority", {"ticket_id": "TCK-102", "priority": "urgent"})
            await call(client, "assign", {"ticket_id": "TCK-103", "assignee": "dana"})
            await call(client, "add_comment", {"ticket_id": "TCK-101", "body": "Reproduced"})
        opened = await call(client, "create_ticket", {"title": "Printer jams", "priority": "high", "client_ref": "T-9"})
        search = await call(client, "search_tickets", {"query": "login"})
        await call(client, "close_ticket", {"ticket_id": "TCK-104"})
        closed = await call(client, "assign", {"ticket_id": "TCK-104", "assignee": "sam"})
        missing = await call(client, "get_ticket", {"ticket_id": "TCK-999"})
    commits = chaos.ledger.commits
    assert commits["set_priority:TCK-102"] == 1 and commits["assign:TCK-103"] == 1
    assert commits["add_comment:TCK-101"] == 2 and commits["create_ticket:T-9"] == 1
    assert opened.structured_content is not None and opened.structured_content["ticket_id"] == "TCK-106"
    assert search.structured_content is not None and search.structured_content["total"] == 3
    assert not output_errors(chaos, "search_tickets", search)
    assert hint(closed)["type"] == "failed_precondition" and hint(missing)["type"] == "not_found"


# --- faults by tool name on every surface ------------------------------------------------------------------------

READS = [
    ("files", "stat", {"path": "/notes/todo.txt"}, "size"),
    ("calendar", "find_free_slot", {"day": "2026-12-01", "minutes": 90}, "free_minutes"),
    ("tickets", "search_tickets", {"query": "login"}, "total"),
]


@pytest.mark.parametrize(("domain", "tool", "args", "number"), READS)
async def test_faults_match_each_surfaces_tool_names(domain: str, tool: str, args: dict[str, Any], number: str) -> None:
    rules = [
        {"match": {"tool": tool, "nth_call": 1}, "fault": "D1"},
        {"match": {"tool": tool, "nth_call": 2}, "fault": "E2", "params": {"variant": "missing_field"}},
        {"match": {"tool": tool, "nth_call": 3}, "fault": "E5", "params": {"variant": "negative"}},
    ]
    async with domain_client(domain, *rules) as (client, chaos):
        failed = await call(client, tool, args)
        broken = await call(client, tool, args)
        negative = await call(client, tool, args)
        honest = await call(client, tool, args)
    assert hint(failed)["type"] == "unavailable"
    assert output_errors(chaos, tool, broken) and output_errors(chaos, tool, negative)
    assert negative.structured_content is not None and negative.structured_content[number] < 0
    assert not honest.is_error and not output_errors(chaos, tool, honest)


@pytest.mark.parametrize(
    ("domain", "write", "args", "op"),
    [
        ("files", "append_line", {"path": "/notes/todo.txt", "line": "x"}, "append_line:/notes/todo.txt"),
        (
            "calendar",
            "reschedule_event",
            {"event_id": "evt-3", "start": "13:00", "version": 1},
            "reschedule_event:evt-3",
        ),
        ("tickets", "add_comment", {"ticket_id": "TCK-102", "body": "x"}, "add_comment:TCK-102"),
    ],
)
async def test_a_write_that_dies_after_its_commit_or_answers_a_noop_is_counted_as_it_happened(
    domain: str, write: str, args: dict[str, Any], op: str
) -> None:
    rules = [
        {"match": {"tool": write, "nth_call": 1}, "fault": "E5", "params": {"variant": "noop"}},
        {"match": {"tool": write, "nth_call": 2}, "fault": "C2", "params": {"commit": "before"}},
    ]
    chaos = ChaosServer(FaultPlan.model_validate({"rules": rules}), clock=FakeClock(), domain=domain)
    with anyio.fail_after(20):
        async with Client(connect(chaos), mode="legacy", cache=None) as client:
            noop = await call(client, write, args)
            assert not noop.is_error and chaos.ledger.total_commits == 0
            with pytest.raises(Exception):  # noqa: B017 - the connection closes mid-call
                await call(client, write, args)
    assert chaos.ledger.commits == {op: 1}


async def test_a_renamed_domain_tool_still_runs_under_its_new_name() -> None:
    rule = {"match": {"tool": "get_ticket", "nth_call": 1}, "fault": "A2", "params": {"tool": "close_ticket"}}
    async with domain_client("tickets", rule) as (client, chaos):
        await call(client, "get_ticket", {"ticket_id": "TCK-101"})
        names = {t.name for t in (await client.list_tools()).tools}
        closed = await call(client, "close_ticket_v2", {"ticket_id": "TCK-103"})
    assert "close_ticket" not in names and "close_ticket_v2" in names
    assert not closed.is_error and chaos.ledger.commits == {"close_ticket:TCK-103": 1}


# --- the ledger and the command ----------------------------------------------------------------------------------


def test_a_ledger_file_keeps_the_records_and_ids_of_a_domain(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    ledger = Ledger(path)
    surface("tickets").prepare(ledger)
    assert ledger.new_number("tickets") == 106
    ledger.commit("close_ticket", "TCK-101", {"ticket_id": "TCK-101"})
    again = read_ledger(path)
    assert set(again.records["tickets"]) == {"TCK-101", "TCK-102", "TCK-103", "TCK-104", "TCK-105"}
    assert again.new_number("tickets") == 107 and again.commits_for("close_ticket", "TCK-101") == 1
    surface("tickets").prepare(again)  # a ledger that has the records is not seeded again
    assert again.new_number("tickets") == 108


async def test_the_chaos_server_command_serves_a_domain_over_stdio(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"rules": [{"match": {"tool": "create_ticket", "nth_call": 1}, "fault": "D2"}]}))
    ledger = tmp_path / "ledger.json"
    argv = proxy_argv("chaos-server", "--domain", "tickets", "--plan", str(plan), "--ledger", str(ledger))
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env())
    new = {"title": "Printer jams", "priority": "high", "client_ref": "T-9"}
    with anyio.fail_after(30), (tmp_path / "server.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            limited = await call(client, "create_ticket", new)
            created = await call(client, "create_ticket", new)
    assert "search_tickets" in names and "create_order" not in names
    assert hint(limited)["type"] == "rate_limited" and not created.is_error
    assert read_ledger(ledger).commits_for("create_ticket", "T-9") == 1
