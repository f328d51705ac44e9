"""The observe stage with hand-written call_next: observations, failure counts, audit, log context, cancellation."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import anyio
import mcp_types as types
import pytest
import structlog
from mcp.shared.exceptions import MCPError
from structlog.testing import capture_logs

from resilient_mcp import faults as f
from resilient_mcp.call.chain import Attempt, CallNext, ToolCall, call_arguments_hash
from resilient_mcp.faults import EffectClass
from resilient_mcp.faults.classify import ERROR_META_KEY, FAULT_META_KEY
from resilient_mcp.policy import ObservationLevel, ObservationRule, ToolRule
from resilient_mcp.stages import observe as observe_module
from resilient_mcp.stages.observe import AuditEntry, FailureStats, Observe
from resilient_mcp.text import canonical_json
from resilient_mcp.verdict.observations import Consecutive

pytestmark = pytest.mark.anyio


class ListAudit:
    def __init__(self) -> None:
        self.entries: list[AuditEntry] = []

    def record(self, entry: AuditEntry) -> None:
        self.entries.append(entry)


class BrokenAudit:
    def record(self, entry: AuditEntry) -> None:
        raise OSError("disk full")


OK = types.CallToolResult(content=[types.TextContent(text="done")])


def make_call(name: str = "create_order", arguments: dict[str, Any] | None = None, session: str = "s1") -> ToolCall:
    return ToolCall(
        name=name,
        arguments={"sku": "A", "qty": 2} if arguments is None else arguments,
        upstream="shop",
        upstream_tool=name,
        rule=ToolRule(effect=EffectClass.WRITE_UNSAFE),
        session_id=session,
        call_id="c-7",
    )


def answering(result: types.CallToolResult) -> CallNext:
    async def call_next(call: ToolCall) -> types.CallToolResult:
        return result

    return call_next


def raising(exc: BaseException) -> CallNext:
    async def call_next(call: ToolCall) -> types.CallToolResult:
        raise exc

    return call_next


def make_observe(rule: ObservationRule | None = None, **kw: Any) -> tuple[Observe, FailureStats, ListAudit]:
    stats, audit = FailureStats(), ListAudit()
    stage = Observe(level_for=rule or ObservationRule(), stats=stats, audit=audit, wall_clock=lambda: 1000.0, **kw)
    return stage, stats, audit


def structured(res: types.CallToolResult) -> dict[str, Any]:
    assert res.structured_content is not None
    return res.structured_content


async def test_success_is_returned_untouched_and_audited_as_ok() -> None:
    key = b"k" * 32
    stage, _, audit = make_observe(arguments_hash=lambda c: call_arguments_hash(c, key))
    call = make_call()
    call.record.attempts.append(Attempt(1, "ok", 4))
    call.record.decided_by = "terminal"
    assert await stage(call, answering(OK)) is OK
    digest = hmac.new(key, canonical_json({"qty": 2, "sku": "A"}).encode(), hashlib.sha256).hexdigest()
    entry = audit.entries[0]
    assert entry == AuditEntry(
        ts=1000.0,
        session="s1",
        upstream="shop",
        tool="create_order",
        argument_keys=("qty", "sku"),
        arguments_hash=digest,
        outcome="ok",
        fault_type=None,
        attempts=1,
        latency_ms=entry.latency_ms,
        decided_by="terminal",
    )
    assert len(audit.entries) == 1 and entry.latency_ms >= 0


async def test_a_fault_becomes_the_observation_and_counts_consecutive_failures() -> None:
    stage, _, audit = make_observe()
    fault = f.GatewayError("HTTP 502.", details={"http_status": 502})
    first = await stage(make_call(), raising(fault))
    second = await stage(make_call(), raising(fault))
    assert first.is_error and structured(first)["fault_type"] == "C4_gateway_5xx"
    assert structured(second)["consecutive_failures"] == {"this_call": 2, "this_tool": 2, "this_server": 2}
    assert [(e.outcome, e.fault_type) for e in audit.entries] == [("error", "C4_gateway_5xx")] * 2


async def test_a_success_resets_the_consecutive_counts() -> None:
    stage, stats, _ = make_observe()
    await stage(make_call(), raising(f.GatewayError("x")))
    await stage(make_call(), answering(OK))
    assert stats.current(make_call()) == Consecutive(0, 0, 0)
    res = await stage(make_call(), raising(f.GatewayError("x")))
    assert structured(res)["consecutive_failures"] == {"this_call": 1, "this_tool": 1, "this_server": 1}


async def test_argument_mistakes_do_not_count_against_the_server() -> None:
    stage, _, audit = make_observe()
    await stage(make_call(arguments={"qty": 1}), raising(f.SchemaViolation("bad")))
    res = await stage(make_call(arguments={"qty": 2}), raising(f.SchemaViolation("bad")))
    assert structured(res)["consecutive_failures"] == {"this_call": 1, "this_tool": 2, "this_server": 0}
    assert audit.entries[-1].outcome == "refused"


async def test_identical_calls_are_counted_per_session() -> None:
    stage, _, _ = make_observe()
    await stage(make_call(session="a"), raising(f.GatewayError("x")))
    res = await stage(make_call(session="b"), raising(f.GatewayError("x")))
    assert structured(res)["consecutive_failures"]["this_call"] == 1


async def test_repeat_count_comes_from_the_fault_details() -> None:
    stage, _, _ = make_observe()
    res = await stage(make_call(), raising(f.PermanentExecutionError("no", details={"repeat_count": 2})))
    assert structured(res)["repeat_count"] == 2


async def test_unknown_tool_is_a_json_rpc_invalid_params_error_by_default() -> None:
    stage, _, audit = make_observe()
    fault = f.UnknownTool("No tool named serch.", details={"candidates": ["search"]})
    with pytest.raises(MCPError) as raised:
        await stage(make_call("serch"), raising(fault))
    assert raised.value.code == -32602
    assert raised.value.data["repair_action"] == "switch_tool"
    assert [(e.outcome, e.fault_type) for e in audit.entries] == [("refused", "A1_unknown_tool")]


async def test_unknown_tool_is_an_error_result_when_configured() -> None:
    stage, _, _ = make_observe(ObservationRule(unknown_tool_as_result=True))
    res = await stage(make_call("serch"), raising(f.UnknownTool("No tool named serch.")))
    assert res.is_error and structured(res)["fault_type"] == "A1_unknown_tool"


async def test_a_proxy_bug_becomes_an_internal_error_without_its_text_and_is_logged_with_traceback() -> None:
    stage, _, audit = make_observe()
    with capture_logs() as logs:
        res = await stage(make_call(), raising(KeyError("secret-token-123")))
    obs = structured(res)
    assert obs["code"] == "INTERNAL_ERROR" and obs["retry_safety"] == "maybe_executed"
    assert obs["repair_action"] == "verify_state"  # a write that may have run
    assert "secret" not in str(res.model_dump())
    assert any(e["event"] == "proxy_internal_error" and e.get("exc_info") for e in logs)
    assert audit.entries[0].outcome == "error"


async def test_a_fault_inside_a_single_exception_group_is_observed_as_that_fault() -> None:
    stage, _, _ = make_observe()
    res = await stage(make_call(), raising(ExceptionGroup("tg", [f.RateLimited("slow", retry_after_ms=9)])))
    assert structured(res)["fault_type"] == "D2_rate_limited"


async def test_a_call_the_host_abandoned_is_reraised_audited_as_abandoned_and_not_counted_against_the_model() -> None:
    stage, stats, audit = make_observe()
    started = anyio.Event()

    async def hang(call: ToolCall) -> types.CallToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    escaped: list[BaseException] = []

    async def run() -> None:
        try:
            await stage(make_call(), hang)
        except BaseException as exc:
            escaped.append(exc)
            raise

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            tg.cancel_scope.cancel()
    assert len(escaped) == 1 and isinstance(escaped[0], anyio.get_cancelled_exc_class())
    assert [(e.outcome, e.fault_type) for e in audit.entries] == [("abandoned", None)]
    assert stats.current(make_call()) == Consecutive(0, 0, 0)


async def test_an_unclassified_error_result_is_classified_into_an_observation() -> None:
    stage, _, _ = make_observe()
    hint = {"type": "rate_limited", "retry_after_ms": 300}
    upstream = types.CallToolResult(
        content=[types.TextContent(text="slow down")], is_error=True, _meta={ERROR_META_KEY: hint}
    )
    obs = structured(await stage(make_call(), answering(upstream)))
    assert (obs["fault_type"], obs["retry_after_ms"]) == ("D2_rate_limited", 300)
    assert obs["upstream_message"] == {"untrusted": True, "text": "slow down"}


async def test_an_error_result_that_is_already_an_observation_is_passed_through_and_counted() -> None:
    stage, stats, audit = make_observe()
    described = types.CallToolResult(
        content=[types.TextContent(text="X")],
        is_error=True,
        _meta={FAULT_META_KEY: {"fault_type": "E4_oversized_result"}},
    )
    assert await stage(make_call(), answering(described)) is described
    assert stats.current(make_call()).this_call == 1
    assert audit.entries[0].fault_type == "E4_oversized_result"


async def test_level_can_come_from_a_callable_and_l0_returns_the_raw_upstream_result() -> None:
    raw = types.CallToolResult(content=[types.TextContent(text="upstream words")], is_error=True)
    stage = Observe(level_for=lambda: ObservationLevel.L0, stats=FailureStats())
    assert await stage(make_call(), answering(raw)) is raw


async def test_l3_uses_the_session_context_and_survives_a_failing_one() -> None:
    rule = ObservationRule(level=ObservationLevel.L3)
    stage, _, _ = make_observe(rule, session_context=lambda call: {"remaining_calls": 3, "session": call.session_id})
    res = await stage(make_call(), raising(f.SchemaViolation("bad")))
    assert structured(res)["session"] == {"remaining_calls": 3, "session": "s1"}

    def broken(call: ToolCall) -> dict[str, Any]:
        raise RuntimeError("no")

    stage, _, _ = make_observe(rule, session_context=broken)
    res = await stage(make_call(), raising(f.SchemaViolation("bad")))
    assert structured(res)["session"] == {}


async def test_upstream_message_chars_come_from_the_rule() -> None:
    stage, _, _ = make_observe(ObservationRule(upstream_message_chars=5))
    res = await stage(make_call(), raising(f.PermanentExecutionError("no", upstream_message="abcdefghij")))
    assert structured(res)["upstream_message"]["text"] == "abcd…"


async def test_a_failing_audit_sink_does_not_break_the_call() -> None:
    stage = Observe(level_for=ObservationRule(), stats=FailureStats(), audit=BrokenAudit())
    assert await stage(make_call(), answering(OK)) is OK


async def test_log_context_is_bound_for_the_inner_stages_and_released_after() -> None:
    seen: dict[str, Any] = {}

    async def call_next(call: ToolCall) -> types.CallToolResult:
        seen.update(structlog.contextvars.get_contextvars())
        return OK

    stage, _, _ = make_observe()
    await stage(make_call(), call_next)
    assert seen == {"session": "s1", "upstream": "shop", "tool": "create_order", "call_id": "c-7"}
    assert "call_id" not in structlog.contextvars.get_contextvars()


async def test_a_failed_call_logs_one_tool_call_event_with_the_audit_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    stage, _, audit = make_observe()
    with capture_logs() as logs:
        monkeypatch.setattr(observe_module, "log", structlog.get_logger("test"))
        await stage(make_call(), raising(f.GatewayError("x")))
    events = [e for e in logs if e["event"] == "tool_call"]
    assert len(events) == 1
    assert {k: v for k, v in events[0].items() if k not in ("event", "log_level")} == audit.entries[0].as_dict()


# --- FailureStats: the consecutive-failure counts an observation reports ----------------------------------------------


def test_failures_count_per_call_tool_and_server_and_a_success_resets_them() -> None:
    stats = FailureStats()
    call = make_call()
    assert stats.record_failure(call, upstream_health=True) == Consecutive(1, 1, 1)
    assert stats.record_failure(make_call(arguments={"sku": "B"}), upstream_health=False) == Consecutive(1, 2, 1)
    assert stats.current(call) == Consecutive(1, 2, 1)
    stats.record_success(call)
    assert stats.current(call) == Consecutive(0, 0, 0)


def test_the_call_counters_keep_only_the_most_recently_failing_calls() -> None:
    stats = FailureStats(max_calls=2)
    calls = [make_call(arguments={"n": n}) for n in range(3)]
    for call in calls:
        stats.record_failure(call, upstream_health=False)
    assert [stats.current(c).this_call for c in calls] == [0, 1, 1]
