"""A fault is immutable once built: no stage can rewrite what was classified; a stage that changes a verdict derives
a new fault (``Fault.replace``, ``Fault.with_details``), and the one it was given stays as it was."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import FrozenInstanceError
from typing import Any

import anyio
import pytest

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.faults import (
    BY_TYPE,
    FIELDS,
    ConnectionLost,
    Fault,
    PermanentExecutionError,
    RateLimited,
    RepairAction,
    RetrySafety,
    SideEffectStatus,
    TransientExecutionError,
)
from resilient_mcp.policy import EffectClass, PolicyFile, ToolRule
from resilient_mcp.stages.guard import Guard, SessionGuards
from resilient_mcp.stages.retry import Retry, RetryBudgets
from tests.harness import ScriptedNext

pytestmark = pytest.mark.anyio

WRITE = ToolRule(effect=EffectClass.WRITE_UNSAFE)
READ = ToolRule(effect=EffectClass.READ_ONLY)


def make_call(rule: ToolRule) -> ToolCall:
    return ToolCall(name="create_order", arguments={"qty": 1}, upstream="shop", upstream_tool="create_order", rule=rule)


def facts(fault: Fault) -> dict[str, Any]:
    return {name: getattr(fault, name) for name in FIELDS} | {"details": dict(fault.details)}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_no_fact_of_a_fault_can_be_assigned_or_deleted(name: str) -> None:
    fault = TransientExecutionError("boom", details={"basis": "observed"})
    before = facts(fault)
    with pytest.raises(FrozenInstanceError, match="immutable"):
        setattr(fault, name, None)
    with pytest.raises(FrozenInstanceError):
        delattr(fault, name)
    assert facts(fault) == before


def test_the_details_of_a_fault_cannot_be_written() -> None:
    fault = TransientExecutionError("boom", details={"basis": "observed"})
    writes = [
        lambda d: d.__setitem__("basis", "typed_hint"),
        lambda d: d.__delitem__("basis"),
        lambda d: d.update(retry_stopped="deadline"),
        lambda d: d.setdefault("retry_stopped", "deadline"),
        lambda d: d.pop("basis"),
        lambda d: d.popitem(),
        lambda d: d.clear(),
    ]
    for write in writes:
        with pytest.raises(TypeError, match="read-only"):
            write(fault.details)
    assert fault.details == {"basis": "observed"}


def test_replace_derives_a_new_fault_of_the_same_class_and_leaves_the_original_as_it_was() -> None:
    fault = RateLimited.of("http_429", details={"basis": "observed"}, retry_after_ms=500)
    before = facts(fault)
    derived = fault.replace(retry_safety=RetrySafety.MAYBE_EXECUTED, message="said otherwise")
    assert type(derived) is RateLimited and derived is not fault
    assert derived.retry_safety is RetrySafety.MAYBE_EXECUTED and derived.retry_after_ms == 500
    assert derived.message == str(derived) == "said otherwise"
    assert facts(fault) == before
    with pytest.raises(FrozenInstanceError):
        derived.max_retry = 3
    with pytest.raises(TypeError, match="not \\['fault_type'\\]"):
        fault.replace(fault_type="D1_transient_execution_error")


def test_with_details_adds_facts_and_keep_never_overwrites_one() -> None:
    fault = ConnectionLost("lost", details={"basis": "observed"})
    assert fault.with_details(basis="typed_hint", n=1).details == {"basis": "typed_hint", "n": 1}
    assert fault.with_details(keep=True, basis="typed_hint", n=1).details == {"basis": "observed", "n": 1}
    assert fault.with_details(keep=True, basis="typed_hint") is fault
    assert fault.details == {"basis": "observed"}


def test_copies_and_pickles_of_a_fault_are_equal_and_frozen_too() -> None:
    for cls in BY_TYPE.values():
        fault = cls("x", details={"basis": "observed", "nested": {"a": 1}}, upstream_message="u", max_retry=1)
        for twin in (copy.copy(fault), copy.deepcopy(fault), pickle.loads(pickle.dumps(fault))):
            assert type(twin) is cls and facts(twin) == facts(fault) and twin.args == fault.args
            with pytest.raises(FrozenInstanceError):
                twin.message = "y"
            with pytest.raises(TypeError):
                twin.details["basis"] = "typed_hint"  # type: ignore[index]


async def test_raising_a_fault_still_works_where_python_and_anyio_write_its_exception_attributes() -> None:
    @contextmanager
    def passing_through() -> Iterator[None]:
        yield  # contextlib sets __traceback__ on the way out

    async def fail() -> None:
        raise PermanentExecutionError("failed")

    with pytest.raises(PermanentExecutionError) as caught, passing_through():
        try:
            raise ConnectionLost("lost")
        except ConnectionLost as lost:
            raise PermanentExecutionError("failed") from lost
    assert isinstance(caught.value.__cause__, ConnectionLost)
    caught.value.add_note("a note")  # __notes__
    with pytest.raises(ExceptionGroup) as group:
        async with anyio.create_task_group() as tg:
            tg.start_soon(fail)
    assert isinstance(group.value.exceptions[0], PermanentExecutionError)


# --- stages derive, never rewrite ---------------------------------------------------------------------------------


async def no_sleep(_: float) -> None:
    return None


async def test_the_retry_stage_surfaces_a_derived_fault_and_the_attempts_fault_stays_as_classified() -> None:
    attempt = RateLimited("slow down", retry_after_ms=60_000)  # past the cap: retry_stopped and retry_at
    before = facts(attempt)
    with pytest.raises(RateLimited) as left:
        await Retry(WRITE, RetryBudgets(), sleep=no_sleep)(make_call(WRITE), ScriptedNext([attempt]))
    assert left.value is not attempt
    assert left.value.details["retry_stopped"] == "retry_after_over_cap" and "retry_at" in left.value.details
    assert facts(attempt) == before


async def test_the_retry_stage_derives_the_verify_state_verdict_of_an_unsafe_write() -> None:
    first = TransientExecutionError("boom", retry_safety=RetrySafety.NOT_SENT)
    unknown = TransientExecutionError("boom")  # maybe executed: a write_unsafe tool is not repeated
    before = facts(unknown)
    with pytest.raises(TransientExecutionError) as left:
        await Retry(WRITE, RetryBudgets(), sleep=no_sleep)(make_call(WRITE), ScriptedNext([first, unknown]))
    assert (left.value.side_effect_status, left.value.repair_action, left.value.max_retry) == (
        SideEffectStatus.UNKNOWN,
        RepairAction.VERIFY_STATE,
        0,
    )
    assert facts(unknown) == before


async def test_the_loop_guard_answers_a_repeat_with_a_derived_fault_and_leaves_the_upstreams_faults_alone() -> None:
    guard = Guard(PolicyFile().session, SessionGuards())
    failures = [PermanentExecutionError("no such order") for _ in range(3)]
    before = [facts(f) for f in failures]
    upstream = ScriptedNext(list(failures))
    raised = []
    for _ in range(3):
        with pytest.raises(PermanentExecutionError) as caught:
            await guard(make_call(READ), upstream)
        raised.append(caught.value)
    assert len(upstream.calls) == 1, "the identical repeats were answered by the guard"
    assert [f.details.get("repeat_count") for f in raised] == [None, 1, 2]
    assert raised[2].repair_action is RepairAction.ABORT
    assert all(f not in failures for f in raised[1:])
    assert [facts(f) for f in failures] == before
