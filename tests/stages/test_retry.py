"""The retry stage: rule R, attempt limits, full-jitter backoff, Retry-After, the retry budget and the deadline."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import mcp_types as types
import pytest

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.faults import (
    AttemptTimeout,
    ConnectFailure,
    ConnectionLost,
    EffectClass,
    PermanentExecutionError,
    PersistentOutage,
    RateLimited,
    RepairAction,
    RetrySafety,
    SchemaViolation,
    SideEffectStatus,
    TransientExecutionError,
)
from resilient_mcp.policy import IdempotencyRule, RetryRule, TimeoutRule, ToolRule
from resilient_mcp.stages.retry import Retry, RetryBudgets
from tests.conftest import FakeClock
from tests.harness import OK, ScriptedNext

pytestmark = pytest.mark.anyio


@dataclass
class Host:
    supports_elicitation: bool = False
    envelope: None = None
    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)

    async def report_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def elicit(self, message: str, requested_schema: dict[str, Any]) -> types.ElicitResult:
        raise NotImplementedError


def rule(effect: EffectClass = EffectClass.READ_ONLY, **over: Any) -> ToolRule:
    return ToolRule(effect=effect, **over)


def tool_call(r: ToolRule, name: str = "create_order", host: Host | None = None) -> ToolCall:
    return ToolCall(name=name, arguments={}, upstream="shop", upstream_tool=name, rule=r, host=host)


@dataclass
class Rig:
    """The stage's clock and its injected sleep (``clock.sleep``: each delay kept in ``clock.slept``), and budgets."""

    clock: FakeClock
    budgets: RetryBudgets

    def stage(self, r: ToolRule, seed: int = 1) -> Retry:
        return Retry(r, self.budgets, sleep=self.clock.sleep, clock=self.clock, random=random.Random(seed))


@pytest.fixture
def rig(clock: FakeClock) -> Rig:
    return Rig(clock, RetryBudgets())


def timeout() -> AttemptTimeout:
    return AttemptTimeout("t", retry_safety=RetrySafety.MAYBE_EXECUTED)


async def test_read_only_tool_that_times_out_once_is_retried_and_succeeds(rig: Rig) -> None:
    upstream = ScriptedNext([timeout(), None])
    call = tool_call(rule())
    result = await rig.stage(rule())(call, upstream)
    assert result is OK
    assert len(upstream.calls) == 2
    assert [a.outcome for a in call.record.attempts] == ["C3_attempt_timeout", "ok"]
    assert call.record.attempts[0].fault_type == "C3_attempt_timeout"
    assert [a.n for a in call.record.attempts] == [1, 2]
    assert len(rig.clock.slept) == 1 and 0 <= rig.clock.slept[0] <= 0.1
    assert call.record.attempts[1].delay_before_ms == round(rig.clock.slept[0] * 1000)


async def test_write_tool_is_not_retried_after_timeout_and_reports_outcome_unknown(rig: Rig) -> None:
    r = rule(EffectClass.WRITE_UNSAFE)
    upstream = ScriptedNext([timeout(), None])
    call = tool_call(r)
    with pytest.raises(AttemptTimeout) as caught:
        await rig.stage(r)(call, upstream)
    assert len(upstream.calls) == 1
    assert caught.value.side_effect_status is SideEffectStatus.UNKNOWN
    assert caught.value.repair_action is RepairAction.VERIFY_STATE
    assert caught.value.max_retry == 0
    assert caught.value.details["retry_stopped"] == "may_have_executed"
    assert rig.clock.slept == []


async def test_destructive_tool_losing_its_connection_after_send_is_not_retried(rig: Rig) -> None:
    r = rule(EffectClass.DESTRUCTIVE)
    upstream = ScriptedNext([ConnectionLost("lost"), None])
    with pytest.raises(ConnectionLost) as caught:
        await rig.stage(r)(tool_call(r), upstream)
    assert len(upstream.calls) == 1
    assert caught.value.repair_action is RepairAction.VERIFY_STATE


async def test_write_whose_upstream_honours_idempotency_keys_is_retried_after_timeout(rig: Rig) -> None:
    r = rule(EffectClass.WRITE_UNSAFE, idempotency=IdempotencyRule(forward_key_as="idempotency_key"))
    upstream = ScriptedNext([timeout(), None])
    assert await rig.stage(r)(tool_call(r), upstream) is OK
    assert len(upstream.calls) == 2


async def test_maybe_executed_faults_get_two_attempts_in_all(rig: Rig) -> None:
    r = rule(EffectClass.WRITE_IDEMPOTENT)
    upstream = ScriptedNext([timeout(), timeout(), timeout(), None])
    call = tool_call(r)
    with pytest.raises(AttemptTimeout) as caught:
        await rig.stage(r)(call, upstream)
    assert len(upstream.calls) == 2
    assert caught.value.details["retry_stopped"] == "max_attempts"
    assert caught.value.repair_action is RepairAction.BACKOFF_RETRY  # repeatable: no verify needed


async def test_write_that_was_never_sent_is_retried_and_executes_once(rig: Rig) -> None:
    r = rule(EffectClass.WRITE_UNSAFE)
    upstream = ScriptedNext([ConnectFailure("refused"), None])
    assert await rig.stage(r)(tool_call(r), upstream) is OK
    assert len(upstream.calls) == 2  # one refused connection, then the one execution


async def test_not_sent_faults_get_three_attempts_in_all(rig: Rig) -> None:
    r = rule(EffectClass.WRITE_UNSAFE)
    upstream = ScriptedNext([ConnectFailure("refused")] * 4)
    call = tool_call(r)
    with pytest.raises(ConnectFailure):
        await rig.stage(r)(call, upstream)
    assert len(upstream.calls) == 3
    assert [a.outcome for a in call.record.attempts] == ["C1_connect_failure"] * 3


async def test_once_an_attempt_may_have_executed_the_limit_drops_to_two(rig: Rig) -> None:
    upstream = ScriptedNext([ConnectFailure("refused"), timeout(), ConnectFailure("refused"), None])
    with pytest.raises(AttemptTimeout):
        await rig.stage(rule())(tool_call(rule()), upstream)
    assert len(upstream.calls) == 2


async def test_rate_limit_with_retry_after_is_slept_exactly_then_succeeds(rig: Rig) -> None:
    upstream = ScriptedNext([RateLimited("slow down", retry_after_ms=1000), None])
    assert await rig.stage(rule())(tool_call(rule()), upstream) is OK
    assert rig.clock.slept == [1.0]
    assert len(upstream.calls) == 2


async def test_retry_after_beyond_the_cap_is_surfaced_without_sleeping(rig: Rig) -> None:
    day_ms = 86_400_000
    upstream = ScriptedNext([RateLimited("come back tomorrow", retry_after_ms=day_ms), None])
    with pytest.raises(RateLimited) as caught:
        await rig.stage(rule())(tool_call(rule()), upstream)
    assert rig.clock.slept == []
    assert len(upstream.calls) == 1
    assert caught.value.retry_after_ms == day_ms
    assert caught.value.details["retry_stopped"] == "retry_after_over_cap"
    retry_at = datetime.fromisoformat(caught.value.details["retry_at"])
    assert abs(retry_at - (datetime.now(UTC) + timedelta(days=1))) < timedelta(minutes=1)


async def test_retry_after_past_the_deadline_is_surfaced_without_sleeping(rig: Rig) -> None:
    r = rule(timeouts=TimeoutRule(attempt_s=2, total_s=5))
    upstream = ScriptedNext([RateLimited("later", retry_after_ms=8000), None])
    with pytest.raises(RateLimited) as caught:
        await rig.stage(r)(tool_call(r), upstream)
    assert rig.clock.slept == []
    assert caught.value.details["retry_stopped"] == "retry_after_past_deadline"
    assert "retry_at" in caught.value.details


async def test_failures_that_executed_are_never_retried(rig: Rig) -> None:
    for fault in (
        PermanentExecutionError("no"),
        TransientExecutionError("x", retry_safety=RetrySafety.EXECUTED_FAILED),
    ):
        upstream = ScriptedNext([fault, None])
        with pytest.raises(type(fault)):
            await rig.stage(rule())(tool_call(rule()), upstream)
        assert len(upstream.calls) == 1
    assert rig.clock.slept == []


async def test_a_fault_the_rules_did_not_recognise_is_never_retried_whatever_the_effect_class(rig: Rig) -> None:
    """Even marked transient and not sent, on a read_only tool: the proxy does not know what it is (issue 19)."""
    for effect in EffectClass:
        fault = TransientExecutionError("x", retry_safety=RetrySafety.NOT_SENT, details={"basis": "unrecognised"})
        upstream = ScriptedNext([fault, None])
        with pytest.raises(TransientExecutionError):
            await rig.stage(rule(effect))(tool_call(rule(effect)), upstream)
        assert len(upstream.calls) == 1, effect
    assert rig.clock.slept == []


async def test_argument_faults_are_not_retried_and_leave_the_budget_alone(rig: Rig) -> None:
    upstream = ScriptedNext([SchemaViolation("bad", transient=True), None])
    with pytest.raises(SchemaViolation):
        await rig.stage(rule())(tool_call(rule()), upstream)
    assert len(upstream.calls) == 1
    assert rig.budgets.tokens("shop") == rig.budgets.max_tokens


async def test_an_open_breaker_ends_the_retries(rig: Rig) -> None:
    upstream = ScriptedNext([PersistentOutage("circuit open"), None])
    with pytest.raises(PersistentOutage):
        await rig.stage(rule())(tool_call(rule()), upstream)
    assert len(upstream.calls) == 1


async def test_backoff_is_full_jitter_exponential_capped_and_seeded(rig: Rig) -> None:
    r = rule(retry=RetryRule(max_attempts=7, backoff_base_ms=100, backoff_cap_ms=400))
    rig.budgets = RetryBudgets(max_tokens=100)
    upstream = ScriptedNext([ConnectFailure("refused")] * 6 + [None])
    assert await rig.stage(r, seed=7)(tool_call(r), upstream) is OK
    bounds = [0.1, 0.2, 0.4, 0.4, 0.4, 0.4]
    expected_rng = random.Random(7)
    assert rig.clock.slept == [expected_rng.uniform(0, b) for b in bounds]
    assert all(0 <= d <= b for d, b in zip(rig.clock.slept, bounds, strict=True))


async def test_retry_budget_stops_retries_to_a_failing_upstream_and_refills_on_success(rig: Rig) -> None:
    stage = rig.stage(rule())
    first = ScriptedNext([ConnectFailure("refused")] * 3)
    with pytest.raises(ConnectFailure):
        await stage(tool_call(rule()), first)
    assert len(first.calls) == 3 and rig.budgets.tokens("shop") == 7
    second = ScriptedNext([ConnectFailure("refused")] * 3)
    with pytest.raises(ConnectFailure) as caught:
        await stage(tool_call(rule()), second)
    assert len(second.calls) == 2 and rig.budgets.tokens("shop") == 5
    assert caught.value.details["retry_stopped"] == "retry_budget"
    third = ScriptedNext([ConnectFailure("refused")] * 3)
    with pytest.raises(ConnectFailure):
        await stage(tool_call(rule()), third)
    assert len(third.calls) == 1  # no retries while tokens <= 5
    for _ in range(30):  # 4 + 30 * 0.1 = 7 tokens: after one more failure (6) a retry is allowed again
        await stage(tool_call(rule()), ScriptedNext([]))
    assert rig.budgets.tokens("shop") == pytest.approx(7)
    fourth = ScriptedNext([ConnectFailure("refused"), None])
    assert await stage(tool_call(rule()), fourth) is OK
    assert len(fourth.calls) == 2


def test_retry_budget_is_per_upstream_and_bounded() -> None:
    budgets = RetryBudgets(max_tokens=10, token_ratio=0.1)
    for _ in range(5):
        budgets.on_failure("a")
    assert not budgets.allow_retry("a")
    assert budgets.allow_retry("b")
    budgets.on_success("a")
    assert budgets.allow_retry("a")
    for _ in range(100):
        budgets.on_success("a")
    assert budgets.tokens("a") == 10
    for _ in range(30):
        budgets.on_failure("a")
    assert budgets.tokens("a") == 0


class LongestWait(random.Random):
    """Full jitter always drawing the top of its window."""

    def uniform(self, a: float, b: float) -> float:
        return b


async def test_each_attempt_gets_the_attempt_timeout_bounded_by_the_time_left(rig: Rig) -> None:
    r = rule(timeouts=TimeoutRule(attempt_s=8, total_s=10), retry=RetryRule(backoff_base_ms=1000, backoff_cap_ms=5000))
    upstream = ScriptedNext([ConnectFailure("refused")] * 2 + [None], clock=rig.clock, takes_s=4.2)
    call = tool_call(r)
    stage = Retry(r, rig.budgets, sleep=rig.clock.sleep, clock=rig.clock, random=LongestWait())
    with pytest.raises(ConnectFailure) as caught:
        await stage(call, upstream)
    assert [c.attempt_timeout_s for c in upstream.calls] == [8, pytest.approx(10 - 4.2 - 1.0)]
    assert rig.clock.slept == [1.0]
    # 9.9 s used: a 2 s wait would start the third attempt past the deadline, so it is not made
    assert len(upstream.calls) == 2
    assert caught.value.details["retry_stopped"] == "deadline"
    assert [a.elapsed_ms for a in call.record.attempts] == [4200, 4200]
    assert [a.delay_before_ms for a in call.record.attempts] == [None, 1000]


async def test_the_overall_deadline_cuts_a_hanging_attempt() -> None:
    r = rule(EffectClass.WRITE_UNSAFE, timeouts=TimeoutRule(attempt_s=5, total_s=0.05))

    async def hangs(call: ToolCall) -> types.CallToolResult:
        await anyio.sleep_forever()
        raise AssertionError

    call = tool_call(r)
    budgets = RetryBudgets()
    with anyio.fail_after(5), pytest.raises(AttemptTimeout) as caught:
        await Retry(r, budgets)(call, hangs)
    assert caught.value.details == {"timeout_ms": 50, "deadline": "total"}
    assert caught.value.side_effect_status is SideEffectStatus.UNKNOWN
    assert caught.value.repair_action is RepairAction.VERIFY_STATE
    assert [a.outcome for a in call.record.attempts] == ["C3_attempt_timeout"]
    assert budgets.tokens("shop") == 9


async def test_cancellation_is_not_a_failure_and_is_not_retried(rig: Rig) -> None:
    calls = 0
    with anyio.CancelScope() as outer:

        async def cancelled(call: ToolCall) -> types.CallToolResult:
            nonlocal calls
            calls += 1
            outer.cancel()
            await anyio.sleep_forever()
            raise AssertionError

        call = tool_call(rule())
        await rig.stage(rule())(call, cancelled)
    assert outer.cancelled_caught
    assert calls == 1
    assert rig.clock.slept == []
    assert rig.budgets.tokens("shop") == rig.budgets.max_tokens
    assert [a.outcome for a in call.record.attempts] == ["cancelled"]


async def test_host_is_told_about_each_retry_while_waiting(rig: Rig) -> None:
    host = Host()
    upstream = ScriptedNext([ConnectFailure("refused"), ConnectFailure("refused"), None])
    r = rule(EffectClass.WRITE_UNSAFE)
    assert await rig.stage(r)(tool_call(r, host=host), upstream) is OK
    ms = [round(d * 1000) for d in rig.clock.slept]
    assert [p[2] for p in host.progress] == [
        f"retrying create_order in {ms[0]} ms (attempt 2 of 3): C1_connect_failure",
        f"retrying create_order in {ms[1]} ms (attempt 3 of 3): C1_connect_failure",
    ]
    assert [(p[0], p[1]) for p in host.progress] == [(1.0, 3.0), (2.0, 3.0)]


async def test_a_host_that_fails_to_take_progress_does_not_fail_the_call(rig: Rig) -> None:
    class Broken(Host):
        async def report_progress(self, progress: float, total: float | None, message: str | None) -> None:
            raise RuntimeError("gone")

    upstream = ScriptedNext([ConnectFailure("refused"), None])
    assert await rig.stage(rule())(tool_call(rule(), host=Broken()), upstream) is OK


async def test_disabled_retry_makes_one_attempt(rig: Rig) -> None:
    r = rule(retry=RetryRule(enabled=False))
    upstream = ScriptedNext([ConnectFailure("refused"), None])
    call = tool_call(r)
    with pytest.raises(ConnectFailure):
        await rig.stage(r)(call, upstream)
    assert len(upstream.calls) == 1
    assert len(call.record.attempts) == 1


async def test_a_not_sent_last_attempt_does_not_hide_an_earlier_attempt_that_may_have_run(rig: Rig) -> None:
    r = rule(EffectClass.WRITE_UNSAFE, idempotency=IdempotencyRule(forward_key_as="idempotency_key"))
    upstream = ScriptedNext([timeout(), ConnectFailure("refused")])
    with pytest.raises(ConnectFailure) as caught:
        await rig.stage(r)(tool_call(r), upstream)
    fault = caught.value
    assert len(upstream.calls) == 2
    assert fault.retry_safety is RetrySafety.MAYBE_EXECUTED, "the first attempt may have executed the write"
    assert fault.side_effect_status.value == "unknown"
    assert fault.details["earlier_attempt_maybe_executed"] is True
