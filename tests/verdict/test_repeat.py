"""Rule R in one place (``repeat.decide``): the retry stage, the observation, fallback, the loop guard and the
idempotency stage give the same answer to "may this call be repeated", including for forwarded idempotency keys and
for an untrusted upstream's claim that a write did not run."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.faults import (
    AttemptTimeout,
    ConnectionLost,
    EffectClass,
    Fault,
    GatewayError,
    OutputSchemaViolation,
    PermanentExecutionError,
    RateLimited,
    RepairAction,
    RetrySafety,
    SchemaViolation,
    TransientExecutionError,
)
from resilient_mcp.faults.error_results import ERROR_META_KEY, FAULT_META_KEY, classify_result
from resilient_mcp.policy import IdempotencyRule, ObservationLevel, Policy, PolicyFile, ToolRule
from resilient_mcp.stages.fallback import falls_back
from resilient_mcp.stages.guard import Guard, SessionGuards
from resilient_mcp.stages.idempotency import Idempotency, InFlight
from resilient_mcp.stages.retry import Retry, RetryBudgets
from resilient_mcp.state.sqlite import StateStore
from resilient_mcp.verdict import repeat
from resilient_mcp.verdict.observations import Consecutive, Observed, build_observation, plan_repair
from resilient_mcp.verdict.repeat import decide
from tests.fixtures.fault_links import SleepRecorder, observation, recording_pipeline
from tests.fixtures.scripted import ScriptedUpstream, error_text
from tests.harness import ScriptedNext, proxied

pytestmark = pytest.mark.anyio

ONE = Consecutive(1, 1, 1)

READ = ToolRule(effect=EffectClass.READ_ONLY)
WRITE = ToolRule(effect=EffectClass.WRITE_UNSAFE)
IDEMPOTENT = ToolRule(effect=EffectClass.WRITE_IDEMPOTENT)
KEYED = ToolRule(effect=EffectClass.WRITE_UNSAFE, idempotency=IdempotencyRule(forward_key_as="idempotencyKey"))


def rule_for(trust: bool, effect: str = "write_unsafe") -> ToolRule:
    policy = Policy(PolicyFile.model_validate({"upstreams": {"shop": {"trust_annotations": trust}}}))
    rule = policy.resolve("shop", "create_order", "create_order")
    return rule.model_copy(update={"effect": EffectClass(effect)})


def make_call(rule: ToolRule, args: dict[str, Any] | None = None) -> ToolCall:
    arguments = args or {"qty": 1}
    return ToolCall(name="create_order", arguments=arguments, upstream="shop", upstream_tool="create_order", rule=rule)


async def no_sleep(_: float) -> None:
    return None


async def retried(rule: ToolRule, fault: Fault) -> tuple[int, Fault | None]:
    """Attempts the retry stage made for a call whose first attempt fails with ``fault`` and whose second succeeds."""
    upstream = ScriptedNext([fault, None])
    try:
        await Retry(rule, RetryBudgets(), sleep=no_sleep)(make_call(rule), upstream)
    except Fault as failed:
        return len(upstream.calls), failed
    return len(upstream.calls), None


# --- the decision itself ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "fault", "repeat", "reason"),
    [
        (WRITE, ConnectionLost("lost"), False, "may_have_executed"),
        (KEYED, ConnectionLost("lost"), True, "key_forwarded"),
        (IDEMPOTENT, ConnectionLost("lost"), True, "write_idempotent"),
        (READ, AttemptTimeout("slow"), True, "read_only"),
        (WRITE, GatewayError("503", retry_safety=RetrySafety.REJECTED), True, "rejected"),
        (WRITE, PermanentExecutionError("boom"), False, "executed"),
        (READ, PermanentExecutionError("boom"), False, "not_transient"),
        (READ, SchemaViolation("bad"), False, "caller_must_change"),
        (READ, OutputSchemaViolation("corrupt"), True, "reread_once"),
        (WRITE, OutputSchemaViolation("corrupt"), False, "executed"),
    ],
)
def test_rule_r_answers_with_a_decision_and_its_reason(rule: ToolRule, fault: Fault, repeat: bool, reason: str) -> None:
    verdict = decide(fault, rule)
    assert (verdict.repeat, verdict.reason) == (repeat, reason)


@pytest.mark.parametrize("rule", [WRITE, KEYED, IDEMPOTENT, READ], ids=["write", "keyed", "idempotent", "read"])
@pytest.mark.parametrize(
    "make_fault",
    [lambda: ConnectionLost("lost"), lambda: AttemptTimeout("slow"), lambda: TransientExecutionError("blip")],
    ids=["lost", "timeout", "d1"],
)
async def test_the_retry_stage_and_the_observation_agree_for_every_effect_class(
    rule: ToolRule, make_fault: Any
) -> None:
    attempts, _ = await retried(rule, make_fault())
    proxy_repeats = attempts > 1
    action, max_retry, _ = plan_repair(make_fault(), make_call(rule))
    agent_may_repeat = action is not RepairAction.VERIFY_STATE and max_retry > 0
    assert proxy_repeats == agent_may_repeat == decide(make_fault(), rule).repeat


async def test_a_write_whose_upstream_honours_the_key_is_retried_and_not_told_to_verify() -> None:
    attempts, failed = await retried(KEYED, ConnectionLost("lost"))
    assert attempts == 2 and failed is None
    action, max_retry, _ = plan_repair(ConnectionLost("lost"), make_call(KEYED))
    assert action is RepairAction.BACKOFF_RETRY and max_retry >= 1


# --- typed hints and chained observations: believed for writes only on trusted upstreams --------------------------


def hinted(meta: dict[str, Any]) -> Fault:
    result = types.CallToolResult(content=[types.TextContent(text="busy")], is_error=True, _meta=meta)
    fault = classify_result(result, tool=None)
    assert fault is not None
    return fault


HINTS = {
    "retryable": {ERROR_META_KEY: {"type": "transient", "retryable": True}},
    "unavailable": {ERROR_META_KEY: {"type": "unavailable"}},
    "chained": {FAULT_META_KEY: {"fault_type": "C4_gateway_5xx", "is_transient": True, "retry_safety": "rejected"}},
}


@pytest.mark.parametrize("hint", sorted(HINTS))
async def test_an_untrusted_upstreams_claim_that_a_write_did_not_run_does_not_make_it_retried(hint: str) -> None:
    rule = rule_for(trust=False)
    attempts, failed = await retried(rule, hinted(HINTS[hint]))
    assert attempts == 1 and failed is not None
    assert failed.retry_safety is RetrySafety.MAYBE_EXECUTED and failed.details["retry_stopped"] == "untrusted_claim"
    assert failed.details["upstream_claimed"] == "rejected"
    result = build_observation(Observed(failed, make_call(rule), level=ObservationLevel.L2, consecutive=ONE))
    obs = result.structured_content or {}
    assert obs["retry_safety"] == "maybe_executed" and obs["repair_action"] == "verify_state" and obs["max_retry"] == 0
    assert not falls_back(hinted(HINTS[hint]), rule)


@pytest.mark.parametrize("hint", sorted(HINTS))
async def test_a_trusted_upstreams_claim_that_a_write_did_not_run_lets_the_proxy_retry_it(hint: str) -> None:
    rule = rule_for(trust=True)
    attempts, failed = await retried(rule, hinted(HINTS[hint]))
    assert attempts == 2 and failed is None
    assert falls_back(hinted(HINTS[hint]), rule)


async def test_an_untrusted_claim_still_lets_a_read_be_retried() -> None:
    attempts, failed = await retried(rule_for(trust=False, effect="read_only"), hinted(HINTS["retryable"]))
    assert attempts == 2 and failed is None


def test_a_rate_limit_the_proxy_saw_itself_is_not_an_upstream_claim() -> None:
    verdict = decide(RateLimited("HTTP 429"), rule_for(trust=False))
    assert verdict.repeat and verdict.safety is RetrySafety.REJECTED


# --- idempotency and the loop guard ask the same rule -------------------------------------------------------------


async def test_an_untrusted_claim_keeps_the_write_outcome_unknown_so_an_identical_call_is_not_sent(
    store: StateStore,
) -> None:
    rule = rule_for(trust=False)
    stage = Idempotency(rule, store, InFlight())
    with pytest.raises(Fault):
        await stage(make_call(rule), ScriptedNext([hinted(HINTS["unavailable"])]))
    again = ScriptedNext([])
    with pytest.raises(Fault) as refused:
        await stage(make_call(rule), again)
    assert again.calls == [] and refused.value.repair_action is RepairAction.VERIFY_STATE


async def test_a_trusted_claim_releases_the_record_so_an_identical_call_runs(store: StateStore) -> None:
    rule = rule_for(trust=True)
    stage = Idempotency(rule, store, InFlight())
    with pytest.raises(Fault):
        await stage(make_call(rule), ScriptedNext([hinted(HINTS["unavailable"])]))
    again = ScriptedNext([])
    await stage(make_call(rule), again)
    assert len(again.calls) == 1


async def test_an_outcome_unknown_write_is_re_sent_with_the_same_key_when_the_upstream_honours_it(
    store: StateStore,
) -> None:
    stage = Idempotency(KEYED, store, InFlight())
    first = ScriptedNext([ConnectionLost("lost")])
    with pytest.raises(ConnectionLost):
        await stage(make_call(KEYED), first)
    again = ScriptedNext([])
    await stage(make_call(KEYED), again)
    assert len(again.calls) == 1
    assert again.calls[0].meta == first.calls[0].meta and "idempotencyKey" in (again.calls[0].meta or {})


async def test_the_loop_guard_lets_one_re_read_through_after_a_schema_violation_of_a_read_only_tool() -> None:
    guard = Guard(PolicyFile().session, SessionGuards())
    upstream = ScriptedNext([OutputSchemaViolation("corrupt"), OutputSchemaViolation("corrupt")])
    for _ in range(2):
        with pytest.raises(OutputSchemaViolation):
            await guard(make_call(READ), upstream)
    assert len(upstream.calls) == 2
    with pytest.raises(OutputSchemaViolation) as third:
        await guard(make_call(READ), upstream)
    assert len(upstream.calls) == 2 and third.value.details["short_circuited"] is True
    assert third.value.repair_action is RepairAction.DEGRADE, "the allowed re-read does not count toward a loop"
    with pytest.raises(OutputSchemaViolation) as fourth:
        await guard(make_call(READ), upstream)
    assert fourth.value.repair_action is RepairAction.ABORT


async def test_the_loop_guard_still_answers_a_repeated_schema_violation_of_a_write_itself() -> None:
    guard = Guard(PolicyFile().session, SessionGuards())
    upstream = ScriptedNext([OutputSchemaViolation("corrupt")])
    with pytest.raises(OutputSchemaViolation):
        await guard(make_call(WRITE), upstream)
    with pytest.raises(OutputSchemaViolation):
        await guard(make_call(WRITE), upstream)
    assert len(upstream.calls) == 1


# --- decided once per failed attempt, read from the call record -----------------------------------------------------


def _counting_evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every evaluation of rule R from now on (each runs ``_untrusted_claim`` exactly once), by fault type."""
    evaluations: list[str] = []
    real = repeat._untrusted_claim

    def counted(fault: Fault, rule: ToolRule) -> bool:
        evaluations.append(fault.fault_type)
        return real(fault, rule)

    monkeypatch.setattr(repeat, "_untrusted_claim", counted)
    return evaluations


def _internal_error(args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(types.INTERNAL_ERROR, "backend unavailable")  # D1: transient, may have executed


def _not_found(args: dict[str, Any]) -> types.CallToolResult:
    return error_text("order 7 not found")  # D4: the tool answered, permanent


@pytest.mark.parametrize(
    ("handler", "effect", "attempts", "fault_type"),
    [
        (_internal_error, "write_idempotent", 2, "D1_transient_execution_error"),  # retried once, then surfaced
        (_internal_error, "read_only", 2, "D1_transient_execution_error"),  # max_attempts_maybe_executed
        (_not_found, "write_unsafe", 1, "D4_permanent_execution_error"),  # not retried
    ],
)
async def test_rule_r_is_decided_once_per_failed_attempt_and_every_stage_reads_it_from_the_call_record(
    monkeypatch: pytest.MonkeyPatch, handler: Any, effect: str, attempts: int, fault_type: str
) -> None:
    up = ScriptedUpstream(name="shop").tool("charge", handler)
    policy = {"tools": {"charge": {"effect": effect, "timeouts": {"attempt_s": 5, "total_s": 60}}}}
    async with proxied({"shop": up.server()}, policy, pipeline=recording_pipeline(SleepRecorder())) as h:
        evaluations = _counting_evaluations(monkeypatch)
        with anyio.fail_after(30):
            result = await h.client.call_tool("charge", {"order": 7})
    assert observation(result)["fault_type"] == fault_type
    assert up.count("charge") == attempts
    # One decision, where the first attempt's fault was classified: the retry stage, idempotency, the loop guard, the
    # observation and the audit read it from the call record, and the second attempt's fault, alike in everything
    # rule R reads, keeps it (before: four evaluations, on a fault the retry stage rewrote in place).
    assert evaluations == [fault_type]
