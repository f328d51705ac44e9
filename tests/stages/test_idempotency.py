"""The idempotency stage: at most one side effect per agent write, replays, conflicts, outcome-unknown."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.call.meta import REPLAY_META
from resilient_mcp.faults import (
    AttemptTimeout,
    ConnectFailure,
    EffectClass,
    MalformedArguments,
    RepairAction,
    SemanticArgumentRejection,
    SideEffectStatus,
    StateConflict,
)
from resilient_mcp.policy import IdempotencyRule, ToolRule, VerifyWith
from resilient_mcp.stages.idempotency import Idempotency, InFlight
from resilient_mcp.state.sqlite import StateStore
from tests.conftest import FakeClock

pytestmark = pytest.mark.anyio


class Upstream:
    """A hand-written ``call_next``: counts executions, optionally blocks on a gate or raises."""

    def __init__(self, fail: Callable[[], BaseException] | None = None, gate: anyio.Event | None = None) -> None:
        self.calls: list[ToolCall] = []
        self.fail, self.gate = fail, gate
        self.entered = anyio.Event()

    async def __call__(self, call: ToolCall) -> types.CallToolResult:
        self.calls.append(call)
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail()
        n = len(self.calls)
        return types.CallToolResult(
            content=[types.TextContent(text=f"order #{n} created")], structured_content={"n": n}
        )


def make_call(rule: ToolRule, args: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(
        name="shop__create_order",
        arguments={"item": "book", "qty": 1} if args is None else args,
        upstream="shop",
        upstream_tool="create_order",
        rule=rule,
        meta=meta,
    )


WRITE = ToolRule(effect=EffectClass.WRITE_UNSAFE)


def stage(rule: ToolRule, store: StateStore, clock: FakeClock, flights: InFlight | None = None) -> Idempotency:
    return Idempotency(rule, store, flights or InFlight(), clock)


async def twice_at_once(one: Callable[[], Awaitable[None]], upstream: Upstream, gate: anyio.Event) -> None:
    """``one`` twice: the second while the first is inside ``upstream`` (held at ``gate``), which then opens."""
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            await upstream.entered.wait()
            tg.start_soon(one)
            await anyio.wait_all_tasks_blocked()
            gate.set()


async def test_an_identical_write_whose_first_result_never_reached_the_host_is_a_replay(
    store: StateStore, clock: FakeClock
) -> None:
    upstream, guard = Upstream(), stage(WRITE, store, clock)
    first = await guard(make_call(WRITE), upstream)  # never delivered: the delivery hooks did not run
    clock.now += 30
    second_call = make_call(WRITE, {"qty": 1, "item": "book"})  # same arguments, other key order
    second = await guard(second_call, upstream)

    assert len(upstream.calls) == 1
    assert second.structured_content == first.structured_content == {"n": 1}
    assert second.content[0] == first.content[0]
    replay = (second.meta or {})[REPLAY_META]
    assert replay["original_at"] == "2023-11-14T22:13:20+00:00" and len(replay["key"]) == 64
    assert "never reached you" in second.content[-1].text  # type: ignore[union-attr]
    assert "not called again" in second.content[-1].text  # type: ignore[union-attr]
    assert second_call.record.decided_by == "idempotency"
    assert not second_call.record.notes, "the replay note is in the content already; observe must not repeat it"
    assert REPLAY_META not in (first.meta or {})


async def test_concurrent_identical_writes_run_once_and_share_the_result(store: StateStore, clock: FakeClock) -> None:
    gate = anyio.Event()
    upstream, guard = Upstream(gate=gate), stage(WRITE, store, clock)
    results: list[types.CallToolResult] = []

    async def one() -> None:
        results.append(await guard(make_call(WRITE), upstream))

    await twice_at_once(one, upstream, gate)

    assert len(upstream.calls) == 1
    assert [r.structured_content for r in results] == [{"n": 1}, {"n": 1}]
    assert sum(REPLAY_META in (r.meta or {}) for r in results) == 1


async def test_duplicate_of_a_running_write_is_refused_409_when_policy_says_conflict(
    store: StateStore, clock: FakeClock
) -> None:
    rule = ToolRule(effect=EffectClass.WRITE_UNSAFE, idempotency=IdempotencyRule(on_in_flight="conflict"))
    gate = anyio.Event()
    upstream, guard = Upstream(gate=gate), stage(rule, store, clock)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(guard, make_call(rule), upstream)
            await upstream.entered.wait()
            with pytest.raises(StateConflict) as refused:
                await guard(make_call(rule), upstream)
            gate.set()
    assert refused.value.details["conflict"] == "in_flight" and refused.value.is_transient
    assert len(upstream.calls) == 1


async def test_explicit_key_reused_with_different_arguments_is_rejected_422(
    store: StateStore, clock: FakeClock
) -> None:
    upstream, guard = Upstream(), stage(WRITE, store, clock)
    await guard(make_call(WRITE, meta={"Idempotency-Key": "abc"}), upstream)
    with pytest.raises(SemanticArgumentRejection) as rejected:
        await guard(make_call(WRITE, {"item": "pen", "qty": 1}, meta={"Idempotency-Key": "abc"}), upstream)
    assert rejected.value.details == {"idempotency_key": "abc", "conflict": "key reused with different arguments"}
    assert rejected.value.side_effect_status is SideEffectStatus.NONE
    assert len(upstream.calls) == 1


async def test_explicit_keys_tell_identical_arguments_apart(store: StateStore, clock: FakeClock) -> None:
    upstream, guard = Upstream(), stage(WRITE, store, clock)
    await guard(make_call(WRITE, meta={"io.github.resilient-mcp/idempotency-key": "a"}), upstream)
    await guard(make_call(WRITE, meta={"idempotency-key": "b"}), upstream)
    replay = await guard(make_call(WRITE, meta={"idempotency-key": "a"}), upstream)
    assert len(upstream.calls) == 2
    assert (replay.meta or {})[REPLAY_META]["key"] == "a"


async def test_an_empty_explicit_key_is_a_malformed_request(store: StateStore, clock: FakeClock) -> None:
    with pytest.raises(MalformedArguments):
        await stage(WRITE, store, clock)(make_call(WRITE, meta={"Idempotency-Key": ""}), Upstream())


async def test_key_argument_names_the_key_so_other_arguments_may_not_change(
    store: StateStore, clock: FakeClock
) -> None:
    rule = ToolRule(effect=EffectClass.WRITE_UNSAFE, idempotency=IdempotencyRule(key_argument="client_ref"))
    upstream, guard = Upstream(), stage(rule, store, clock)
    await guard(make_call(rule, {"client_ref": "r-1", "qty": 1}), upstream)
    with pytest.raises(SemanticArgumentRejection):
        await guard(make_call(rule, {"client_ref": "r-1", "qty": 2}), upstream)
    await guard(make_call(rule, {"client_ref": "r-2", "qty": 2}), upstream)
    assert len(upstream.calls) == 2


async def test_maybe_executed_failure_then_identical_call_gets_verify_state_without_running(
    store: StateStore, clock: FakeClock
) -> None:
    rule = ToolRule(effect=EffectClass.WRITE_UNSAFE, verify_with=VerifyWith(tool="shop__get_order"))
    timing_out = Upstream(fail=lambda: AttemptTimeout("timed out"))
    guard = stage(rule, store, clock)
    with pytest.raises(AttemptTimeout):
        await guard(make_call(rule), timing_out)
    healthy = Upstream()
    with pytest.raises(StateConflict) as conflict:
        await guard(make_call(rule), healthy)
    fault = conflict.value
    assert healthy.calls == []
    assert fault.repair_action is RepairAction.VERIFY_STATE and fault.side_effect_status is SideEffectStatus.UNKNOWN
    assert fault.max_retry == 0 and fault.details["conflict"] == "outcome_unknown"
    assert fault.details["verify_with"]["tool"] == "shop__get_order" and "shop__get_order" in str(fault.suggestion)


async def test_not_sent_failure_lets_the_identical_call_run(store: StateStore, clock: FakeClock) -> None:
    guard = stage(WRITE, store, clock)
    with pytest.raises(ConnectFailure):
        await guard(make_call(WRITE), Upstream(fail=lambda: ConnectFailure("refused")))
    healthy = Upstream()
    result = await guard(make_call(WRITE), healthy)
    assert len(healthy.calls) == 1 and REPLAY_META not in (result.meta or {})


async def test_an_error_result_is_not_stored_so_the_identical_call_runs_again(
    store: StateStore, clock: FakeClock
) -> None:
    async def error_result(call: ToolCall) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="out of stock")], is_error=True)

    guard = stage(WRITE, store, clock)
    assert (await guard(make_call(WRITE), error_result)).is_error
    healthy = Upstream()
    await guard(make_call(WRITE), healthy)
    assert len(healthy.calls) == 1


async def test_a_cancelled_write_leaves_its_outcome_unknown(store: StateStore, clock: FakeClock) -> None:
    gate = anyio.Event()
    upstream, guard = Upstream(gate=gate), stage(WRITE, store, clock)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(guard, make_call(WRITE), upstream)
            await upstream.entered.wait()
            tg.cancel_scope.cancel()
    with pytest.raises(StateConflict):
        await guard(make_call(WRITE), Upstream())


async def test_a_completed_write_is_replayed_only_within_the_window(store: StateStore, clock: FakeClock) -> None:
    rule = ToolRule(effect=EffectClass.WRITE_UNSAFE, idempotency=IdempotencyRule(window_s=60))
    upstream, guard = Upstream(), stage(rule, store, clock)
    await guard(make_call(rule), upstream)
    clock.now += 59
    await guard(make_call(rule), upstream)
    clock.now += 2
    await guard(make_call(rule), upstream)
    assert len(upstream.calls) == 2


async def test_replay_survives_closing_and_reopening_the_store(tmp_path: Path, clock: FakeClock) -> None:
    upstream = Upstream()
    async with await StateStore.open(tmp_path, clock=clock) as first_store:
        await stage(WRITE, first_store, clock)(make_call(WRITE), upstream)
    async with await StateStore.open(tmp_path, clock=clock) as second_store:
        replay = await stage(WRITE, second_store, clock)(make_call(WRITE), upstream)
    assert len(upstream.calls) == 1 and REPLAY_META in (replay.meta or {})


class DiesAfterSending:
    """A store whose process dies once the call is sent: the claim is written, nothing after it."""

    def __init__(self, store: StateStore) -> None:
        self.begin, self.get, self.call_fingerprint = store.begin, store.get, store.call_fingerprint
        self.begin_write = store.begin_write

    async def complete(self, *args: Any, **kwargs: Any) -> None:
        pass

    mark_unknown = release = settle_write = complete


async def test_an_in_flight_record_left_by_a_stopped_proxy_is_an_outcome_unknown_conflict(
    tmp_path: Path, clock: FakeClock
) -> None:
    upstream = Upstream()
    async with await StateStore.open(tmp_path, clock=clock) as before:
        await Idempotency(WRITE, DiesAfterSending(before), InFlight(), clock)(make_call(WRITE), upstream)
    async with await StateStore.open(tmp_path, clock=clock) as restarted:
        with pytest.raises(StateConflict) as conflict:
            await stage(WRITE, restarted, clock)(make_call(WRITE), upstream)
    assert len(upstream.calls) == 1
    fault = conflict.value
    assert "another resilient-mcp process" in fault.message and "blocked_until" in fault.details
    assert fault.side_effect_status is SideEffectStatus.UNKNOWN and fault.repair_action is RepairAction.VERIFY_STATE


async def test_the_key_is_forwarded_upstream_when_the_upstream_honours_keys(
    store: StateStore, clock: FakeClock
) -> None:
    rule = ToolRule(effect=EffectClass.WRITE_UNSAFE, idempotency=IdempotencyRule(forward_key_as="idempotencyKey"))
    upstream = Upstream()
    call = make_call(rule, meta={"trace": "t1", "Idempotency-Key": "k-9"})
    await stage(rule, store, clock)(call, upstream)
    assert upstream.calls[0].meta == {"trace": "t1", "Idempotency-Key": "k-9", "idempotencyKey": "k-9"}
    assert call.record.extra["idempotency_key"] == "k-9"


async def test_a_forwarded_key_is_scoped_to_the_principal_that_sent_it(store: StateStore, clock: FakeClock) -> None:
    """Two bearer tokens sending the same explicit key (or the same arguments) reach an upstream that deduplicates
    by key under two keys; without a principal (stdio, no tokens) the key goes as it came."""
    rule = ToolRule(effect=EffectClass.WRITE_UNSAFE, idempotency=IdempotencyRule(forward_key_as="idempotencyKey"))
    upstream = Upstream()
    for owner in ("token-1 session-a", "token-2 session-b", "stdio"):
        call = replace(make_call(rule, meta={"Idempotency-Key": "k-9"}), owner=owner, session_id=owner)
        await stage(rule, store, clock)(call, upstream)
        derived = replace(make_call(rule, args={"item": owner}), owner=owner, session_id=owner)
        await stage(rule, store, clock)(derived, upstream)
    keys = [c.meta["idempotencyKey"] for c in upstream.calls if c.meta]
    assert keys[0] == "token-1.k-9" and keys[2] == "token-2.k-9" and keys[4] == "k-9"
    assert keys[1].startswith("token-1.") and keys[3].startswith("token-2.") and "." not in keys[5]
    assert len(set(keys)) == 6


class ExplodingStore:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the store was used: {name}")


async def test_read_only_tools_pass_straight_through(clock: FakeClock) -> None:
    rule = ToolRule(effect=EffectClass.READ_ONLY)
    guard = Idempotency(rule, ExplodingStore(), InFlight(), clock)
    upstream = Upstream()
    call = make_call(rule)
    await guard(call, upstream)
    await guard(call, upstream)
    assert not guard.enabled and len(upstream.calls) == 2 and upstream.calls[0] is call


async def test_a_waiting_duplicate_shares_the_fault_of_the_first(store: StateStore, clock: FakeClock) -> None:
    gate = anyio.Event()
    upstream = Upstream(fail=lambda: AttemptTimeout("timed out"), gate=gate)
    guard = stage(WRITE, store, clock)
    faults: list[BaseException] = []

    async def one() -> None:
        try:
            await guard(make_call(WRITE), upstream)
        except AttemptTimeout as exc:
            faults.append(exc)

    await twice_at_once(one, upstream, gate)
    assert len(upstream.calls) == 1 and len(faults) == 2 and faults[0] is not faults[1]
