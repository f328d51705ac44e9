"""The side channel the chain reports to (``resilient_mcp/call/events.py``): the no-op default and the fan-out."""

from __future__ import annotations

from structlog.testing import capture_logs

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.call.events import NULL, CallEvents, combine
from resilient_mcp.policy import ToolRule


class Seen(CallEvents):
    enabled = True

    def __init__(self) -> None:
        self.hooks: list[str] = []

    def call_started(self, call: ToolCall) -> None:
        self.hooks.append("call_started")

    def attempt_started(self, call: ToolCall) -> None:
        self.hooks.append("attempt_started")


class Exploding(CallEvents):
    enabled = True

    def call_started(self, call: ToolCall) -> None:
        raise RuntimeError("recorder bug")

    def attempt_started(self, call: ToolCall) -> None:
        raise RuntimeError("recorder bug")


def test_no_recorder_is_the_null_recorder() -> None:
    assert combine([]) is NULL and combine([NULL]) is NULL and not NULL.enabled


def test_a_failing_recorder_is_logged_and_the_next_one_still_sees_every_hook() -> None:
    seen = Seen()
    events = combine([Exploding(), seen])
    call = ToolCall(name="t", arguments={}, upstream="up", upstream_tool="t", rule=ToolRule())
    with capture_logs() as logs:
        events.call_started(call)
        events.attempt_started(call)
    assert seen.hooks == ["call_started", "attempt_started"]
    assert [(e["event"], e["hook"], e["recorder"]) for e in logs] == [
        ("ops_recorder_failed", "call_started", "Exploding"),
        ("ops_recorder_failed", "attempt_started", "Exploding"),
    ]
