"""The access stage: tools that require approval run only after a person accepts through elicitation."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.faults import EffectClass, PermissionDenied, RepairAction, RetrySafety
from resilient_mcp.policy import ToolRule
from resilient_mcp.stages.access import APPROVAL_SCHEMA, Access, denied_fault
from tests.harness import ScriptedNext

pytestmark = pytest.mark.anyio


class FakeHost:
    """A HostLink that answers every elicitation with a fixed result (or error) and remembers the questions."""

    def __init__(self, answer: types.ElicitResult | Exception | None = None, *, can_elicit: bool = True) -> None:
        self.answer = answer
        self.can_elicit = can_elicit
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.envelope = None  # no host request: nothing for the upstream side

    @property
    def supports_elicitation(self) -> bool:
        return self.can_elicit

    async def report_progress(self, progress: float, total: float | None, message: str | None) -> None:
        return None

    async def elicit(self, message: str, requested_schema: dict[str, Any]) -> types.ElicitResult:
        self.asked.append((message, requested_schema))
        if isinstance(self.answer, Exception):
            raise self.answer
        assert self.answer is not None
        return self.answer


APPROVAL = ToolRule(effect=EffectClass.DESTRUCTIVE, require_approval=True)


def make_call(host: FakeHost | None, arguments: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(
        name="fs__delete_file",
        arguments={"path": "/data/report.txt"} if arguments is None else arguments,
        upstream="fs",
        upstream_tool="delete_file",
        rule=APPROVAL,
        host=host,
    )


async def test_a_tool_without_an_approval_rule_runs_without_asking() -> None:
    host, call_next = FakeHost(), ScriptedNext()
    call = make_call(host)
    await Access(ToolRule())(call, call_next)
    assert call_next.calls == [call] and host.asked == []


async def test_an_accepted_approval_lets_the_call_through_after_a_clear_question() -> None:
    host, call_next = FakeHost(types.ElicitResult(action="accept", content={"approve": True})), ScriptedNext()
    call = make_call(host)
    await Access(APPROVAL)(call, call_next)
    assert call_next.calls == [call]
    ((message, schema),) = host.asked
    assert "fs__delete_file" in message and "'fs'" in message and "destructive" in message
    assert '"path": "/data/report.txt"' in message
    assert schema == APPROVAL_SCHEMA
    assert schema["properties"]["approve"]["type"] == "boolean" and schema["required"] == ["approve"]
    assert call.record.decided_by is None


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (types.ElicitResult(action="decline"), "declined"),
        (types.ElicitResult(action="cancel"), "cancelled"),
        (types.ElicitResult(action="accept", content={"approve": False}), "declined"),
        (types.ElicitResult(action="accept", content={}), "declined"),
        (types.ElicitResult(action="accept", content={"approve": "true"}), "declined"),
    ],
)
async def test_anything_but_an_explicit_approval_refuses_the_call(answer: types.ElicitResult, outcome: str) -> None:
    call_next = ScriptedNext()
    call = make_call(FakeHost(answer))
    with pytest.raises(PermissionDenied) as info:
        await Access(APPROVAL)(call, call_next)
    assert call_next.calls == []
    assert info.value.details == {"approval": outcome}
    assert info.value.repair_action is RepairAction.ASK_USER
    assert info.value.retry_safety is RetrySafety.NOT_SENT
    assert call.record.decided_by == "access"


@pytest.mark.parametrize("host", [FakeHost(can_elicit=False), None])
async def test_a_host_that_cannot_ask_gets_a_refusal_that_names_the_way_out(host: FakeHost | None) -> None:
    call_next = ScriptedNext()
    call = make_call(host)
    with pytest.raises(PermissionDenied) as info:
        await Access(APPROVAL)(call, call_next)
    assert call_next.calls == [] and (host is None or host.asked == [])
    assert info.value.details == {"approval": "required", "reason": "host does not support elicitation"}
    suggestion = info.value.suggestion or ""
    assert "Ask the user" in suggestion and "administrator" in suggestion and "require_approval" in suggestion
    assert call.record.decided_by == "access"


async def test_a_failing_elicitation_is_a_refusal_not_an_approval() -> None:
    call_next = ScriptedNext()
    call = make_call(FakeHost(RuntimeError("client went away")))
    with pytest.raises(PermissionDenied) as info:
        await Access(APPROVAL)(call, call_next)
    assert call_next.calls == []
    assert info.value.details == {"approval": "unavailable"}
    assert isinstance(info.value.__cause__, RuntimeError)


async def test_long_arguments_are_cut_in_the_approval_question() -> None:
    host = FakeHost(types.ElicitResult(action="accept", content={"approve": True}))
    await Access(APPROVAL)(make_call(host, {"content": "x" * 5000}), ScriptedNext())
    ((message, _),) = host.asked
    assert len(message) < 600 and message.endswith("…")


def test_a_denied_tool_is_refused_with_abort_and_a_suggestion() -> None:
    fault = denied_fault("fs__delete_file")
    assert isinstance(fault, PermissionDenied)
    assert fault.repair_action is RepairAction.ABORT and fault.retry_safety is RetrySafety.NOT_SENT
    assert fault.details == {"policy_rule": "deny", "tool": "fs__delete_file"}
    assert "fs__delete_file" in (fault.suggestion or "") and "another listed tool" in (fault.suggestion or "")
