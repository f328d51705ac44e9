"""The guard stage: per-session budgets and the loop guard that answers identical failing calls without sending them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.faults import (
    AttemptTimeout,
    BudgetExhausted,
    EffectClass,
    Fault,
    PermanentExecutionError,
    PermissionDenied,
    PersistentOutage,
    RateLimited,
    RepairAction,
    RetrySafety,
    SchemaViolation,
    SideEffectStatus,
    StateConflict,
    TransientExecutionError,
)
from resilient_mcp.policy import SessionRule, ToolRule
from resilient_mcp.stages.guard import Guard, SessionGuards
from resilient_mcp.stages.idempotency import Idempotency, InFlight
from resilient_mcp.state.sqlite import StateStore
from tests.conftest import FakeClock
from tests.harness import ScriptedNext

pytestmark = pytest.mark.anyio


def make_call(arguments: dict[str, Any] | None = None, session: str = "s1") -> ToolCall:
    return ToolCall(
        name="orders__get_order",
        arguments={"id": "A-1"} if arguments is None else arguments,
        upstream="orders",
        upstream_tool="get_order",
        rule=ToolRule(),
        session_id=session,
    )


def make_guard(clock: FakeClock | None = None, guards: SessionGuards | None = None, **rule: Any) -> Guard:
    return Guard(SessionRule(**rule), guards or SessionGuards(), clock=clock or FakeClock())


async def fails_with(guard: Guard, upstream: ScriptedNext, call: ToolCall | None = None) -> Fault:
    with pytest.raises(Fault) as info:
        await guard(call or make_call(), upstream)
    return info.value


def timed_out() -> AttemptTimeout:
    return AttemptTimeout("timed out", retry_safety=RetrySafety.MAYBE_EXECUTED)


def not_found() -> PermanentExecutionError:
    return PermanentExecutionError("Order A-1 does not exist.", details={"error_type": "not_found"})


async def test_calls_beyond_the_tool_call_budget_are_refused_with_counts_and_a_graded_suggestion() -> None:
    guard, upstream = make_guard(max_tool_calls=3), ScriptedNext([None, not_found(), None])
    await guard(make_call({"id": "1"}), upstream)
    await fails_with(guard, upstream, make_call({"id": "2"}))
    await guard(make_call({"id": "3"}), upstream)
    call = make_call({"id": "4"})
    fault = await fails_with(guard, upstream, call)
    assert isinstance(fault, BudgetExhausted) and len(upstream.calls) == 3
    assert fault.details == {"budget": "tool_calls", "limit": 3, "used": 3, "calls_ok": 2, "calls_failed": 1}
    assert fault.repair_action is RepairAction.ABORT
    assert fault.suggestion is not None and "You made 3 calls (2 succeeded)" in fault.suggestion
    assert "summarize what you achieved and what is missing, and stop" in fault.suggestion
    assert call.record.decided_by == "guard"


async def test_the_failure_budget_refuses_once_spent_and_says_so_when_nothing_succeeded() -> None:
    guard = make_guard(max_failures=2)
    upstream = ScriptedNext([not_found(), not_found()])
    for n in range(2):
        await fails_with(guard, upstream, make_call({"id": str(n)}))
    fault = await fails_with(guard, upstream, make_call({"id": "other"}))
    assert isinstance(fault, BudgetExhausted) and len(upstream.calls) == 2
    assert fault.details == {"budget": "failures", "limit": 2, "used": 2, "calls_ok": 0, "calls_failed": 2}
    assert "tell the user what blocked you" in (fault.suggestion or "")


async def test_an_identical_call_after_a_permanent_failure_is_answered_without_calling_upstream() -> None:
    guard, upstream = make_guard(), ScriptedNext([not_found()])
    first = await fails_with(guard, upstream)
    call = make_call()
    repeat = await fails_with(guard, upstream, call)
    assert len(upstream.calls) == 1
    assert type(repeat) is PermanentExecutionError and repeat is not first
    assert repeat.message == first.message
    assert repeat.details == {"error_type": "not_found", "repeat_count": 1, "short_circuited": True}
    assert repeat.retry_safety is RetrySafety.NOT_SENT and repeat.side_effect_status is SideEffectStatus.NONE
    assert repeat.repair_action is RepairAction.SWITCH_TOOL and repeat.max_retry == 0
    assert "not sent again" in (repeat.suggestion or "")
    assert call.record.decided_by == "guard"
    assert "repeat_count" not in first.details, "the recorded fault is not mutated"


async def test_an_identical_call_after_an_unrecognised_failure_is_let_through_once() -> None:
    """The proxy did not recognise the error, so it cannot say a repeat fails the same way (a terse "error" from a
    server that failed once): one identical repeat reaches the upstream, a second is answered by the guard."""

    def unrecognised() -> PermanentExecutionError:
        return PermanentExecutionError("error", details={"basis": "unrecognised"})

    guard, upstream = make_guard(loop_threshold=3), ScriptedNext([unrecognised(), unrecognised()])
    await fails_with(guard, upstream)
    second = await fails_with(guard, upstream)
    third = await fails_with(guard, upstream)
    assert len(upstream.calls) == 2
    assert "short_circuited" not in second.details and second.details["repeat_count"] == 1
    assert third.details["short_circuited"] is True and third.repair_action is RepairAction.ABORT


async def test_an_unrecognised_failure_followed_by_a_success_is_forgotten() -> None:
    guard, upstream = (
        make_guard(),
        ScriptedNext([PermanentExecutionError("error", details={"basis": "unrecognised"}), None]),
    )
    await fails_with(guard, upstream)
    assert not (await guard(make_call(), upstream)).is_error
    assert len(upstream.calls) == 2


async def test_repeating_an_identical_failing_call_up_to_the_threshold_turns_the_advice_into_abort() -> None:
    guard, upstream = make_guard(loop_threshold=3), ScriptedNext([SchemaViolation("bad arguments")])
    await fails_with(guard, upstream)
    second = await fails_with(guard, upstream)
    third = await fails_with(guard, upstream)
    assert len(upstream.calls) == 1
    assert second.repair_action is RepairAction.FIX_PARAMETER and second.details["repeat_count"] == 1
    assert third.repair_action is RepairAction.ABORT and third.details["repeat_count"] == 2
    assert "stop repeating" in (third.suggestion or "")


async def test_a_call_with_different_arguments_is_not_short_circuited() -> None:
    guard, upstream = make_guard(), ScriptedNext([not_found(), None])
    await fails_with(guard, upstream, make_call({"id": "A-1"}))
    await guard(make_call({"id": "A-2"}), upstream)
    assert len(upstream.calls) == 2


async def test_key_order_does_not_make_a_call_different() -> None:
    guard, upstream = make_guard(), ScriptedNext([not_found()])
    await fails_with(guard, upstream, make_call({"a": 1, "b": 2}))
    repeat = await fails_with(guard, upstream, make_call({"b": 2, "a": 1}))
    assert len(upstream.calls) == 1 and repeat.details["short_circuited"] is True


async def test_a_transient_failure_without_retry_after_is_let_through_and_counted() -> None:
    guard = make_guard(loop_threshold=3)
    upstream = ScriptedNext([TransientExecutionError("busy") for _ in range(3)])
    first = await fails_with(guard, upstream)
    second = await fails_with(guard, upstream)
    third = await fails_with(guard, upstream)
    assert len(upstream.calls) == 3
    assert "repeat_count" not in first.details and second.details["repeat_count"] == 1
    assert "short_circuited" not in second.details
    assert third.repair_action is RepairAction.ABORT


async def test_a_transient_failure_with_retry_after_is_short_circuited_only_until_it_elapses(clock: FakeClock) -> None:
    guard = make_guard(clock)
    upstream = ScriptedNext([RateLimited("slow down", retry_after_ms=2000), None])
    await fails_with(guard, upstream)
    clock.now += 0.5
    early = await fails_with(guard, upstream)
    assert len(upstream.calls) == 1 and isinstance(early, RateLimited)
    assert early.retry_after_ms == 1500 and early.details["short_circuited"] is True
    assert "Wait at least 1500 ms" in (early.suggestion or "")
    clock.now += 1.5
    await guard(make_call(), upstream)
    assert len(upstream.calls) == 2


async def test_a_success_forgets_the_failures_of_that_call() -> None:
    guard = make_guard()
    upstream = ScriptedNext([TransientExecutionError("busy"), TransientExecutionError("busy"), None, not_found()])
    await fails_with(guard, upstream)
    assert (await fails_with(guard, upstream)).details["repeat_count"] == 1
    await guard(make_call(), upstream)
    again = await fails_with(guard, upstream)
    assert "repeat_count" not in again.details and len(upstream.calls) == 4
    assert guard.snapshot("s1")["recent_failures"] == [
        {"tool": "orders__get_order", "fault_type": "D4_permanent_execution_error", "repeat_count": 0}
    ]


@pytest.mark.parametrize(
    "fault",
    [
        PermissionDenied("user said no", details={"approval": "declined"}),
        PermissionDenied("user closed it", details={"approval": "cancelled"}),
        PersistentOutage("breaker open"),
    ],
)
async def test_refusals_that_a_person_or_time_can_change_are_not_short_circuited(fault: Fault) -> None:
    guard, upstream = make_guard(), ScriptedNext([fault, None])
    await fails_with(guard, upstream)
    await guard(make_call(), upstream)
    assert len(upstream.calls) == 2


async def test_a_policy_refusal_is_short_circuited_like_an_argument_mistake() -> None:
    refusal = PermissionDenied("needs approval", details={"approval": "required"})
    guard, upstream = make_guard(), ScriptedNext([refusal])
    await fails_with(guard, upstream)
    repeat = await fails_with(guard, upstream)
    assert len(upstream.calls) == 1 and repeat.details["repeat_count"] == 1


async def test_a_cancelled_call_is_not_a_failure() -> None:
    guard = make_guard()

    async def cancelled(call: ToolCall) -> types.CallToolResult:
        scope.cancel()
        await anyio.lowlevel.checkpoint()
        raise AssertionError("cancellation did not arrive")

    with anyio.CancelScope() as scope:
        await guard(make_call(), cancelled)
    snapshot = guard.snapshot("s1")
    assert snapshot["failures"]["used"] == 0 and snapshot["recent_failures"] == []
    assert snapshot["tool_calls"]["used"] == 1


async def test_sessions_are_counted_apart_and_the_least_recently_used_is_evicted() -> None:
    guards = SessionGuards(max_sessions=2)
    guard, upstream = make_guard(guards=guards, max_tool_calls=1), ScriptedNext()
    await guard(make_call(session="a"), upstream)
    await guard(make_call(session="b"), upstream)
    await fails_with(guard, upstream, make_call(session="a"))  # a is over budget and now most recent
    await guard(make_call(session="c"), upstream)  # evicts b
    assert guards.peek("b") is None and guards.peek("a") is not None
    await guard(make_call(session="b"), upstream)  # b starts afresh
    assert len(upstream.calls) == 4


async def test_failed_fingerprints_per_session_are_bounded_oldest_first() -> None:
    guards = SessionGuards(max_fingerprints=2)
    guard = make_guard(guards=guards)
    upstream = ScriptedNext([not_found(), not_found(), not_found(), None])
    for n in range(3):
        await fails_with(guard, upstream, make_call({"id": str(n)}))
    await guard(make_call({"id": "0"}), upstream)  # forgotten, so sent again
    await fails_with(guard, upstream, make_call({"id": "2"}))  # remembered, so short-circuited
    assert len(upstream.calls) == 4


async def test_snapshot_reports_remaining_budgets_and_recent_failures_newest_first() -> None:
    guard = make_guard(max_tool_calls=10, max_failures=5)
    upstream = ScriptedNext([not_found(), SchemaViolation("bad"), None])
    await fails_with(guard, upstream, make_call({"id": "1"}))
    await fails_with(guard, upstream, make_call({"id": "2"}))
    await fails_with(guard, upstream, make_call({"id": "1"}))
    await guard(make_call({"id": "3"}), upstream)
    assert guard.snapshot("s1") == {
        "tool_calls": {"limit": 10, "used": 4, "remaining": 6},
        "failures": {"limit": 5, "used": 3, "remaining": 2},
        "calls_ok": 1,
        "recent_failures": [
            {"tool": "orders__get_order", "fault_type": "D4_permanent_execution_error", "repeat_count": 1},
            {"tool": "orders__get_order", "fault_type": "B2_schema_violation", "repeat_count": 0},
        ],
    }
    assert guard.snapshot("unknown-session")["tool_calls"] == {"limit": 10, "used": 0, "remaining": 10}


async def test_a_write_held_unsent_until_verified_is_not_counted_as_a_repeat(
    store: StateStore, clock: FakeClock
) -> None:
    """A write's outcome is unknown; the agent repeats it and the idempotency stage holds it unsent; the agent
    verifies (the write is absent) and re-issues. That re-issue is the first repeat the upstream sees: if it fails
    again, the advice is still to verify, not to abort as after a third identical failure."""
    guards = SessionGuards()
    guard = Guard(SessionRule(loop_threshold=3), guards, clock=clock, wall=clock)
    write_rule = ToolRule(effect=EffectClass.WRITE_UNSAFE)
    stage = Idempotency(write_rule, store, InFlight(), clock, guards=guards)
    writes = ScriptedNext([timed_out(), timed_out()])

    async def chain(call: ToolCall) -> types.CallToolResult:
        return await stage(call, writes)

    def write() -> ToolCall:
        return ToolCall(
            name="orders__create",
            arguments={"ref": "R1"},
            upstream="orders",
            upstream_tool="create",
            rule=write_rule,
            session_id="s1",
        )

    first = await fails_with(guard, chain, write())  # type: ignore[arg-type]
    held = await fails_with(guard, chain, write())  # type: ignore[arg-type]
    assert isinstance(first, AttemptTimeout) and isinstance(held, StateConflict) and len(writes.calls) == 1
    clock.now += 1
    read = replace(make_call(), rule=ToolRule(effect=EffectClass.READ_ONLY))
    await guard(read, ScriptedNext())  # the verifying read (read-only, succeeds): the write is absent
    clock.now += 1
    again = await fails_with(guard, chain, write())  # type: ignore[arg-type]
    assert len(writes.calls) == 2, "the re-issue after verifying was sent"
    assert again.details["repeat_count"] == 1
    assert again.repair_action is not RepairAction.ABORT


async def test_a_session_without_failed_calls_does_not_fingerprint_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: every call hashed its canonical arguments for a lookup in an empty map, and again to forget them.
    import resilient_mcp.stages.guard as guard_module

    hashed: list[ToolCall] = []

    def counting(call: ToolCall) -> str:
        hashed.append(call)
        return f"fp-{sorted((call.arguments or {}).items())}"

    monkeypatch.setattr(guard_module, "fingerprint", counting)
    guard, upstream = make_guard(), ScriptedNext([None, None, timed_out(), None, None])
    await guard(make_call({"id": "A-1"}), upstream)
    await guard(make_call({"id": "A-2"}), upstream)
    assert hashed == [], "no failure to match: nothing hashed"
    await fails_with(guard, upstream, make_call({"id": "A-9"}))
    assert len(hashed) == 1, "a failure is remembered by its fingerprint"
    await guard(make_call({"id": "A-9"}), upstream)  # the identical call succeeds: its failure is forgotten
    state = guard._guards.session("s1")
    assert not state.failures and state.calls_ok == 3 and state.calls_failed == 1
    assert len(hashed) == 2, "looked up once, before the call (the success forgets it under that key)"
    await guard(make_call({"id": "A-3"}), upstream)
    assert len(hashed) == 2, "once nothing failed is left, a success hashes nothing again"
