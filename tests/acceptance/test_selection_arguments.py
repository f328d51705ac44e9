"""Acceptance: categories A (tool selection) and B (arguments) through the real client → proxy → upstream path.

Every test asserts the observation's exact classification fields and the upstream's call log (what really ran).
A2 and A3 mutate the scripted upstream's tool list between calls (it is read on every ``tools/list``) and stay silent
about it, as the catalog's silent variant does: the proxy learns of the change only from the failed call.
"""

from __future__ import annotations

import warnings
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import IncomingMessage
from mcp.server import Server
from mcp.shared.exceptions import MCPError

from resilient_mcp.proxy.drift import NEW_SCHEMA_CHARS
from resilient_mcp.stages.validate import schema_hash
from tests.fixtures.scripted import ScriptedUpstream, error_text, ok_text
from tests.harness import classification, observation, proxied, text
from tests.helpers import virtual_time

pytestmark = pytest.mark.anyio

LIMIT_S = 10

SEARCH_V1: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
}
SEARCH_V2: dict[str, Any] = {
    "type": "object",
    "properties": {"q": {"type": "string", "description": "what to look for"}, "limit": {"type": "integer"}},
    "required": ["q"],
    "additionalProperties": False,
}
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "start": {"type": "string", "format": "date-time", "description": "when the event starts"},
        "attendees": {"type": "integer", "minimum": 1},
        "priority": {"enum": ["low", "normal", "high"]},
    },
    "required": ["title", "start"],
    "additionalProperties": False,
}


def unknown_tool(name: str) -> types.CallToolResult:
    raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")


def rename(up: ScriptedUpstream, old: str, new: str) -> None:
    """The upstream renames a tool, silently (no list_changed notification)."""
    tool = next(t for t in up.tools if t.name == old)
    up.tools[up.tools.index(tool)] = tool.model_copy(update={"name": new})
    up.handlers[new] = up.handlers.pop(old)


def change_schema(up: ScriptedUpstream, name: str, schema: dict[str, Any]) -> None:
    tool = next(t for t in up.tools if t.name == name)
    up.tools[up.tools.index(tool)] = tool.model_copy(update={"input_schema": schema})


# --- A1 unknown_tool ------------------------------------------------------------------------------------------------


async def test_an_unknown_tool_is_a_json_rpc_invalid_params_error_carrying_the_observation_with_candidates() -> None:
    up = ScriptedUpstream().tool("search").tool("delete_file")
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            with pytest.raises(MCPError) as caught:
                await h.client.call_tool("serch", {"query": "x"})
    error = caught.value
    assert error.code == types.INVALID_PARAMS
    obs = error.data
    assert isinstance(obs, dict)
    assert classification(obs) == ("A", "A1_unknown_tool", False, "not_sent", "none", "switch_tool", 0)
    assert obs["details"] == {"requested_name": "serch", "candidates": ["search"]}
    assert up.calls == []


async def test_with_unknown_tool_as_result_an_unknown_tool_is_an_is_error_result_the_model_can_read() -> None:
    up = ScriptedUpstream().tool("search")
    policy = {"observations": {"unknown_tool_as_result": True}}
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}, policy) as h:
            result = await h.client.call_tool("search_all", {})
    obs = observation(result)
    assert classification(obs) == ("A", "A1_unknown_tool", False, "not_sent", "none", "switch_tool", 0)
    assert obs["details"]["candidates"] == ["search"]
    assert "search" in text(result)
    assert up.calls == []


# --- A2 stale_tool_list ---------------------------------------------------------------------------------------------


async def test_a_silently_renamed_tool_is_reported_as_stale_with_the_diff_and_the_new_name_is_never_called() -> None:
    up = ScriptedUpstream().tool("search_v1", lambda args: ok_text("hits")).tool("fetch")
    changes: list[str] = []

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changes.append("tools")

    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}, client_kwargs={"message_handler": on_message}) as h:
            assert not (await h.client.call_tool("search_v1", {"query": "a"})).is_error
            rename(up, "search_v1", "search_v2")
            result = await h.client.call_tool("search_v1", {"query": "b"})
            listed = [t.name for t in (await h.client.list_tools()).tools]

    obs = observation(result)
    assert classification(obs) == ("A", "A2_stale_tool_list", False, "rejected", "none", "refresh_tools", 0)
    assert obs["details"] == {
        "requested_name": "search_v1",
        "tools_removed": ["search_v1"],
        "tools_added": ["search_v2"],
        "candidates": ["search_v2"],
    }
    assert "search_v2" in obs["suggestion"]
    assert up.count("search_v1") == 2 and up.count("search_v2") == 0  # the replacement is the model's decision
    assert sorted(listed) == ["fetch", "search_v2"]  # the proxy's catalog was refreshed ...
    assert changes == ["tools"]  # ... and the host was told


async def test_a_stale_name_is_short_circuited_when_repeated_and_never_reaches_the_upstream_again() -> None:
    up = ScriptedUpstream().tool("search_v1")
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            rename(up, "search_v1", "search_v2")
            first = observation(await h.client.call_tool("search_v1", {"query": "a"}))
            second = observation(await h.client.call_tool("search_v1", {"query": "a"}))
    assert first["fault_type"] == second["fault_type"] == "A2_stale_tool_list"
    assert second["repeat_count"] == 1 and second["details"]["short_circuited"] is True
    assert up.count("search_v1") == 1


async def test_a_tool_the_upstream_briefly_did_not_know_is_sent_once_more_after_the_refresh_finds_it() -> None:
    up = ScriptedUpstream()
    up.tool("search", up.sequence(lambda args: unknown_tool("search"), lambda args: ok_text("3 hits")))
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            result = await h.client.call_tool("search", {"query": "a"})
    assert not result.is_error, text(result)
    assert text(result).startswith("3 hits")
    assert "sent the call once more" in text(result)  # the proxy says what it did (no silent retry)
    assert up.calls == [("search", {"query": "a"}), ("search", {"query": "a"})]


async def test_an_upstream_that_keeps_rejecting_a_listed_tool_gets_exactly_one_resend() -> None:
    up = ScriptedUpstream()
    up.tool("search", lambda args: unknown_tool("search"))
    policy = {"observations": {"unknown_tool_as_result": True}}
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}, policy) as h:
            result = await h.client.call_tool("search", {"query": "a"})
    obs = observation(result)
    assert classification(obs) == ("A", "A1_unknown_tool", False, "rejected", "none", "switch_tool", 0)
    assert obs["details"]["tool_list_refreshed"] is True
    assert up.count("search") == 2


async def test_stale_tool_names_are_host_visible_names_and_hidden_tools_are_never_named() -> None:
    alpha = ScriptedUpstream(name="a").tool("search_v1").tool("admin_v1")
    beta = ScriptedUpstream(name="b").tool("search_v1")
    policy = {"upstreams": {"alpha": {"deny": ["admin_*"]}}}
    with anyio.fail_after(LIMIT_S):
        async with proxied({"alpha": alpha.server(), "beta": beta.server()}, policy) as h:
            rename(alpha, "search_v1", "search_v2")
            rename(alpha, "admin_v1", "admin_v2")
            result = await h.client.call_tool("alpha__search_v1", {})
    details = observation(result)["details"]
    assert details["tools_removed"] == ["alpha__search_v1"]
    assert details["tools_added"] == ["alpha__search_v2"]
    assert details["candidates"][0] == "alpha__search_v2"
    assert beta.calls == []


async def test_a_not_found_error_that_does_not_name_the_tool_is_not_taken_for_a_stale_list() -> None:
    up = ScriptedUpstream()
    up.tool("read_file", lambda args: raise_invalid_params("File /etc/x not found"))
    policy = {"observations": {"unknown_tool_as_result": True}}
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}, policy) as h:
            obs = observation(await h.client.call_tool("read_file", {"path": "/etc/x"}))
    # a tool's own "not found" is not the tool missing: no stale-list handling, no re-send
    assert obs["fault_type"] == "B2_schema_violation" and "tools_removed" not in obs["details"]
    assert up.count("read_file") == 1


def raise_invalid_params(message: str) -> types.CallToolResult:
    raise MCPError(types.INVALID_PARAMS, message)


@virtual_time  # the call reaches the upstream before its 0.2 s attempt timeout by construction, not by speed
async def test_a_tool_list_refresh_that_does_not_answer_is_cut_at_the_attempt_timeout_and_the_fault_stands() -> None:
    listings = 0
    tools = [types.Tool(name="search", input_schema={"type": "object"})]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        nonlocal listings
        listings += 1
        if listings > 1:
            await anyio.sleep_forever()
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return unknown_tool(params.name)

    server: Server[Any] = Server("slow-lister", on_list_tools=list_tools, on_call_tool=call_tool)
    policy = {"defaults": {"timeouts": {"attempt_s": 0.2}}}
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": server}, policy) as h:
            with pytest.raises(MCPError) as caught:
                await h.client.call_tool("search", {})
            listed = [t.name for t in (await h.client.list_tools()).tools]
    assert caught.value.code == types.INVALID_PARAMS
    assert isinstance(caught.value.data, dict) and caught.value.data["fault_type"] == "A1_unknown_tool"
    assert listings == 2 and listed == ["search"]  # one refresh was tried; the cached list stays


# --- A3 schema_drift ------------------------------------------------------------------------------------------------


def strict_search(args: dict[str, Any]) -> types.CallToolResult:
    """The upstream's v2 handler: validates against SEARCH_V2 itself, as a JSON-RPC invalid-params error."""
    if "q" not in args or set(args) - {"q", "limit"}:
        raise MCPError(types.INVALID_PARAMS, "Invalid params: 'q' is a required property")
    return ok_text(f"hits for {args['q']}")


async def test_a_changed_input_schema_is_reported_as_drift_with_the_diff_new_schema_and_errors_then_enforced() -> None:
    up = ScriptedUpstream().tool("search", lambda args: ok_text("hits"), schema=SEARCH_V1)
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            assert not (await h.client.call_tool("search", {"query": "a"})).is_error
            change_schema(up, "search", SEARCH_V2)
            up.handlers["search"] = strict_search
            drifted = await h.client.call_tool("search", {"query": "b"})
            again = await h.client.call_tool("search", {"query": "c"})  # refused by the proxy now
            fixed = await h.client.call_tool("search", {"q": "a"})

    obs = observation(drifted)
    assert classification(obs) == ("A", "A3_schema_drift", False, "rejected", "none", "fix_parameter", 0)
    details = obs["details"]
    assert details["schema_diff"] == {
        "added": ["$.limit", "$.q"],
        "removed": ["$.query"],
        "changed": {},
        "required_added": ["$.q"],
        "required_removed": ["$.query"],
    }
    assert details["new_input_schema"] == SEARCH_V2
    assert details["input_schema_hash"] == {"old": schema_hash(SEARCH_V1), "new": schema_hash(SEARCH_V2)}
    errors = {(e["path"], e["keyword"]) for e in details["validation_errors"]}
    assert errors == {("$.q", "required"), ("$", "additionalProperties")}
    assert all(e["fix"] for e in details["validation_errors"])

    assert observation(again)["fault_type"] == "B2_schema_violation"  # validated against the new schema
    assert not fixed.is_error
    assert up.calls == [("search", {"query": "a"}), ("search", {"query": "b"}), ("search", {"q": "a"})]


async def test_a_validation_error_result_from_the_tool_is_also_recognised_as_schema_drift() -> None:
    up = ScriptedUpstream().tool("search", schema=SEARCH_V1)
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            change_schema(up, "search", SEARCH_V2)
            up.handlers["search"] = lambda args: error_text("Input validation error: 'q' is a required property")
            result = await h.client.call_tool("search", {"query": "a"})
    obs = observation(result)
    assert classification(obs) == ("A", "A3_schema_drift", False, "rejected", "none", "fix_parameter", 0)
    assert obs["details"]["schema_diff"]["removed"] == ["$.query"]
    assert text(result).startswith("Input validation error")  # the upstream's own words are kept, then explained
    assert up.count("search") == 1


def unknown_param() -> types.CallToolResult:
    raise MCPError(types.INVALID_PARAMS, "Invalid params: unexpected keyword argument 'query'")


async def test_a_large_new_schema_is_reported_cut_and_marked_truncated() -> None:
    big = {
        "type": "object",
        "properties": {f"field_{i}": {"type": "string", "description": "x" * 100} for i in range(60)},
        "required": ["field_0"],
    }
    up = ScriptedUpstream().tool("search", schema=SEARCH_V1)
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            change_schema(up, "search", big)
            up.handlers["search"] = lambda args: unknown_param()
            details = observation(await h.client.call_tool("search", {"query": "a"}))["details"]
    assert details["new_input_schema_truncated"] is True
    assert isinstance(details["new_input_schema"], str) and len(details["new_input_schema"]) == NEW_SCHEMA_CHARS
    assert "$.field_0" in details["schema_diff"]["added"]


async def test_an_argument_rejection_with_an_unchanged_schema_is_passed_on_as_the_original_fault() -> None:
    up = ScriptedUpstream().tool("search", lambda args: unknown_param(), schema=SEARCH_V1)
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            result = await h.client.call_tool("search", {"query": "a"})
    obs = observation(result)
    assert classification(obs) == ("B", "B2_schema_violation", False, "rejected", "none", "fix_parameter", 0)
    assert obs["details"] == {"schema_drift_candidate": True, "input_schema_unchanged": True, "basis": "standard_code"}
    assert up.count("search") == 1


# --- A4 protocol_or_capability_mismatch -----------------------------------------------------------------------------


def raises(code: int, message: str, data: Any = None) -> Any:
    def handler(args: dict[str, Any]) -> types.CallToolResult:
        raise MCPError(code, message, data)

    return handler


async def test_an_upstream_without_tool_calls_is_a_protocol_mismatch_that_is_not_retried() -> None:
    up = ScriptedUpstream().tool("search", raises(types.METHOD_NOT_FOUND, "Method not found"))
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            obs = observation(await h.client.call_tool("search", {}))
    assert classification(obs) == ("A", "A4_protocol_or_capability_mismatch", False, "rejected", "none", "degrade", 0)
    assert obs["details"] == {"variant": "c", "basis": "standard_code"}
    assert up.count("search") == 1


async def test_a_missing_client_capability_names_it_and_advises_abort() -> None:
    handler = raises(types.MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing capability", {"capability": "sampling"})
    up = ScriptedUpstream().tool("summarize", handler)
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            obs = observation(await h.client.call_tool("summarize", {}))
    assert classification(obs) == ("A", "A4_protocol_or_capability_mismatch", False, "rejected", "none", "abort", 0)
    assert obs["details"] == {"variant": "d", "missing_capability": "sampling", "basis": "standard_code"}
    assert up.count("summarize") == 1


async def test_an_unsupported_protocol_version_is_renegotiated_and_sent_once_more_then_reported() -> None:
    handler = raises(types.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", {"supported": ["2099-01-01"]})
    up = ScriptedUpstream().tool("search", handler)
    policy = {"defaults": {"retry": {"backoff_base_ms": 1, "backoff_cap_ms": 2}}}
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}, policy) as h:
            obs = observation(await h.client.call_tool("search", {}))
    assert classification(obs) == ("A", "A4_protocol_or_capability_mismatch", False, "rejected", "none", "degrade", 0)
    assert obs["details"]["supported_versions"] == ["2099-01-01"]
    assert obs["details"]["renegotiated"] is True
    # catalog A4 (a): reconnect (a new handshake), send once more; the retry stage does not repeat it
    assert up.count("search") == 2 and len(obs["attempts"]) == 1


# --- B1-B3: refused before sending ----------------------------------------------------------------------------------


async def test_a_missing_required_argument_is_refused_before_sending_with_its_type_and_description() -> None:
    up = ScriptedUpstream().tool("create_event", schema=EVENT_SCHEMA)
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            obs = observation(await h.client.call_tool("create_event", {"title": "standup"}))
    assert classification(obs) == ("B", "B1_missing_required_argument", False, "not_sent", "none", "fix_parameter", 0)
    (error,) = obs["details"]["validation_errors"]
    assert (error["path"], error["keyword"], error["expected"], error["got"]) == (
        "$.start",
        "required",
        "string",
        "missing",
    )
    assert "when the event starts" in error["fix"]
    assert obs["details"]["missing"] == ["start"]
    assert "ask the user" in obs["suggestion"]
    assert up.calls == []


async def test_an_invalid_call_never_reaches_the_upstream_and_reports_every_error_with_path_and_fix() -> None:
    up = ScriptedUpstream().tool("create_event", schema=EVENT_SCHEMA)
    bad = {"title": 7, "priority": "urgent", "attendees": 0, "colour": "red"}  # start is missing too
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            obs = observation(await h.client.call_tool("create_event", bad))
    assert classification(obs) == ("B", "B2_schema_violation", False, "not_sent", "none", "fix_parameter", 0)
    errors = {e["path"]: e for e in obs["details"]["validation_errors"]}
    assert {(p, e["keyword"]) for p, e in errors.items()} == {
        ("$.start", "required"),
        ("$.title", "type"),
        ("$.priority", "enum"),
        ("$.attendees", "minimum"),
        ("$", "additionalProperties"),
    }
    assert errors["$.title"]["expected"] == "string" and errors["$.title"]["got"] == "7"
    assert errors["$.priority"]["expected"] == ["low", "normal", "high"]
    assert errors["$"]["got"] == ["colour"]
    assert all(e["fix"] for e in errors.values())
    assert up.calls == []


async def test_arguments_that_are_not_an_object_are_refused_by_the_protocol_layer_and_never_reach_the_upstream() -> (
    None
):
    up = ScriptedUpstream().tool("create_event", schema=EVENT_SCHEMA)
    params = types.CallToolRequestParams.model_construct(name="create_event", arguments='{"title": "standup"}')
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            with pytest.raises(MCPError) as caught, warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # pydantic notices the string where a dict belongs
                await h.client.session.send_request(types.CallToolRequest(params=params), types.CallToolResult)
    assert caught.value.code == types.INVALID_PARAMS
    assert up.calls == []


async def test_oversized_arguments_are_a_malformed_payload_refused_with_both_sizes() -> None:
    up = ScriptedUpstream().tool("upload")
    policy = {"defaults": {"validation": {"max_argument_bytes": 64}}}
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}, policy) as h:
            obs = observation(await h.client.call_tool("upload", {"body": "x" * 100}))
    assert classification(obs) == ("B", "B3_malformed_arguments_payload", False, "not_sent", "none", "fix_parameter", 0)
    assert obs["details"] == {"size_bytes": 111, "max_bytes": 64}  # {"body":"x…"} as compact JSON
    assert up.calls == []


async def test_a_request_the_upstream_cannot_read_is_a_malformed_payload_it_rejected() -> None:
    up = ScriptedUpstream().tool("upload", raises(types.INVALID_REQUEST, "Invalid request"))
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            obs = observation(await h.client.call_tool("upload", {"body": "x"}))
    assert classification(obs) == ("B", "B3_malformed_arguments_payload", False, "rejected", "none", "fix_parameter", 0)
    assert up.count("upload") == 1


# --- B4: rejected by the tool's own logic ---------------------------------------------------------------------------


async def test_a_typed_semantic_rejection_names_the_field_and_is_not_repeated_for_identical_arguments() -> None:
    hint = {"type": "invalid_argument", "field": "start", "retryable": False}
    up = ScriptedUpstream().tool("create_event", lambda args: error_text("start must be in the future", hint))
    args = {"title": "standup", "start": "2001-01-01T09:00:00Z"}
    with anyio.fail_after(LIMIT_S):
        async with proxied({"only": up.server()}) as h:
            first = await h.client.call_tool("create_event", args)
            second = observation(await h.client.call_tool("create_event", args))
    obs = observation(first)
    assert classification(obs) == (
        "B",
        "B4_semantic_argument_rejection",
        False,
        "executed_failed",
        "not_committed",
        "fix_parameter",
        0,
    )
    assert obs["details"] == {
        "error_type": "invalid_argument",
        "upstream_retryable": False,
        "field": "start",
        "basis": "typed_hint",
    }
    assert obs["upstream_message"] == {"untrusted": True, "text": "start must be in the future"}
    assert "'start'" in obs["suggestion"]
    assert second["repeat_count"] == 1 and second["retry_safety"] == "not_sent"
    assert up.count("create_event") == 1
