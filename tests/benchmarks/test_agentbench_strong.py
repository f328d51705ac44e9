"""The strong reference reader (``strong.py``): the habits a careful model has with the raw text, each one a
decision that differs from ``text_reader``'s on the same text, and the same decision with or without the proxy's
hidden channels."""

from __future__ import annotations

from random import Random

import pytest

from benchmarks.agentbench.agents import Call, Finish, TextReader
from benchmarks.agentbench.scenarios import generate
from benchmarks.agentbench.strong import StrongReader, carries_id
from benchmarks.agentbench.world import Outcome

BY_ID = {s.id: s for s in generate()}


def _agent(policy: type[TextReader], scenario: str) -> TextReader:
    agent = policy(BY_ID[scenario], Random(0))
    agent.known([])
    return agent


@pytest.mark.parametrize(
    "text",
    [
        "an order with this ref exists",  # a conflict not worded "already exists"
        "1 validation error for CallToolResult\nstructuredContent: Input should be a valid dictionary",
        "Error -32603: The service is temporarily unavailable; try again",  # -32603 on a write: it may have run
        "TRANSIENT_ERROR: the call may have executed. Upstream said: «The service is temporarily unavailable»",
    ],
)
def test_a_write_whose_text_leaves_its_outcome_open_is_verified_first(text: str) -> None:
    strong = _agent(StrongReader, "D1-write_unsafe-internal_error-first").on_error(Outcome(False, text))
    assert strong.kind == "verify" and strong.tool == "get_order" and strong.args == {"client_ref": "R1"}


def test_text_reader_takes_unavailable_for_not_sent_and_repeats_a_write_blind() -> None:
    text = "Error -32603: The service is temporarily unavailable; try again"
    assert _agent(TextReader, "D1-write_unsafe-internal_error-first").on_error(Outcome(False, text)).kind == "repeat"


def test_a_client_side_parse_failure_of_a_read_is_asked_again_not_fixed() -> None:
    text = "2 validation errors for CallToolResult\ncontent.0.text: Field required"
    assert _agent(TextReader, "E1-read_only-invalid-first").on_error(Outcome(False, text)).kind != "repeat"
    assert _agent(StrongReader, "E1-read_only-invalid-first").on_error(Outcome(False, text)).kind == "repeat"


def test_an_unrecognised_error_on_a_read_is_tried_once_more_then_another_read_gives_the_fact() -> None:
    agent = _agent(StrongReader, "D1-read_only-unavailable_x1-first")
    agent.known([type("T", (), {"name": n, "input_schema": {}})() for n in ("get_stock", "list_orders", "search")])
    text = "Error executing tool get_stock: something odd happened"
    assert _agent(TextReader, "D1-read_only-unavailable_x1-first").on_error(Outcome(False, text)).kind == "stop"
    first = agent.on_error(Outcome(False, text))
    assert first.kind == "repeat"
    agent.tries = 1
    second = agent.on_error(Outcome(False, text))
    assert second.kind == "call" and second.tool == "list_orders"


def test_a_create_that_names_no_id_is_checked_once_and_one_that_does_is_not() -> None:
    agent = _agent(StrongReader, "E5-write_unsafe-noop-first")
    create = agent.current
    check = agent.on_ok(Outcome(True, "ok"), create)
    assert isinstance(check, Call) and check.purpose == "verify" and check.tool == "get_order"
    assert carries_id(Outcome(True, "created ord-3")) and carries_id(Outcome(True, "{}", {"order_id": "ord-3"}))
    assert not carries_id(Outcome(True, "ok")) and not carries_id(Outcome(True, '{"status": "accepted"}'))
    other = _agent(StrongReader, "E5-write_unsafe-noop-first")
    assert not (
        isinstance(nxt := other.on_ok(Outcome(True, "created ord-3"), create), Call) and nxt.purpose == "verify"
    )


def test_a_verification_that_did_not_answer_is_asked_again_before_the_write_is_reissued() -> None:
    agent = _agent(StrongReader, "C3-write_unsafe-no_commit-first")
    verify = Call("get_order", {"client_ref": "R1"}, "verify")
    again = agent._after_verify(verify, Outcome(False, "Error -32001: Request 'tools/call' timed out"))
    assert again == verify
    reissue = agent._after_verify(verify, Outcome(False, "no order with client_ref R1"))
    assert isinstance(reissue, Call) and reissue.tool == "create_order"
    assert isinstance(agent._after_verify(verify, Outcome(False, "no order with client_ref R1")), Finish)


def test_the_reissue_after_a_verified_absent_write_is_not_spent_by_a_refused_repeat() -> None:
    """The proxy held a blind repeat unsent (text_reader counted it as its retry); the verification then shows the
    write absent: the strong reader still re-issues once."""
    agent = _agent(StrongReader, "D1-write_unsafe-internal_error-first")
    agent.tries = 1  # a repeat the proxy held unsent
    verify = Call("get_order", {"client_ref": "R1"}, "verify")
    reissue = agent._after_verify(verify, Outcome(False, "no order with client_ref R1"))
    assert isinstance(reissue, Call) and reissue.tool == "create_order"
    text = _agent(TextReader, "D1-write_unsafe-internal_error-first")
    text.tries = 1
    assert isinstance(text._after_verify(verify, Outcome(False, "no order with client_ref R1")), Finish)


def test_hidden_channels_do_not_change_the_strong_readers_decision() -> None:
    text = "Error -32603: Server returned an error response"
    hidden = {"repair_action": "backoff_retry", "max_retry": 5, "details": {"degraded_text": "{}"}}
    decisions = [
        _agent(StrongReader, "C4-write_unsafe-502-first").on_error(outcome)
        for outcome in (Outcome(False, text), Outcome(False, text, {"x": 1}, hidden, -32603, 10, True))
    ]
    assert decisions[0] == decisions[1] and decisions[0].kind == "verify"
