"""The benchmark's readers work from the text a host shows a model, and nothing else.

``text_reader`` (the reference policy) must read the error texts real servers and SDKs give; ``repair_follower``
must decide the same whether or not the hidden channels (``_meta`` observation, error ``structuredContent``,
JSON-RPC ``error.data``) are there.
"""

from __future__ import annotations

from random import Random
from typing import Any

import pytest

from benchmarks.agentbench.agents import RepairFollower, TextReader
from benchmarks.agentbench.reader import read_text, visible_observation
from benchmarks.agentbench.scenarios import generate
from benchmarks.agentbench.world import Outcome

TOOLS = ["get_stock", "get_order", "list_orders", "search", "create_order", "set_status"]
VERIFY = ("get_order", {"client_ref": "R1"})


def _read(text: str, *, tool: str = "get_stock", args: Any = None, write: bool = False, tries: int = 0) -> Any:
    return read_text(
        text,
        tool=tool,
        args=args if args is not None else {"sku": "apple"},
        write=write,
        tries=tries,
        fixes=0,
        tools=TOOLS,
        verify=VERIFY if write else None,
    )


@pytest.mark.parametrize(
    "text",
    [
        "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 8931)",
        "Error -32001: Request 'tools/call' timed out",
        "Rate limit exceeded; slow down",
        "The service is temporarily unavailable; try again",
    ],
)
def test_transient_texts_on_a_read_are_retried_after_a_wait(text: str) -> None:
    decision = _read(text)
    assert decision.kind == "repeat" and decision.wait_s > 0


def test_a_write_whose_outcome_the_text_leaves_open_is_verified_before_it_is_reissued() -> None:
    for text in ("Error -32603: Server returned an error response", "Error -32001: Request 'tools/call' timed out"):
        decision = _read(text, tool="create_order", args={"client_ref": "R1"}, write=True)
        assert (decision.kind, decision.tool, decision.args) == ("verify", "get_order", {"client_ref": "R1"})
    refused = _read("[Errno 111] Connection refused", tool="create_order", args={"client_ref": "R1"}, write=True)
    assert refused.kind == "repeat"  # refused: it never ran, a plain repeat is safe


def test_argument_errors_are_fixed_from_the_task_context() -> None:
    decision = _read(
        "Input validation error: qty: '2' is not of type 'integer'",
        tool="create_order",
        args={"customer": "carol", "sku": "apple", "qty": "2", "client_ref": "R1"},
    )
    assert decision.kind == "call" and decision.args["qty"] == 2


def test_an_unknown_tool_is_replaced_by_the_suggested_or_closest_known_one() -> None:
    assert _read("Unknown tool: get_stocks. Did you mean: get_stock, set_status?", tool="get_stocks").tool == (
        "get_stock"
    )
    assert _read("Error -32602: Unknown tool: get_stocks", tool="get_stocks").tool == "get_stock"


def test_approval_and_permission_refusals_go_to_the_user() -> None:
    for text in (
        "The user declined to run delete_order",
        "PERMISSION_DENIED: needs a person's approval",
        "401 Unauthorized: token expired",
    ):
        assert _read(text).kind == "stop" and _read(text).status == "asked_user"


def test_an_output_schema_error_is_read_again_once_then_its_quoted_data_is_used() -> None:
    text = (
        "RuntimeError: Invalid structured content returned by tool get_stock: 'updated_at' is a required "
        "property\n\nOn instance:\n    {'sku': 'apple', 'quantity': 40}"
    )
    assert _read(text).kind == "repeat"
    second = _read(text, tries=1)
    assert second.kind == "fact" and '"quantity": 40' in second.value


def test_the_follower_reads_the_advice_line_and_the_verify_call_from_the_text() -> None:
    obs = visible_observation(
        "TIMEOUT: create_order may have taken effect. Call get_order(client_ref='R1') to check whether it did.\n"
        "(repair_action=verify_state, retry_safety=maybe_executed, max_retry=0)"
    )
    assert obs is not None and obs["repair_action"] == "verify_state" and obs["max_retry"] == 0
    assert obs["details"]["verify_with"] == {"tool": "get_order", "args": {"client_ref": "R1"}}
    assert visible_observation("Rate limit exceeded; slow down") is None


@pytest.mark.parametrize("policy", [TextReader, RepairFollower])
def test_hidden_channels_do_not_change_a_readers_decision(policy: type[TextReader]) -> None:
    scenario = next(s for s in generate() if s.id == "C4-write_unsafe-502-first")
    text = "Error -32603: Server returned an error response"
    hidden = {"repair_action": "backoff_retry", "max_retry": 5, "details": {"degraded_text": "{}"}}
    decisions = []
    for outcome in (Outcome(False, text), Outcome(False, text, {"x": 1}, hidden, -32603, 10, True)):
        agent = policy(scenario, Random(0))
        agent.known([])
        decisions.append(agent.on_error(outcome))
    assert decisions[0] == decisions[1] and decisions[0].kind == "verify"
