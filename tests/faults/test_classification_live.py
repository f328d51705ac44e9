"""Classification fixes found with real servers (issue 8 item 6), through the real client → proxy → upstream path.

- A JSON-RPC -32603 from a live upstream is that tool's execution error: its message is read like any other error
  text (issue 19); a transient one counts toward the tool's circuit and never opens the upstream's, so other tools
  of a healthy server stay served. A bare -32603 is unrecognised: never transient.
- An empty or non-JSON body answering a ``tools/call`` POST of an HTTP upstream (on 127.0.0.1) is a malformed
  response (E1) that may have executed, not "malformed arguments": a read is retried, a write is told to verify.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from resilient_mcp.faults import (
    MalformedArguments,
    MalformedResponse,
    PermanentExecutionError,
    RetrySafety,
    TransientExecutionError,
)
from resilient_mcp.faults.classify import classify_exception
from tests.fixtures.fault_links import (
    HttpFault,
    HttpShim,
    SleepRecorder,
    attempt_outcomes,
    observation,
    proxy_over,
    recording_pipeline,
    text_of,
)
from tests.fixtures.scripted import ScriptedUpstream, ok_text
from tests.harness import proxied

pytestmark = pytest.mark.anyio

LIMIT_S = 60
VERIFY = {"tool": "get_order", "args": {"order_id": "{order_id}"}}


def internal_error(args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(types.INTERNAL_ERROR, "Internal error: ECONNRESET: the backend closed the connection")


async def test_five_internal_errors_in_a_row_open_only_that_tools_circuit_and_other_tools_stay_served() -> None:
    up = ScriptedUpstream(name="fs")
    up.tool("read_file", internal_error)
    up.tool("list_directory", internal_error)
    up.tool("get_file_info", lambda args: ok_text("size: 12"))
    async with proxied({"fs": up.server()}) as h:
        with anyio.fail_after(LIMIT_S):
            for tool in ("read_file", "list_directory"):  # failures spread over two tools: five each
                for n in range(5):
                    obs = observation(await h.client.call_tool(tool, {"path": f"/missing/{n}"}))
                    assert obs["fault_type"] == "D1_transient_execution_error"
            refused = observation(await h.client.call_tool("read_file", {"path": "/missing/6"}))
            served = await h.client.call_tool("get_file_info", {"path": "/etc/hosts"})
    assert refused["fault_type"] == "C5_persistent_outage" and refused["details"]["circuit"] == "tool"
    assert not served.is_error and text_of(served) == "size: 12"
    assert up.count("read_file") == 5 and up.count("get_file_info") == 1
    services = h.proxy.pipeline.services
    board = {(c["tool"], c["state"]) for c in services.board.snapshot()}
    assert (None, "closed") in board and ("read_file", "open") in board
    assert services.budgets.tokens("fs") == services.budgets.max_tokens, "the upstream's retry budget is untouched"


def test_an_internal_error_is_the_tools_own_and_may_have_executed() -> None:
    fault = classify_exception(MCPError(types.INTERNAL_ERROR, "boom"), sent=True)
    assert isinstance(fault, PermanentExecutionError) and fault.tool_level and not fault.is_transient
    assert fault.retry_safety is RetrySafety.MAYBE_EXECUTED and fault.details["basis"] == "unrecognised"
    reset = classify_exception(MCPError(types.INTERNAL_ERROR, "Internal error: ECONNRESET"), sent=True)
    assert isinstance(reset, TransientExecutionError) and reset.tool_level and reset.is_transient
    missing = classify_exception(MCPError(types.INTERNAL_ERROR, "Internal error: ENOENT: no such file"), sent=True)
    assert isinstance(missing, PermanentExecutionError) and missing.details["basis"] == "standard_code"


@pytest.mark.parametrize(
    "message",
    [
        "Failed to parse JSON response: 1 validation error for JSONRPCMessage",
        "Unexpected content type: ",
        "Unexpected content type: text/html",
        "server answered a request with 202 Accepted",
    ],
)
def test_the_sdks_stand_ins_for_an_unreadable_http_answer_are_malformed_responses(message: str) -> None:
    code = types.PARSE_ERROR if message.startswith("Failed") else types.INVALID_REQUEST
    fault = classify_exception(MCPError(code, message), sent=True)
    assert isinstance(fault, MalformedResponse) and fault.retry_safety is RetrySafety.MAYBE_EXECUTED


def test_an_upstream_that_could_not_parse_the_request_still_rejected_the_arguments() -> None:
    fault = classify_exception(MCPError(types.PARSE_ERROR, "Parse error"), sent=True)
    assert isinstance(fault, MalformedArguments) and fault.retry_safety is RetrySafety.REJECTED


def shop() -> ScriptedUpstream:
    up = ScriptedUpstream(name="shop")
    up.tool("get_order", lambda args: ok_text('{"order_id": "o-1", "qty": 2}'))
    up.tool("cancel_order", lambda args: ok_text("cancelled"))
    return up


EMPTY = HttpFault(200, after_forwarding=True, body=b"", content_type="application/json")
NOT_JSON = HttpFault(200, after_forwarding=True, body=b"<html>gateway hiccup</html>", content_type="text/html")


@pytest.mark.parametrize("answer", [EMPTY, NOT_JSON], ids=["empty", "html"])
async def test_a_read_answered_with_an_unreadable_body_is_retried_and_succeeds(answer: HttpFault) -> None:
    up, recorder = shop(), SleepRecorder()
    shim = HttpShim(up.server())
    tools = {"get_order": {"effect": "read_only"}}
    pipeline = recording_pipeline(recorder)
    async with shim.serving(), proxy_over({"shop": {"url": shim.url}}, {"tools": tools}, pipeline=pipeline) as h:
        shim.plan = [answer]
        with anyio.fail_after(LIMIT_S):
            result = await h.client.call_tool("get_order", {"order_id": "o-1"})
    assert not result.is_error, text_of(result)
    assert attempt_outcomes(result) == ["E1_malformed_response", "ok"]
    assert up.count("get_order") == 2


async def test_a_write_answered_with_an_empty_body_may_have_executed_and_is_verified_not_refused() -> None:
    up = shop()
    shim = HttpShim(up.server())
    tools = {"cancel_order": {"effect": "write_unsafe", "verify_with": VERIFY}}
    async with shim.serving(), proxy_over({"shop": {"url": shim.url}}, {"tools": tools}) as h:
        shim.plan = [EMPTY]
        with anyio.fail_after(LIMIT_S):
            obs = observation(await h.client.call_tool("cancel_order", {"order_id": "o-1"}))
    assert obs["fault_type"] == "E1_malformed_response" and obs["retry_safety"] == "maybe_executed"
    assert obs["repair_action"] == "verify_state" and obs["max_retry"] == 0
    assert obs["details"]["verify_with"] == {"tool": "get_order", "args": {"order_id": "o-1"}}
    assert up.count("cancel_order") == 1, "sent once: the proxy does not re-send a write that may have run"
