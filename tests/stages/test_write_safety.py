"""Write safety in memory: delivered writes run again, undelivered ones replay, unknown outcomes wait for a
verifying call, records are namespaced by upstream identity, budgets are opt-in, and the CLI says all of it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.call.meta import REPLAY_META
from resilient_mcp.commands import explain
from resilient_mcp.faults import (
    AttemptTimeout,
    EffectClass,
    Fault,
    PermanentExecutionError,
    RepairAction,
    StateConflict,
)
from resilient_mcp.host.toolcall import delivered
from resilient_mcp.policy import Policy, PolicyFile, SessionRule, ToolRule, VerifyWith
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.stages.guard import Guard, SessionGuards
from resilient_mcp.stages.idempotency import Idempotency, InFlight, identical_call, upstream_identity
from resilient_mcp.state.sqlite import StateStore
from tests.conftest import FakeClock

pytestmark = pytest.mark.anyio


WRITE = ToolRule(effect=EffectClass.WRITE_UNSAFE)
READ_HINT = types.ToolAnnotations(read_only_hint=True)


class Upstream:
    """Counts executions; fails with ``fail`` while it is set."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail: Fault | None = None

    async def __call__(self, call: ToolCall) -> types.CallToolResult:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return types.CallToolResult(content=[types.TextContent(text=f"done #{self.calls}")])


def write_call(session: str = "s1", upstream: str = "shop", content: str = "v1", rule: ToolRule = WRITE) -> ToolCall:
    return ToolCall(
        name="write_file",
        arguments={"path": "notes.txt", "content": content},
        upstream=upstream,
        upstream_tool="write_file",
        rule=rule,
        session_id=session,
    )


def read_call(session: str = "s1", *, rule: ToolRule | None = None, hint: bool = False, name: str = "read") -> ToolCall:
    tool = types.Tool(name=name, input_schema={"type": "object"}, annotations=READ_HINT if hint else None)
    return ToolCall(
        name=name,
        arguments={},
        upstream="shop",
        upstream_tool=name,
        rule=rule or ToolRule(),
        tool=tool,
        session_id=session,
    )


async def host(stage: Idempotency, call: ToolCall, upstream: Upstream) -> types.CallToolResult:
    """What ``server.run_tool_call`` does around the chain: the result reaches the host, then the hooks run."""
    result = await stage(call, upstream)
    await delivered(call)
    return result


async def timed_out(stage: Idempotency, call: ToolCall, upstream: Upstream) -> None:
    upstream.fail = AttemptTimeout("timed out")
    with pytest.raises(AttemptTimeout):
        await stage(call, upstream)
    upstream.fail = None


def guarded(
    store: StateStore, clock: FakeClock, rule: ToolRule = WRITE, session: SessionRule | None = None
) -> tuple[Guard, Idempotency]:
    """The loop guard and the idempotency stage on one session memory, as the chain composes them."""
    guards = SessionGuards()
    return Guard(session or SessionRule(), guards, wall=clock), Idempotency(
        rule, store, InFlight(), clock, guards=guards
    )


async def test_a_write_whose_result_was_delivered_runs_again_when_repeated(store: StateStore, clock: FakeClock) -> None:
    upstream, stage = Upstream(), Idempotency(WRITE, store, InFlight(), clock)
    results = [await host(stage, write_call(content=c), upstream) for c in ("v1", "v2", "v1")]
    assert upstream.calls == 3
    assert not any(REPLAY_META in (r.meta or {}) for r in results)


async def test_a_replayed_undelivered_result_once_delivered_is_not_replayed_again(
    store: StateStore, clock: FakeClock
) -> None:
    upstream, stage = Upstream(), Idempotency(WRITE, store, InFlight(), clock)
    await stage(write_call(), upstream)  # the host cancelled before the answer reached it
    replay = await host(stage, write_call(), upstream)
    assert upstream.calls == 1 and REPLAY_META in (replay.meta or {})
    third = await host(stage, write_call(), upstream)
    assert upstream.calls == 2 and REPLAY_META not in (third.meta or {})


async def test_an_undelivered_result_is_replayed_only_to_its_own_session(store: StateStore, clock: FakeClock) -> None:
    upstream, stage = Upstream(), Idempotency(WRITE, store, InFlight(), clock)
    await stage(write_call("s1"), upstream)
    other = await host(stage, write_call("s2"), upstream)
    assert upstream.calls == 2 and REPLAY_META not in (other.meta or {})


async def test_an_unknown_outcome_blocks_every_session_until_that_session_verifies_then_runs_once(
    store: StateStore, clock: FakeClock
) -> None:
    guard, stage = guarded(store, clock)
    upstream = Upstream()
    await timed_out(stage, write_call("s1"), upstream)
    for session in ("s1", "s2"):
        with pytest.raises(StateConflict) as blocked:
            await stage(write_call(session), upstream)
        fault = blocked.value
        assert fault.repair_action is RepairAction.VERIFY_STATE and fault.retry_after_ms is None
        assert "any read-only tool of 'shop'" in str(fault.suggestion)
        assert "re-issue it after" not in str(fault.suggestion)
    assert upstream.calls == 1

    clock.now += 1
    await guard(read_call("s2", rule=ToolRule(effect=EffectClass.READ_ONLY)), upstream)  # verified by s2 only
    with pytest.raises(StateConflict):
        await stage(write_call("s1"), upstream)
    call = write_call("s2")
    await host(stage, call, upstream)
    assert upstream.calls == 3  # the timed-out write, s2's read, s2's re-issue
    assert any("was called since" in note for note in call.record.notes)
    again = await host(stage, write_call("s1"), upstream)
    assert upstream.calls == 4 and not again.is_error, "the re-issue succeeded: the block is gone for all"


async def test_a_verifying_read_that_answers_not_found_lifts_the_block_and_the_write_runs_once_more(
    store: StateStore, clock: FakeClock
) -> None:
    """The write timed out before it ran: the verifying read says "not found" (an error result of the tool's own).
    That is the server's word on its state, so it verifies as a success would; a read that failed on the way (a
    timeout) does not."""
    guard, stage = guarded(store, clock)
    writes, reads = Upstream(), Upstream()
    await timed_out(stage, write_call("s1"), writes)
    read_rule = ToolRule(effect=EffectClass.READ_ONLY)

    clock.now += 1
    reads.fail = AttemptTimeout("the read timed out too")
    with pytest.raises(AttemptTimeout):
        await guard(read_call("s1", rule=read_rule), reads)
    with pytest.raises(StateConflict):
        await stage(write_call("s1"), writes)  # a read that never answered verifies nothing

    answer = types.CallToolResult(content=[types.TextContent(text="order not found")], is_error=True)
    not_found = PermanentExecutionError("order not found", upstream_result=answer)
    reads.fail = not_found
    with pytest.raises(PermanentExecutionError):
        await guard(read_call("s1", rule=read_rule, name="get_order"), reads)
    result = await host(stage, write_call("s1"), writes)
    assert not result.is_error and writes.calls == 2, "the write that never ran is sent once more"


async def test_blind_reissues_that_reach_abort_advice_still_run_once_the_session_verified(
    store: StateStore, clock: FakeClock
) -> None:
    guard, stage = guarded(store, clock, session=SessionRule(loop_threshold=2))
    upstream = Upstream()

    async def chain(call: ToolCall) -> types.CallToolResult:
        return await stage(call, upstream)

    await timed_out(stage, write_call(), upstream)
    for _ in range(3):
        with pytest.raises(StateConflict) as blind:
            await guard(write_call(), chain)
    assert blind.value.repair_action is RepairAction.ABORT, "repeating blindly is a loop"
    clock.now += 1
    await guard(read_call(hint=True), upstream)
    call = write_call()
    result = await guard(call, chain)
    await delivered(call)
    assert not result.is_error and upstream.calls == 3  # the timed-out write, the read, the verified re-issue


async def test_an_untrusted_read_only_hint_may_lift_a_block(store: StateStore, clock: FakeClock) -> None:
    guard, stage = guarded(store, clock)
    upstream = Upstream()
    await timed_out(stage, write_call(), upstream)
    clock.now += 1
    await guard(read_call(), upstream)  # write_unsafe by default, no hint: does not verify
    with pytest.raises(StateConflict):
        await stage(write_call(), upstream)
    await guard(read_call(hint=True), upstream)  # the server's own readOnlyHint, not trusted: lifts the block
    await host(stage, write_call(), upstream)
    assert upstream.calls == 4


async def test_the_verify_with_tool_lifts_a_block_and_is_named(store: StateStore, clock: FakeClock) -> None:
    rule = ToolRule(effect=EffectClass.WRITE_UNSAFE, verify_with=VerifyWith(tool="get_file"))
    guard, stage = guarded(store, clock, rule)
    upstream = Upstream()
    await timed_out(stage, write_call(rule=rule), upstream)
    with pytest.raises(StateConflict) as blocked:
        await stage(write_call(rule=rule), upstream)
    assert "call get_file or any read-only tool" in str(blocked.value.suggestion)
    clock.now += 1
    await guard(read_call(name="get_file"), upstream)
    await host(stage, write_call(rule=rule), upstream)
    assert upstream.calls == 3


async def test_a_verifying_call_made_before_the_outcome_became_unknown_does_not_count(
    store: StateStore, clock: FakeClock
) -> None:
    guard, stage = guarded(store, clock)
    upstream = Upstream()
    await guard(read_call(hint=True), upstream)
    clock.now += 1
    await timed_out(stage, write_call(), upstream)
    with pytest.raises(StateConflict):
        await stage(write_call(), upstream)


async def test_an_unknown_outcome_survives_a_restart_and_an_undelivered_result_does_not_cross_processes(
    tmp_path: Path, clock: FakeClock
) -> None:
    upstream = Upstream()
    async with await StateStore.open(tmp_path, clock=clock) as before:
        stage = Idempotency(WRITE, before, InFlight(), clock)
        await timed_out(stage, write_call("proc1", content="unknown"), upstream)
        await stage(write_call("proc1", content="undelivered"), upstream)
    async with await StateStore.open(tmp_path, clock=clock) as after:
        stage = Idempotency(WRITE, after, InFlight(), clock, guards=SessionGuards())
        with pytest.raises(StateConflict):
            await stage(write_call("proc2", content="unknown"), upstream)
        fresh = await host(stage, write_call("proc2", content="undelivered"), upstream)
    assert upstream.calls == 3 and REPLAY_META not in (fresh.meta or {})


async def test_two_servers_with_one_configured_name_never_share_a_record(store: StateStore, clock: FakeClock) -> None:
    a = upstream_identity(
        ProxyConfig.model_validate({"upstreams": {"u": {"command": "srv", "args": ["a"]}}}).upstreams["u"]
    )
    b = upstream_identity(
        ProxyConfig.model_validate({"upstreams": {"u": {"command": "srv", "args": ["b"]}}}).upstreams["u"]
    )
    assert a != b
    flights, upstream = InFlight(), Upstream()
    await timed_out(Idempotency(WRITE, store, flights, clock, identity=a), write_call(upstream="upstream"), upstream)
    other = Idempotency(WRITE, store, flights, clock, identity=b, guards=SessionGuards())
    await host(other, write_call(upstream="upstream"), upstream)
    assert upstream.calls == 2, "the other server's unknown outcome did not block this one"


async def test_identical_successful_calls_are_never_refused_and_budgets_are_off_by_default() -> None:
    rule = SessionRule()
    assert rule.max_tool_calls is None and rule.max_failures is None
    guard, upstream = Guard(rule, SessionGuards()), Upstream()
    for _ in range(1100):
        await guard(write_call(), upstream)
    upstream.fail = AttemptTimeout("timed out")  # transient: let through
    for _ in range(120):
        with pytest.raises(AttemptTimeout):
            await guard(write_call(content="other"), upstream)
    upstream.fail = None
    await guard(write_call(), upstream)
    assert upstream.calls == 1221


async def test_the_loop_guard_never_short_circuits_a_write_waiting_for_verification() -> None:
    guard, upstream = Guard(SessionRule(), SessionGuards()), Upstream()
    upstream.fail = StateConflict("outcome unknown", repair_action=RepairAction.VERIFY_STATE)
    for _ in range(2):
        with pytest.raises(StateConflict) as info:
            await guard(write_call(), upstream)
        assert not info.value.details.get("short_circuited")
    assert upstream.calls == 2, "the idempotency stage, not the loop guard, decides when it may run"


async def test_concurrent_identical_writes_of_one_session_join_even_when_delivered(
    store: StateStore, clock: FakeClock
) -> None:
    gate = anyio.Event()
    calls = 0

    async def slow(call: ToolCall) -> types.CallToolResult:
        nonlocal calls
        calls += 1
        await gate.wait()
        return types.CallToolResult(content=[types.TextContent(text="ok")])

    stage = Idempotency(WRITE, store, InFlight(), clock)
    results: list[types.CallToolResult] = []

    async def one() -> None:
        call = write_call()
        results.append(await stage(call, slow))
        await delivered(call)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(one)
            await anyio.wait_all_tasks_blocked()
            gate.set()
    assert calls == 1 and len(results) == 2
    upstream = Upstream()
    await host(stage, write_call(), upstream)
    assert upstream.calls == 1, "once delivered, the next identical call runs"


async def test_a_joiner_of_a_write_without_outcome_and_a_later_blind_call_are_refused_in_one_wording(
    store: StateStore, clock: FakeClock
) -> None:
    gate = anyio.Event()

    async def broken(call: ToolCall) -> types.CallToolResult:
        await gate.wait()
        raise RuntimeError("a bug below the idempotency stage")  # no outcome: the write may have been sent

    stage = Idempotency(WRITE, store, InFlight(), clock)
    refused: list[StateConflict] = []

    async def lead() -> None:
        with pytest.raises(RuntimeError):
            await stage(write_call(), broken)

    async def join() -> None:
        with pytest.raises(StateConflict) as info:
            await stage(write_call(), broken)
        refused.append(info.value)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lead)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(join)
            await anyio.wait_all_tasks_blocked()
            gate.set()
    upstream = Upstream()
    with pytest.raises(StateConflict) as later:
        await stage(write_call(), upstream)
    joined, blind = refused[0], later.value
    assert upstream.calls == 0
    assert (joined.message, joined.suggestion) == (blind.message, blind.suggestion)
    assert joined.message == (
        "An identical call made at 2023-11-14T22:13:20+00:00 may have executed, but its outcome is unknown (timed "
        "out, cancelled, or the connection was lost); this one was not sent."
    )
    assert joined.suggestion == (
        "Check whether it took effect: call any read-only tool of 'shop'. Once you have, repeating this identical "
        "call sends it (only do that if it did not take effect), or change the arguments."
    )
    assert joined.details["unblocked_by"] == blind.details["unblocked_by"] == "verify_call"


# --- what the CLI says -----------------------------------------------------------------------------------------------


def test_identical_call_behaviour_per_tool() -> None:
    assert identical_call(ToolRule(effect=EffectClass.READ_ONLY), None)["summary"] == "run"
    hinted = types.Tool(name="read", input_schema={"type": "object"}, annotations=READ_HINT)
    assert identical_call(WRITE, hinted)["summary"] == "run"
    write = identical_call(WRITE, None)
    assert write["summary"] == "join / replay-if-undelivered / block-until-verified, else run"
    assert write["after_its_result_was_delivered"] == "run"
    keyed = ToolRule.model_validate({"idempotency": {"key_argument": "client_ref"}})
    assert "client_ref" in identical_call(keyed, None)["summary"]


def _explain(capsys: pytest.CaptureFixture[str], config: dict[str, Any], policy: dict[str, Any], *argv: str) -> Any:
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream")
    parser.add_argument("tool")
    args = parser.parse_args(list(argv))
    loaded = (ProxyConfig.model_validate(config), Policy(PolicyFile.model_validate(policy)))
    assert explain(args, lambda _: loaded) == 0
    return json.loads(capsys.readouterr().out)


def test_explain_with_an_upstream_resolves_the_name_with_or_without_its_prefix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = {"upstreams": {"fs": {"command": "a"}, "git": {"command": "b"}}}
    policy = {"upstreams": {"fs": {"tools": {"write_file": {"effect": "destructive"}}}}}
    bare = _explain(capsys, config, policy, "--upstream", "fs", "write_file")
    prefixed = _explain(capsys, config, policy, "--upstream", "fs", "fs__write_file")
    for report in (bare, prefixed):
        assert report["upstream_tool_name"] == "write_file" and report["tool"] == "fs__write_file"
        assert report["rule"]["effect"] == "destructive" and report["effect_from"] == "policy"
        assert report["identical_call"]["after_an_unknown_outcome"].startswith("block until this session verifies")
    guessed = _explain(capsys, config, {}, "git__git_commit")
    assert guessed["upstream"] == "git" and guessed["upstream_tool_name"] == "git_commit"
    assert guessed["effect_from"].startswith("default")
