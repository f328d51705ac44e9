"""The breaker stage and board: consecutive-failure circuits per upstream and per tool, fail fast, read-only probes."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pytest
from structlog.testing import capture_logs

from resilient_mcp.call.chain import ToolCall, compose
from resilient_mcp.faults import (
    AttemptTimeout,
    ConnectFailure,
    EffectClass,
    Fault,
    PermanentExecutionError,
    PermissionDenied,
    PersistentOutage,
    RepairAction,
    RetrySafety,
    SchemaViolation,
    SemanticArgumentRejection,
)
from resilient_mcp.policy import BreakerRule, ToolRule
from resilient_mcp.stages.breaker import Breaker, BreakerBoard
from resilient_mcp.stages.retry import Retry, RetryBudgets
from tests.conftest import FakeClock
from tests.harness import OK, ScriptedNext

pytestmark = pytest.mark.anyio


@dataclass
class Prober:
    fails: bool = False
    probed: list[str] = field(default_factory=list)

    async def __call__(self, upstream: str) -> None:
        self.probed.append(upstream)
        if self.fails:
            raise ConnectionError("tools/list failed")


def rule(effect: EffectClass = EffectClass.READ_ONLY, **over: Any) -> ToolRule:
    return ToolRule(effect=effect, **over)


def tool_call(tool: str = "search", r: ToolRule | None = None) -> ToolCall:
    return ToolCall(name=f"shop__{tool}", arguments={}, upstream="shop", upstream_tool=tool, rule=r or rule())


def timeout() -> AttemptTimeout:
    return AttemptTimeout("t", retry_safety=RetrySafety.MAYBE_EXECUTED)


async def fail_times(stage: Breaker, n: int, make: Any, tool: str = "search") -> None:
    for _ in range(n):
        with pytest.raises(Fault):
            await stage(tool_call(tool), ScriptedNext([make()]))


@pytest.fixture
def board(clock: FakeClock) -> BreakerBoard:
    return BreakerBoard(clock=clock)


async def test_circuit_opens_after_consecutive_counted_failures_and_then_fails_fast(board: BreakerBoard) -> None:
    stage = Breaker(rule(), board)
    with capture_logs() as logs:
        await fail_times(stage, 4, timeout)
        assert await stage(tool_call(), ScriptedNext()) is OK  # a success starts the count again
        await fail_times(stage, 4, timeout)
        assert logs == []
        await fail_times(stage, 1, timeout)
    assert [e["event"] for e in logs] == ["breaker_opened"]
    assert logs[0]["tool"] == "search" and logs[0]["upstream"] == "shop" and logs[0]["failures"] == 5
    upstream = ScriptedNext()
    call = tool_call()
    with pytest.raises(PersistentOutage) as caught:
        await stage(call, upstream)
    assert upstream.calls == []
    fault = caught.value
    assert fault.retry_safety is RetrySafety.NOT_SENT
    assert fault.repair_action is RepairAction.DEGRADE
    assert fault.details["circuit"] == "tool"
    assert fault.details["retry_in_ms"] == 30_000 == fault.retry_after_ms
    assert fault.details["consecutive_failures"] == 5
    assert fault.details["fallback"] == []
    assert fault.details["opened_at"]
    assert call.record.decided_by == "breaker"


async def test_open_circuit_names_the_fallback_tools_and_the_time_until_the_probe(
    board: BreakerBoard, clock: FakeClock
) -> None:
    stage = Breaker(rule(fallback=["shop__search_v2", "web__search"]), board)
    await fail_times(stage, 5, timeout)
    clock.now += 12.5
    with pytest.raises(PersistentOutage) as caught:
        await stage(tool_call(), ScriptedNext())
    assert caught.value.repair_action is RepairAction.SWITCH_TOOL
    assert caught.value.details["fallback"] == ["shop__search_v2", "web__search"]
    assert caught.value.details["retry_in_ms"] == 17_500
    assert "shop__search_v2" in caught.value.message


async def test_argument_and_executed_failures_never_open_the_circuit(board: BreakerBoard) -> None:
    stage = Breaker(rule(), board)
    for make in (
        lambda: SchemaViolation("bad"),
        lambda: SemanticArgumentRejection("no such sku"),
        lambda: PermissionDenied("denied"),
        lambda: PermanentExecutionError("tool failed"),
    ):
        await fail_times(stage, 10, make)
    upstream = ScriptedNext()
    assert await stage(tool_call(), upstream) is OK
    assert len(upstream.calls) == 1


async def test_a_non_counting_failure_does_not_reset_the_count(board: BreakerBoard) -> None:
    stage = Breaker(rule(), board)
    await fail_times(stage, 4, timeout)
    await fail_times(stage, 1, lambda: SchemaViolation("bad"))
    await fail_times(stage, 1, timeout)
    with pytest.raises(PersistentOutage):
        await stage(tool_call(), ScriptedNext())


async def test_failure_threshold_comes_from_policy(board: BreakerBoard) -> None:
    stage = Breaker(rule(breaker=BreakerRule(failure_threshold=2)), board)
    await fail_times(stage, 2, timeout)
    with pytest.raises(PersistentOutage):
        await stage(tool_call(), ScriptedNext())


async def test_after_open_s_a_read_is_the_probe_and_its_success_closes_the_circuit(
    board: BreakerBoard, clock: FakeClock
) -> None:
    stage = Breaker(rule(), board)
    await fail_times(stage, 5, timeout)
    clock.now += 30
    with capture_logs() as logs:
        probe = ScriptedNext()
        assert await stage(tool_call(), probe) is OK
    assert len(probe.calls) == 1
    assert [e["event"] for e in logs] == ["breaker_half_open", "breaker_closed"]
    await fail_times(stage, 4, timeout)  # closed again, with a fresh count
    assert await stage(tool_call(), ScriptedNext()) is OK


async def test_a_failed_probe_reopens_the_circuit_for_another_open_period(
    board: BreakerBoard, clock: FakeClock
) -> None:
    stage = Breaker(rule(), board)
    await fail_times(stage, 5, timeout)
    clock.now += 31
    with capture_logs() as logs:
        await fail_times(stage, 1, timeout)
    assert [e["event"] for e in logs] == ["breaker_half_open", "breaker_opened"]
    clock.now += 29
    upstream = ScriptedNext()
    with pytest.raises(PersistentOutage) as caught:
        await stage(tool_call(), upstream)
    assert upstream.calls == []
    assert caught.value.details["retry_in_ms"] == 1000


async def test_a_write_is_never_the_probe(board: BreakerBoard, clock: FakeClock) -> None:
    write = Breaker(rule(EffectClass.WRITE_UNSAFE), board)
    await fail_times(write, 5, timeout, tool="create_order")
    clock.now += 60
    upstream = ScriptedNext()
    with pytest.raises(PersistentOutage) as caught:
        await write(tool_call("create_order"), upstream)
    assert upstream.calls == []
    assert caught.value.details["waiting_for"] == "read_probe"


async def test_a_write_waits_for_the_listing_probe_and_goes_through_when_it_succeeds(clock: FakeClock) -> None:
    prober = Prober()
    board = BreakerBoard(prober, clock=clock)
    write = Breaker(rule(EffectClass.WRITE_UNSAFE), board)
    await fail_times(write, 5, timeout, tool="create_order")
    clock.now += 30
    upstream = ScriptedNext()
    assert await write(tool_call("create_order"), upstream) is OK
    assert prober.probed == ["shop"]
    assert len(upstream.calls) == 1


async def test_a_failed_listing_probe_reopens_the_circuit_and_the_write_is_not_sent(clock: FakeClock) -> None:
    prober = Prober(fails=True)
    board = BreakerBoard(prober, clock=clock)
    write = Breaker(rule(EffectClass.WRITE_UNSAFE), board)
    await fail_times(write, 5, timeout, tool="create_order")
    clock.now += 30
    upstream = ScriptedNext()
    with pytest.raises(PersistentOutage) as caught:
        await write(tool_call("create_order"), upstream)
    assert upstream.calls == []
    assert prober.probed == ["shop"]
    assert caught.value.details["retry_in_ms"] == 30_000
    with pytest.raises(PersistentOutage):  # open again: not even probed until open_s has passed
        await write(tool_call("create_order"), upstream)
    assert prober.probed == ["shop"]


async def test_one_failing_tool_does_not_open_the_upstream_circuit(board: BreakerBoard) -> None:
    await fail_times(Breaker(rule(), board), 7, timeout, tool="search")
    other = ScriptedNext()
    assert await Breaker(rule(), board)(tool_call("get_order"), other) is OK
    assert len(other.calls) == 1
    with pytest.raises(PersistentOutage) as caught:
        await Breaker(rule(), board)(tool_call("search"), ScriptedNext())
    assert caught.value.details["circuit"] == "tool"


async def test_connection_failures_of_one_tool_let_another_tool_probe_the_upstream_at_once(
    board: BreakerBoard,
) -> None:
    # C5 tool_down: one tool's route refuses connections; the upstream's other tools are healthy.
    await fail_times(Breaker(rule(), board), 5, lambda: ConnectFailure("refused"), tool="search")
    with pytest.raises(PersistentOutage):  # the failing tool itself fails fast
        await Breaker(rule(), board)(tool_call("search"), ScriptedNext())
    other = ScriptedNext()
    assert await Breaker(rule(), board)(tool_call("get_order"), other) is OK  # the alternative read goes through
    assert len(other.calls) == 1
    assert board.counts("shop", "get_order") == (0, 0)
    with pytest.raises(PersistentOutage) as caught:  # and the failing tool's own circuit stays open
        await Breaker(rule(), board)(tool_call("search"), ScriptedNext())
    assert caught.value.details["circuit"] == "tool"


async def test_connection_failures_on_a_second_tool_open_the_upstream_circuit_for_every_tool(
    board: BreakerBoard,
) -> None:
    await fail_times(Breaker(rule(), board), 5, lambda: ConnectFailure("refused"), tool="search")
    await fail_times(Breaker(rule(), board), 1, lambda: ConnectFailure("refused"), tool="get_order")
    for tool in ("get_order", "list_orders"):
        other = ScriptedNext()
        with pytest.raises(PersistentOutage) as caught:
            await Breaker(rule(), board)(tool_call(tool), other)
        assert other.calls == []
        assert caught.value.details["circuit"] == "upstream"


async def test_a_write_of_another_tool_after_one_tools_connection_failures_waits_for_the_listing_probe(
    clock: FakeClock,
) -> None:
    prober = Prober(fails=True)
    board = BreakerBoard(prober, clock=clock)
    await fail_times(Breaker(rule(), board), 5, lambda: ConnectFailure("refused"), tool="search")
    write, upstream = Breaker(rule(EffectClass.WRITE_UNSAFE), board), ScriptedNext()
    with pytest.raises(PersistentOutage) as caught:  # the upstream does not answer its listing: not sent
        await write(tool_call("create_order"), upstream)
    assert upstream.calls == [] and prober.probed == ["shop"]
    assert caught.value.details["circuit"] == "upstream"
    prober.fails = False
    with pytest.raises(PersistentOutage):  # reopened for open_s: no second probe meanwhile
        await write(tool_call("create_order"), upstream)
    assert prober.probed == ["shop"]


async def test_timeouts_spread_over_two_tools_open_the_upstream_circuit(board: BreakerBoard) -> None:
    stage = Breaker(rule(), board)
    await fail_times(stage, 3, timeout, tool="search")
    await fail_times(stage, 2, timeout, tool="get_order")
    with pytest.raises(PersistentOutage) as caught:
        await stage(tool_call("list_orders"), ScriptedNext())
    assert caught.value.details["circuit"] == "upstream"


async def test_while_a_probe_is_in_flight_other_calls_fail_fast(board: BreakerBoard, clock: FakeClock) -> None:
    stage = Breaker(rule(), board)
    await fail_times(stage, 5, timeout)
    clock.now += 30
    entered, release = anyio.Event(), anyio.Event()

    async def slow_probe(call: ToolCall) -> types.CallToolResult:
        entered.set()
        await release.wait()
        return OK

    async with anyio.create_task_group() as tg:
        tg.start_soon(stage, tool_call(), slow_probe)
        with anyio.fail_after(5):
            await entered.wait()
        with pytest.raises(PersistentOutage) as caught:
            await stage(tool_call(), ScriptedNext())
        assert caught.value.details["waiting_for"] == "probe_in_flight"
        release.set()
    assert await stage(tool_call(), ScriptedNext()) is OK


async def test_a_cancelled_probe_frees_the_probe_slot(board: BreakerBoard, clock: FakeClock) -> None:
    stage = Breaker(rule(), board)
    await fail_times(stage, 5, timeout)
    clock.now += 30
    with anyio.CancelScope() as scope:

        async def cancelled(call: ToolCall) -> types.CallToolResult:
            scope.cancel()
            await anyio.sleep_forever()
            raise AssertionError

        await stage(tool_call(), cancelled)
    probe = ScriptedNext()
    assert await stage(tool_call(), probe) is OK
    assert len(probe.calls) == 1


async def test_board_reports_consecutive_counts_and_a_snapshot_of_every_circuit(board: BreakerBoard) -> None:
    stage = Breaker(rule(), board)
    await fail_times(stage, 2, timeout, tool="search")
    await fail_times(stage, 1, timeout, tool="get_order")
    assert board.counts("shop", "get_order") == (1, 3)
    states = {(c["upstream"], c["tool"]): c for c in board.snapshot()}
    assert states["shop", "search"]["consecutive_failures"] == 2
    assert states["shop", None]["state"] == "closed"


async def test_disabled_breaker_passes_every_call(board: BreakerBoard) -> None:
    stage = Breaker(rule(breaker=BreakerRule(enabled=False)), board)
    await fail_times(stage, 10, timeout)
    upstream = ScriptedNext()
    assert await stage(tool_call(), upstream) is OK


async def test_retries_are_counted_per_attempt_and_an_opening_breaker_ends_them(clock: FakeClock) -> None:
    board = BreakerBoard(clock=clock)
    r = rule(breaker=BreakerRule(failure_threshold=2))
    retry = Retry(r, RetryBudgets(), sleep=clock.sleep, clock=clock, random=random.Random(3))
    upstream = ScriptedNext([ConnectFailure("refused")] * 3)
    chain = compose([retry, Breaker(r, board)], upstream)
    call = tool_call(r=r)
    with pytest.raises(PersistentOutage):
        await chain(call)
    assert len(upstream.calls) == 2  # the third attempt met the open circuit
    assert [a.outcome for a in call.record.attempts] == ["C1_connect_failure"] * 2 + ["C5_persistent_outage"]
