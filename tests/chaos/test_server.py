"""The chaos server injects each server-side fault of the catalog as a real server would send it.

In process through the SDK's real JSON-RPC path (``mcp.Client(..., mode="legacy")`` over ``transports.connect``),
and as a ``resilient-mcp chaos-server`` subprocess over stdio for stdout pollution, death mid-call and spawn
failures. Each reported fault is also read back through the proxy's own classifier, so the test proves the server's
wire shape means the intended catalog fault.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from resilient_mcp.chaos.clock import FakeClock, RealClock
from resilient_mcp.chaos.ledger import Ledger, read_ledger
from resilient_mcp.chaos.plan import FaultPlan
from resilient_mcp.chaos.server import ChaosServer, check_plan
from resilient_mcp.chaos.tools import STOCK_OUTPUT
from resilient_mcp.chaos.transports import connect
from resilient_mcp.faults.classify import classify_exception, classify_result
from resilient_mcp.faults.error_results import ERROR_META_KEY
from tests.helpers import await_until, child_env, proxy_argv, virtual_time

pytestmark = pytest.mark.anyio

ORDER = {"customer": "alice", "sku": "apple", "qty": 2, "client_ref": "R1"}


class Messages:
    """A client message handler that keeps what arrives outside responses (parse errors, list_changed)."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    async def __call__(self, message: Any) -> None:
        self.items.append(message)

    def of(self, kind: type) -> list[Any]:
        return [m for m in self.items if isinstance(m, kind)]


@asynccontextmanager
async def chaos_client(
    *rules: dict[str, Any], clock: Any = None, ledger: Ledger | None = None, messages: Messages | None = None
) -> AsyncIterator[tuple[Client, ChaosServer]]:
    chaos = ChaosServer(FaultPlan.model_validate({"rules": list(rules)}), clock=clock or FakeClock(), ledger=ledger)
    with anyio.fail_after(20):
        async with Client(connect(chaos), mode="legacy", cache=None, message_handler=messages) as client:
            yield client, chaos


async def raw_call(client: Client, name: str, args: dict[str, Any], limit_s: float | None = None) -> Any:
    """The result or the exception, as the proxy's upstream connection would get it (no output validation)."""
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=args))
    try:
        return await client.session.send_request(request, types.CallToolResult, request_read_timeout_seconds=limit_s)
    except Exception as exc:
        return exc


# --- reported faults: JSON-RPC errors and isError results --------------------------------------------------------

REPORTED = [
    # fault, params, wire ("jsonrpc", code) | ("result", hint type or None), what the proxy classifies it as
    ("A1", {}, ("jsonrpc", -32602), "A1_unknown_tool"),
    ("A4", {"variant": "a"}, ("jsonrpc", -32022), "A4_protocol_or_capability_mismatch"),
    ("A4", {"variant": "b"}, ("jsonrpc", -32601), "A4_protocol_or_capability_mismatch"),
    ("A4", {"variant": "c"}, ("jsonrpc", -32601), "A4_protocol_or_capability_mismatch"),
    ("A4", {"variant": "d"}, ("jsonrpc", -32021), "A4_protocol_or_capability_mismatch"),
    # typed invalid_argument, narrowed by the validator's text ("'sku' is a required property") to what it is
    ("B1", {"field": "sku"}, ("result", "invalid_argument"), "B1_missing_required_argument"),
    ("B2", {"field": "qty", "typed": False}, ("result", None), "B2_schema_violation"),
    ("B3", {}, ("jsonrpc", -32600), "B3_malformed_arguments_payload"),
    ("B4", {"field": "qty"}, ("result", "invalid_argument"), "B4_semantic_argument_rejection"),
    ("D1", {}, ("result", "unavailable"), "D1_transient_execution_error"),
    ("D1", {"as": "jsonrpc"}, ("jsonrpc", -32603), "D1_transient_execution_error"),
    ("D2", {"retry_after_ms": 1500}, ("result", "rate_limited"), "D2_rate_limited"),
    ("D4", {}, ("result", "not_found"), "D4_permanent_execution_error"),
    ("D4", {"typed": False, "message": "order not found"}, ("result", None), "D4_permanent_execution_error"),
    (
        "D5",
        {"variant": "already_exists", "details": {"existing_id": "ord-7"}},
        ("result", "already_exists"),
        "D5_state_conflict",
    ),
    ("F1", {}, ("result", "unauthenticated"), "F1_unauthenticated"),
    ("F2", {}, ("result", "permission_denied"), "F2_permission_denied_or_approval_required"),
    ("F3", {}, ("result", "resource_exhausted"), "F3_quota_exhausted"),
]


@pytest.mark.parametrize(
    ("fault", "params", "wire", "classified"), REPORTED, ids=[f"{r[0]}-{i}" for i, r in enumerate(REPORTED)]
)
async def test_a_reported_fault_reaches_the_client_as_a_real_server_sends_it(
    fault: str, params: dict[str, Any], wire: tuple[str, Any], classified: str
) -> None:
    async with chaos_client({"match": {"tool": "create_order"}, "fault": fault, "params": params}) as (client, chaos):
        got = await raw_call(client, "create_order", ORDER)
    if wire[0] == "jsonrpc":
        assert isinstance(got, MCPError) and got.code == wire[1]
        fault_seen = classify_exception(got, sent=True)
    else:
        assert isinstance(got, types.CallToolResult) and got.is_error
        hint = (got.meta or {}).get(ERROR_META_KEY)
        assert (hint or {}).get("type") == wire[1]
        fault_seen = classify_result(got, tool=chaos.tool("create_order"))
        assert fault_seen is not None
    assert fault_seen.fault_type == classified
    assert chaos.ledger.total_commits == 0  # a refusal never runs the tool


async def test_a_rate_limit_carries_its_retry_after_and_a_quota_its_reset() -> None:
    async with chaos_client(
        {"match": {"tool": "get_stock", "nth_call": 1}, "fault": "rate_limit", "params": {"retry_after_ms": 1500}},
        {"match": {"tool": "get_stock", "nth_call": 2}, "fault": "quota", "params": {"details": {"scope": "daily"}}},
    ) as (client, _):
        limited = classify_result(await raw_call(client, "get_stock", {"sku": "apple"}), tool=None)
        quota = classify_result(await raw_call(client, "get_stock", {"sku": "apple"}), tool=None)
        third = await raw_call(client, "get_stock", {"sku": "apple"})
    assert limited is not None and limited.retry_after_ms == 1500 and limited.is_transient
    assert quota is not None and quota.fault_type == "F3_quota_exhausted" and not quota.is_transient
    assert not third.is_error


async def test_an_unlisted_name_gets_unknown_tool_and_invalid_arguments_get_a_validation_result() -> None:
    async with chaos_client() as (client, _):
        unknown = await raw_call(client, "get_ordr", {"order_id": "ord-1"})
        invalid = await raw_call(client, "create_order", {**ORDER, "qty": "two"})
    assert isinstance(unknown, MCPError) and unknown.code == -32602 and "Unknown tool: get_ordr" in unknown.message
    assert invalid.is_error and "Input validation error" in invalid.content[0].text


async def test_business_failures_are_typed_results_and_the_ledger_counts_each_commit() -> None:
    async with chaos_client() as (client, chaos):
        await raw_call(client, "create_order", ORDER)
        await raw_call(client, "create_order", ORDER)
        stale = await raw_call(client, "update_order", {"order_id": "ord-1", "qty": 5, "version": 9})
        missing = await raw_call(client, "get_order", {"order_id": "ord-99"})
        await raw_call(client, "set_status", {"order_id": "ord-2", "status": "shipped"})
        await raw_call(client, "set_status", {"order_id": "ord-2", "status": "shipped"})
    assert chaos.ledger.commits_for("create_order", "R1") == 2  # a duplicate is visible
    assert chaos.ledger.commits_for("set_status", "ord-2") == 1  # idempotent: one effect
    assert stale.meta[ERROR_META_KEY] == {
        "type": "aborted",
        "retryable": False,
        "field": "version",
        "current_version": 1,
    }
    assert missing.meta[ERROR_META_KEY]["type"] == "not_found"


async def test_list_orders_pages_with_a_cursor() -> None:
    async with chaos_client() as (client, _):
        for i in range(5):
            await raw_call(client, "create_order", {**ORDER, "client_ref": f"R{i}"})
        first = await raw_call(client, "list_orders", {"page_size": 2})
        last = await raw_call(client, "list_orders", {"page_size": 2, "cursor": "4"})
    assert [o["client_ref"] for o in first.structured_content["orders"]] == ["R0", "R1"]
    assert first.structured_content["next_cursor"] == "2" and last.structured_content["next_cursor"] is None


# --- A2 / A3: the tool list changes ------------------------------------------------------------------------------


@pytest.mark.parametrize("notify", [True, False])
async def test_a_tool_renamed_after_call_k_is_unknown_afterwards_with_or_without_list_changed(notify: bool) -> None:
    messages = Messages()
    rule = {"match": {"tool": "search", "nth_call": 2}, "fault": "A2", "params": {"notify": notify}}
    async with chaos_client(rule, messages=messages) as (client, _):
        first = await raw_call(client, "search", {"query": "alice"})
        second = await raw_call(client, "search", {"query": "alice"})
        gone = await raw_call(client, "search", {"query": "alice"})
        renamed = await raw_call(client, "search_v2", {"query": "alice"})
        names = [t.name for t in (await client.list_tools()).tools]
    assert not first.is_error and not second.is_error and not renamed.is_error
    assert isinstance(gone, MCPError) and gone.code == -32602
    assert "search_v2" in names and "search" not in names
    assert len(messages.of(types.ToolListChangedNotification)) == (1 if notify else 0)


async def test_schema_drift_rejects_the_old_arguments_and_accepts_the_new_schema() -> None:
    rule = {"match": {"tool": "search", "nth_call": 1}, "fault": "A3"}
    async with chaos_client(rule) as (client, chaos):
        old = await raw_call(client, "search", {"query": "alice"})
        schema = next(t for t in (await client.list_tools()).tools if t.name == "search").input_schema
        new = await raw_call(client, "search", {"q": "alice", "limit": 5})
    assert old.is_error and "Input validation error" in old.content[0].text
    fault = classify_result(old, tool=chaos.tool("search"))
    assert fault is not None and fault.details.get("schema_drift_candidate")
    assert set(schema["required"]) == {"q", "limit"} and not new.is_error


# --- C2 / C3 / D3: dying, hanging, slowness ----------------------------------------------------------------------


@pytest.mark.parametrize(("commit", "commits"), [("before", 1), ("none", 0)])
async def test_dying_mid_call_closes_the_connection_after_or_before_the_commit(commit: str, commits: int) -> None:
    rule = {"match": {"tool": "create_order", "nth_call": 1}, "fault": "die", "params": {"commit": commit}}
    chaos = ChaosServer(FaultPlan.model_validate({"rules": [rule]}))
    with anyio.fail_after(20):
        async with Client(connect(chaos), mode="legacy", cache=None) as client:
            lost = await raw_call(client, "create_order", ORDER)
        assert isinstance(lost, MCPError) and classify_exception(lost, sent=True).fault_type.startswith("C2")
        assert chaos.ledger.commits_for("create_order", "R1") == commits
        async with Client(connect(chaos), mode="legacy", cache=None) as client:  # "restarted": same ledger
            again = await raw_call(client, "create_order", ORDER)
    assert not again.is_error and chaos.ledger.commits_for("create_order", "R1") == commits + 1


@virtual_time  # on virtual time: the commit before the hang happens before the caller's 0.2 s, by construction
@pytest.mark.parametrize(("commit", "commits"), [("before_hang", 1), ("never", 0)])
async def test_a_hang_outlasts_the_callers_timeout_and_commits_before_or_never(commit: str, commits: int) -> None:
    rule = {"match": {"tool": "create_order"}, "fault": "timeout", "params": {"commit": commit}}
    async with chaos_client(rule) as (client, chaos):
        timed_out = await raw_call(client, "create_order", ORDER, limit_s=0.2)
        assert isinstance(timed_out, MCPError) and timed_out.code == types.REQUEST_TIMEOUT
        assert chaos.ledger.commits_for("create_order", "R1") == commits


@virtual_time  # on virtual time: the caller's 0.05 s ends before the 0.3 s hang, however slow the machine
async def test_a_hang_that_commits_late_commits_even_though_the_caller_gave_up() -> None:
    rule = {"match": {"tool": "create_order"}, "fault": "C3", "params": {"commit": "after_hang", "hang_ms": 300}}
    async with chaos_client(rule, clock=RealClock()) as (client, chaos):
        timed_out = await raw_call(client, "create_order", ORDER, limit_s=0.05)
        assert isinstance(timed_out, MCPError) and chaos.ledger.total_commits == 0
        await await_until(lambda: chaos.ledger.commits_for("create_order", "R1") == 1, 5, "the late commit")


async def test_a_slow_success_sleeps_on_the_fake_clock_and_succeeds() -> None:
    clock = FakeClock()
    rule = {"match": {"tool": "get_stock"}, "fault": "slow", "params": {"delay_ms": 54_000}}
    async with chaos_client(rule, clock=clock) as (client, _):
        with anyio.fail_after(5):  # 54 simulated seconds take no real time
            result = await raw_call(client, "get_stock", {"sku": "pear"})
    assert not result.is_error and result.structured_content["quantity"] == 25
    assert clock.slept == [54.0] and clock.now() == 54.0


# --- E1: malformed responses -------------------------------------------------------------------------------------


async def test_a_result_of_the_wrong_shape_fails_to_parse_at_the_client_after_the_commit() -> None:
    rule = {"match": {"tool": "create_order"}, "fault": "malformed"}
    async with chaos_client(rule) as (client, chaos):
        got = await raw_call(client, "create_order", ORDER)
    assert classify_exception(got, sent=True).fault_type == "E1_malformed_response"
    assert chaos.ledger.commits_for("create_order", "R1") == 1


@virtual_time  # on virtual time: each bad line is read before the caller's 0.3 s ends
async def test_garbage_on_the_wire_reaches_the_client_as_a_parse_error_and_truncation_loses_the_answer() -> None:
    messages = Messages()
    rules = [
        {"match": {"tool": "get_stock", "nth_call": 1}, "fault": "stdout_pollution"},
        {"match": {"tool": "get_stock", "nth_call": 2}, "fault": "E1", "params": {"variant": "truncated"}},
        {"match": {"tool": "get_stock", "nth_call": 3}, "fault": "E1", "params": {"variant": "wrong_id"}},
    ]
    async with chaos_client(*rules, messages=messages) as (client, _):
        polluted = await raw_call(client, "get_stock", {"sku": "apple"})
        truncated = await raw_call(client, "get_stock", {"sku": "apple"}, limit_s=0.3)
        wrong_id = await raw_call(client, "get_stock", {"sku": "apple"}, limit_s=0.3)
    assert not polluted.is_error  # the real answer follows the stray line
    assert isinstance(truncated, MCPError) and truncated.code == types.REQUEST_TIMEOUT
    assert isinstance(wrong_id, MCPError) and wrong_id.code == types.REQUEST_TIMEOUT
    assert len([m for m in messages.items if isinstance(m, Exception)]) == 2  # two unparsable lines


# --- E2-E5, F4: results that lie, lack, bloat or instruct --------------------------------------------------------


async def test_results_are_altered_as_planned() -> None:
    rules = [
        {"match": {"tool": "get_stock", "nth_call": 1}, "fault": "E2"},
        {"match": {"tool": "get_stock", "nth_call": 2}, "fault": "E5", "params": {"variant": "negative"}},
        {"match": {"tool": "list_orders"}, "fault": "E3"},
        {"match": {"tool": "export_orders"}, "fault": "oversized", "params": {"size_bytes": 3_000_000}},
        {"match": {"tool": "search"}, "fault": "injection"},
    ]
    async with chaos_client(*rules) as (client, _):
        broken = await raw_call(client, "get_stock", {"sku": "apple"})
        negative = await raw_call(client, "get_stock", {"sku": "apple"})
        empty = await raw_call(client, "list_orders", {})
        huge = await raw_call(client, "export_orders", {"rows": 3})
        injected = await raw_call(client, "search", {"query": "x"})
    assert list(jsonschema.Draft202012Validator(STOCK_OUTPUT).iter_errors(broken.structured_content))
    assert negative.structured_content["quantity"] < 0 and not negative.is_error
    assert empty.content == [] and not empty.is_error
    assert len(huge.content[0].text.encode()) == 3_000_000 and huge.content[0].text.startswith("order_id,")
    assert "ignore all previous instructions" in injected.content[-1].text


async def test_a_silent_noop_says_ok_and_commits_nothing() -> None:
    async with chaos_client({"match": {"tool": "create_order"}, "fault": "E5"}) as (client, chaos):
        result = await raw_call(client, "create_order", ORDER)
    assert not result.is_error and result.structured_content == {"status": "ok"} and chaos.ledger.total_commits == 0


async def test_instructions_can_be_planted_in_a_tool_description() -> None:
    rule = {"match": {"tool": "search"}, "fault": "F4", "params": {"in": "description"}}
    async with chaos_client(rule) as (client, _):
        await raw_call(client, "search", {"query": "x"})
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert "ignore all previous instructions" in (tools["search"].description or "")


def test_transport_faults_are_refused_with_where_to_inject_them() -> None:
    plan = FaultPlan.model_validate({"rules": [{"fault": "C4"}, {"fault": "rate_limit", "params": {"as": "http"}}]})
    problems = check_plan(plan)
    assert "rules[0]: C4_gateway_5xx" in problems[0] and "shim" in problems[0]
    assert "rules[1]: as: http" in problems[1]
    with pytest.raises(ValueError, match="shim"):
        ChaosServer(plan)


# --- over stdio, as a subprocess ---------------------------------------------------------------------------------


def _stdio_client(tmp_path: Path, plan: dict[str, Any], messages: Messages | None = None) -> Client:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    argv = proxy_argv("chaos-server", "--plan", str(plan_file), "--ledger", str(tmp_path / "ledger.json"))
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env())
    errlog = (tmp_path / "server.stderr").open("w")
    return Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None, message_handler=messages)


async def test_over_stdio_a_log_line_on_stdout_and_death_after_commit_reach_the_client(tmp_path: Path) -> None:
    messages = Messages()
    plan = {
        "rules": [
            {"match": {"tool": "get_stock", "nth_call": 1}, "fault": "stdout_pollution"},
            {"match": {"tool": "create_order", "nth_call": 2}, "fault": "die_mid_call"},
        ]
    }
    with anyio.fail_after(30):
        async with _stdio_client(tmp_path, plan, messages) as client:
            polluted = await raw_call(client, "get_stock", {"sku": "apple"})
            first = await raw_call(client, "create_order", ORDER)
            died = await raw_call(client, "create_order", {**ORDER, "client_ref": "R2"})
    assert not polluted.is_error and not first.is_error
    parse_errors = [m for m in messages.items if isinstance(m, Exception)]
    assert parse_errors and "INFO chaos-orders" in str(parse_errors[0])
    assert isinstance(died, MCPError) and died.code == types.CONNECTION_CLOSED
    ledger = read_ledger(tmp_path / "ledger.json")
    assert ledger.commits_for("create_order", "R1") == 1 and ledger.commits_for("create_order", "R2") == 1
    assert "dying mid-call" in (tmp_path / "server.stderr").read_text()


async def test_over_stdio_the_first_spawn_exits_before_reading_and_the_next_one_serves(tmp_path: Path) -> None:
    plan = {"startup": {"fail_spawns": 1}}
    with anyio.fail_after(30):
        with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises for a server gone before initialize
            async with _stdio_client(tmp_path, plan) as client:
                await client.list_tools()
        async with _stdio_client(tmp_path, plan) as client:
            assert len((await client.list_tools()).tools) == 9
    assert read_ledger(tmp_path / "ledger.json").spawns == 2


def test_the_chaos_server_command_rejects_a_bad_plan_with_its_line(tmp_path: Path) -> None:
    import subprocess

    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("rules:\n  - fault: C3\n    params: {hang_ms: -1}\n")
    done = subprocess.run(
        [sys.executable, "-m", "resilient_mcp.cli", "chaos-server", "--plan", str(plan_file)],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
    )
    assert done.returncode == 2
    assert f"{plan_file}:3: rules[0].params.hang_ms" in done.stderr
