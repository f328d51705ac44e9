"""Acceptance of issue 4 for catalog categories C (sending, transport) and D (execution), through the real path.

Every test runs a real MCP client → the proxy (all stages) → an upstream that injects the fault: an in-process server
behind a breakable in-memory link, the same server over streamable HTTP behind a shim answering HTTP errors, or a
real stdio subprocess (tests/fixtures/probe_server.py). Each asserts how many times the upstream executed the call
and the observation's fields. The retry stage sleeps through an injected recorder, so every backoff is asserted as the
full-jitter delay computed from the seeded random source and no test sleeps to wait; per-attempt timeouts are small
real timeouts of the proxy (``timeouts.attempt_s``), and waits for the proxy's own supervision are bounded. Tests
whose outcome depends on an ordinary attempt beating such a timeout run in memory on virtual time (``virtual_time``);
those with a real subprocess hold the attempt timeout (``HeldTimers``) and expire it only after an event the upstream
process recorded: both hold on a saturated machine.
"""

from __future__ import annotations

import math
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace as dc_replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client._memory import InMemoryTransport
from mcp.shared.exceptions import MCPError

from resilient_mcp.call.chain import HostEnvelope, Timers
from tests.fixtures.fault_links import (
    FAULT_META,
    HttpFault,
    HttpShim,
    Link,
    SleepRecorder,
    attempt_outcomes,
    call,
    core,
    full_jitter,
    linked,
    observation,
    proxy_over,
    recording_pipeline,
    rule,
    text_of,
)
from tests.fixtures.probe_server import Probe
from tests.fixtures.probe_server import build_server as build_probe_server
from tests.fixtures.scripted import Handler, ScriptedUpstream, error_text, hang, ok_text
from tests.harness import Harness
from tests.helpers import PROBE_SERVER, await_until, read_events, virtual_time

pytestmark = pytest.mark.anyio

LIMIT_S = 30
VERIFY = {"tool": "get_order", "args": {"client_ref": "{client_ref}"}}


def shop(**handlers: Handler) -> ScriptedUpstream:
    up = ScriptedUpstream(name="shop")
    for name, handler in handlers.items():
        up.tool(name, handler)
    return up


@asynccontextmanager
async def over_link(
    up: ScriptedUpstream, tools: dict[str, Any], recorder: SleepRecorder, *, trusted: bool = False
) -> AsyncIterator[tuple[Harness, Link]]:
    link = Link(up.server())
    upstreams, transports = linked({"shop": link})
    policy: dict[str, Any] = {"tools": tools}
    if trusted:  # typed hints that a write did not run are believed only from trusted upstreams (rule R)
        policy["upstreams"] = {"shop": {"trust_annotations": True}}
    async with proxy_over(upstreams, policy, transports=transports, pipeline=recording_pipeline(recorder)) as h:
        yield h, link


@asynccontextmanager
async def over_http(
    up: ScriptedUpstream, tools: dict[str, Any], recorder: SleepRecorder
) -> AsyncIterator[tuple[Harness, HttpShim]]:
    shim = HttpShim(up.server())
    pipeline = recording_pipeline(recorder)
    async with shim.serving(), proxy_over({"shop": {"url": shim.url}}, {"tools": tools}, pipeline=pipeline) as h:
        yield h, shim


def no_fault(result: types.CallToolResult) -> None:
    assert not result.is_error, text_of(result)
    assert FAULT_META not in (result.meta or {}) and result.structured_content is None


# --- C1 connect_failure ---------------------------------------------------------------------------------------------


async def _hold_reconnect(h: Harness, link: Link) -> None:
    """Drop the live connection; the next connect is refused, the one after it waits at the link's gate."""
    link.refuse_next, link.gate = 1, anyio.Event()
    h.proxy.upstreams["shop"].request_restart()
    await link.held.wait()


@virtual_time
async def test_a_write_sent_while_its_upstream_refuses_connections_is_retried_and_executes_once() -> None:
    up = shop(create_order=lambda args: ok_text("created"))
    recorder = SleepRecorder()
    async with over_link(up, {"create_order": rule("write_unsafe", attempt_s=0.5)}, recorder) as (h, link):
        with anyio.fail_after(LIMIT_S):
            await _hold_reconnect(h, link)
            assert link.gate is not None
            gate = link.gate

            async def open_gate() -> None:
                gate.set()

            recorder.before_return = open_gate
            result = await h.client.call_tool("create_order", {"sku": "S"})
    no_fault(result)
    assert up.count("create_order") == 1
    assert attempt_outcomes(result) == ["C1_connect_failure", "ok"]
    assert recorder.delays == full_jitter(0.1)
    assert link.connects == 3, "startup, the refused connect, and the held one that served the retry"


async def test_an_upstream_that_stays_unreachable_gives_a_not_sent_connect_failure_after_three_attempts() -> None:
    up = shop(create_order=lambda args: ok_text("created"))
    recorder = SleepRecorder()
    async with over_link(up, {"create_order": rule("write_unsafe", attempt_s=0.2)}, recorder) as (h, link):
        with anyio.fail_after(LIMIT_S):
            await _hold_reconnect(h, link)
            result = await h.client.call_tool("create_order", {"sku": "S"})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "C1_connect_failure",
        "retry_safety": "not_sent",
        "side_effect_status": "none",
        "repair_action": "backoff_retry",
        "max_retry": 2,
        "attempts": ["C1_connect_failure"] * 3,
    }
    assert [a.get("delay_before_ms") for a in obs["attempts"]] == [None] + [round(d * 1000) for d in recorder.delays]
    assert recorder.delays == full_jitter(0.1, 0.2)
    assert up.count("create_order") == 0


_SPAWN_WRAPPER = """\
import os, pathlib, sys, time
count, gate = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
if n == 2:
    sys.exit(1)  # dead before reading anything: the proxy's connect fails
if n >= 3:
    deadline = time.monotonic() + 60
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
os.execv(sys.executable, [sys.executable, *sys.argv[3:]])
"""


async def test_a_write_sent_while_the_stdio_upstream_process_is_dead_is_retried_and_executes_once(
    tmp_path: Path,
) -> None:
    """Catalog C1 over stdio: a wrapper that exits before reading on the first respawn, then starts slowly."""
    wrapper, count, gate, events = (tmp_path / n for n in ("wrapper.py", "spawns", "gate", "events"))
    wrapper.write_text(_SPAWN_WRAPPER)
    argv = [str(wrapper), str(count), str(gate), str(PROBE_SERVER), "--events", str(events)]
    recorder = SleepRecorder()
    policy = {"tools": {"counter_add": rule("write_unsafe", attempt_s=1.0)}}
    pipeline = recording_pipeline(recorder)
    async with proxy_over({"probe": {"command": sys.executable, "args": argv}}, policy, pipeline=pipeline) as h:
        upstream = h.proxy.upstreams["probe"]
        # The first attempt fails waiting 1 s for a connection the gate holds back (its outcome whatever the speed);
        # the retry's answer from the restarted process is waited for without a clock (a running 1 s attempt timeout
        # raced the subprocess's answer on a loaded machine).
        attempts_timed_by(h, "probe", HeldTimers())

        async def open_gate_and_wait_for_the_restart() -> None:
            gate.write_text("open")
            await await_until(lambda: upstream.state == "ready", LIMIT_S, "the restarted upstream")

        recorder.before_return = open_gate_and_wait_for_the_restart
        with anyio.fail_after(2 * LIMIT_S):
            pid = int(text_of(await h.client.call_tool("pid", {})))
            os.kill(pid, signal.SIGKILL)
            await await_until(lambda: count.exists() and count.read_text() == "3", LIMIT_S, "the slow third spawn")
            result = await h.client.call_tool("counter_add", {"n": 5})
    no_fault(result)
    assert text_of(result) == "5"
    assert attempt_outcomes(result) == ["C1_connect_failure", "ok"]
    assert recorder.delays == full_jitter(0.1)
    assert [e for e in read_events(events) if e.startswith("counter_add")] == ["counter_add 5 5"]


# --- C2 connection_lost_after_send ----------------------------------------------------------------------------------


async def test_a_write_whose_connection_dies_after_it_committed_runs_once_and_asks_to_verify_state() -> None:
    link_box: list[Link] = []

    def create(args: dict[str, Any]) -> types.CallToolResult:
        link_box[0].arm("drop")
        return ok_text("created")

    up = shop(create_order=create, get_order=lambda args: ok_text("found"))
    recorder = SleepRecorder()
    tools = {"create_order": rule("write_unsafe", verify_with=VERIFY), "get_order": rule("read_only")}
    async with over_link(up, tools, recorder) as (h, link):
        link_box.append(link)
        with anyio.fail_after(LIMIT_S):
            result = await h.client.call_tool("create_order", {"client_ref": "R1"})
            again = await h.client.call_tool("create_order", {"client_ref": "R1"})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "C2_connection_lost_after_send",
        "retry_safety": "maybe_executed",
        "side_effect_status": "unknown",
        "repair_action": "verify_state",
        "max_retry": 0,
        "attempts": ["C2_connection_lost_after_send"],
    }
    assert obs["details"]["verify_with"] == {"tool": "get_order", "args": {"client_ref": "R1"}}
    assert recorder.delays == []
    again_obs = observation(again)
    assert (again_obs["fault_type"], again_obs["repair_action"]) == ("D5_state_conflict", "verify_state")
    assert up.count("create_order") == 1, "neither the proxy nor the blind re-issue may run the write again"


async def test_a_read_whose_connection_dies_after_send_is_retried_on_the_restarted_connection() -> None:
    link_box: list[Link] = []

    def drop_once(args: dict[str, Any]) -> types.CallToolResult:
        link_box[0].arm("drop")
        return ok_text("lost")

    up = shop(get_order=ScriptedUpstream.sequence(drop_once, lambda args: ok_text("found")))
    recorder = SleepRecorder()
    async with over_link(up, {"get_order": rule("read_only")}, recorder) as (h, link):
        link_box.append(link)
        result = await call(h, "get_order", {"client_ref": "R1"})
    no_fault(result)
    assert text_of(result) == "found"
    assert up.count("get_order") == 2
    assert attempt_outcomes(result) == ["C2_connection_lost_after_send", "ok"]
    assert recorder.delays == full_jitter(0.1)


# --- C3 attempt_timeout ---------------------------------------------------------------------------------------------


@virtual_time
async def test_a_read_that_times_out_once_then_succeeds_is_one_observation_free_success_after_two_attempts() -> None:
    up = shop(search=ScriptedUpstream.sequence(hang(), lambda args: ok_text("3 hits")))
    recorder = SleepRecorder()
    async with over_link(up, {"search": rule("read_only", attempt_s=0.5)}, recorder) as (h, _):
        result = await call(h, "search", {"q": "x"})
    no_fault(result)
    assert text_of(result) == "3 hits"
    assert up.count("search") == 2
    assert attempt_outcomes(result) == ["C3_attempt_timeout", "ok"]
    assert recorder.delays == full_jitter(0.1)


@virtual_time
async def test_a_write_that_commits_then_hangs_runs_once_is_cancelled_upstream_and_asks_to_verify_state() -> None:
    cancelled = anyio.Event()

    async def commit_then_hang(args: dict[str, Any]) -> types.CallToolResult:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    up = shop(create_order=commit_then_hang)
    recorder = SleepRecorder()
    tools = {"create_order": rule("write_unsafe", attempt_s=0.2, verify_with=VERIFY)}
    async with over_link(up, tools, recorder) as (h, _):
        with anyio.fail_after(LIMIT_S):
            result = await h.client.call_tool("create_order", {"client_ref": "R7"})
            await cancelled.wait()  # the proxy sent notifications/cancelled for the abandoned attempt
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "C3_attempt_timeout",
        "retry_safety": "maybe_executed",
        "side_effect_status": "unknown",
        "repair_action": "verify_state",
        "max_retry": 0,
        "attempts": ["C3_attempt_timeout"],
    }
    assert obs["details"]["timeout_ms"] == 200, "on virtual time the attempt timeout is exact"
    assert obs["details"]["verify_with"] == {"tool": "get_order", "args": {"client_ref": "R7"}}
    assert up.count("create_order") == 1
    assert recorder.delays == []


class HeldTimers(Timers):
    """Timers of the test's host requests that hold every attempt timeout until the test expires it.

    A real subprocess answers when the machine lets it: a small attempt timeout in front of one races the process. Held,
    an attempt's own cancel scope (``upstream/calls.py``) has no deadline until ``expire()`` gives it one that has
    passed; the proxy then times the attempt out exactly as at its deadline. The retry stage's total deadline stays on
    the host request's own timers."""

    def __init__(self) -> None:
        super().__init__()
        self.scopes: list[anyio.CancelScope] = []

    @contextmanager
    def timing(self, scope: anyio.CancelScope) -> Iterator[anyio.CancelScope]:
        self.scopes.append(scope)
        with super().timing(scope):
            scope.deadline = math.inf
            yield scope

    def expire(self) -> None:
        for scope in self.scopes:
            scope.deadline = anyio.current_time()


def attempts_timed_by(h: Harness, upstream: str, timers: HeldTimers) -> None:
    """Route ``upstream``'s attempts through ``timers``."""
    send = h.proxy.router.senders[upstream]

    async def timed(*args: Any, host: HostEnvelope | None = None, **kwargs: Any) -> types.CallToolResult:
        envelope = HostEnvelope(ctx=None, capabilities=frozenset()) if host is None else host
        return await send(*args, host=dc_replace(envelope, timers=timers), **kwargs)

    h.proxy.router.senders[upstream] = timed


async def test_a_stdio_write_that_outlives_its_attempt_timeout_is_cancelled_in_the_upstream_process(
    tmp_path: Path,
) -> None:
    # The premise is an event, not a race: the attempt timeout is held until the upstream process has recorded that
    # the tool began, then expired (a running 0.5 s timeout on a loaded machine could fire before the subprocess read
    # the request, and the test then failed or proved nothing).
    events = tmp_path / "events"
    recorder = SleepRecorder()
    argv = [str(PROBE_SERVER), "--events", str(events)]
    policy = {"tools": {"slow": rule("write_unsafe", attempt_s=0.5)}}
    pipeline = recording_pipeline(recorder)
    results: list[types.CallToolResult] = []
    async with proxy_over({"probe": {"command": sys.executable, "args": argv}}, policy, pipeline=pipeline) as h:
        timers = HeldTimers()
        attempts_timed_by(h, "probe", timers)

        async def slow_call() -> None:
            results.append(await h.client.call_tool("slow", {"seconds": 30, "steps": 1}))

        with anyio.fail_after(LIMIT_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_call)
                await await_until(lambda: started(events), LIMIT_S, "the tool began in the upstream process")
                assert len(timers.scopes) == 1, "one attempt, its timeout held"
                timers.expire()
            await await_until(lambda: any(e.startswith("cancelled") for e in read_events(events)), LIMIT_S, "cancel")
    [result] = results
    assert core(observation(result))["attempts"] == ["C3_attempt_timeout"]
    assert observation(result)["repair_action"] == "verify_state"
    assert len(started(events)) == 1
    assert not [e for e in read_events(events) if e.startswith("slow_done")], "the side effect did not complete"
    assert recorder.delays == []


def started(events: Path) -> list[str]:
    return [e for e in read_events(events) if e.startswith("slow_started")]


# --- C4 gateway_5xx (streamable HTTP upstream behind a shim) -------------------------------------------------------


async def test_a_read_answered_502_by_the_gateway_is_retried_and_succeeds() -> None:
    up = shop(search=lambda args: ok_text("3 hits"))
    recorder = SleepRecorder()
    async with over_http(up, {"search": rule("read_only")}, recorder) as (h, shim):
        shim.plan = [HttpFault(502)]
        result = await call(h, "search", {"q": "x"})
    no_fault(result)
    assert (shim.tool_posts, up.count("search")) == (2, 1), "the 502 came from the gateway, before the upstream"
    assert attempt_outcomes(result) == ["C4_gateway_5xx", "ok"]
    assert recorder.delays == full_jitter(0.1)


async def test_a_write_answered_504_after_it_ran_is_not_retried_and_asks_to_verify_state() -> None:
    up = shop(create_order=lambda args: ok_text("created"))
    recorder = SleepRecorder()
    async with over_http(up, {"create_order": rule("write_unsafe")}, recorder) as (h, shim):
        shim.plan = [HttpFault(504, after_forwarding=True)]
        result = await call(h, "create_order", {"sku": "S"})
    assert core(observation(result)) == {
        "fault_type": "C4_gateway_5xx",
        "retry_safety": "maybe_executed",
        "side_effect_status": "unknown",
        "repair_action": "verify_state",
        "max_retry": 0,
        "attempts": ["C4_gateway_5xx"],
    }
    assert (shim.tool_posts, up.count("create_order")) == (1, 1)
    assert recorder.delays == []


# mcp 2.3's streamable HTTP client turns every non-2xx, non-404 answer to a POST into JSON-RPC -32603 and drops
# the status and headers; upstream/errors.py tags each tools/call POST and reads them back, so these are classified as
# the HTTP status says (429/503 with Retry-After: waited for, and the write runs once).


async def test_a_write_answered_503_with_retry_after_before_forwarding_is_retried_after_the_wait() -> None:
    up = shop(create_order=lambda args: ok_text("created"))
    recorder = SleepRecorder()
    async with over_http(up, {"create_order": rule("write_unsafe")}, recorder) as (h, shim):
        shim.plan = [HttpFault(503, {"Retry-After": "1"})]
        result = await call(h, "create_order", {"sku": "S"})
    no_fault(result)
    assert recorder.delays == [1.0]
    assert up.count("create_order") == 1


# --- C5 persistent_outage -------------------------------------------------------------------------------------------


@virtual_time  # "fails fast" is measured on the virtual clock: no timer of 1 s or more is waited for
async def test_a_call_to_an_upstream_that_refuses_every_connection_fails_fast_as_a_persistent_outage() -> None:
    up = shop(create_order=lambda args: ok_text("created"))
    recorder = SleepRecorder()
    async with over_link(up, {"create_order": rule("write_unsafe")}, recorder) as (h, link):
        upstream = h.proxy.upstreams["shop"]
        link.refuse_all = True
        upstream.request_restart()
        with anyio.fail_after(LIMIT_S):
            await await_until(lambda: upstream.state == "failed", LIMIT_S, "two refused connects")
            with anyio.fail_after(1):  # fails fast: no waiting for a connection that will not come
                result = await h.client.call_tool("create_order", {"sku": "S"})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "C5_persistent_outage",
        "retry_safety": "not_sent",
        "side_effect_status": "none",
        "repair_action": "degrade",
        "max_retry": 0,
        "attempts": ["C5_persistent_outage"],
    }
    assert obs["details"]["state"] == "failed" and "refused" in obs["details"]["last_error"].lower()
    assert up.count("create_order") == 0
    assert recorder.delays == []


# --- D1 transient_execution_error -----------------------------------------------------------------------------------


async def test_a_write_an_untrusted_upstream_rejects_as_typed_unavailable_runs_once_and_asks_to_verify() -> None:
    busy = error_text("busy, try later", {"type": "unavailable"})
    up = shop(create_order=ScriptedUpstream.sequence(lambda a: busy, lambda a: ok_text("created")))
    recorder = SleepRecorder()
    async with over_link(up, {"create_order": rule("write_unsafe", verify_with=VERIFY)}, recorder) as (h, _):
        with anyio.fail_after(LIMIT_S):
            obs = observation(await h.client.call_tool("create_order", {"sku": "S", "client_ref": "r-1"}))
    assert up.count("create_order") == 1, "the upstream's word alone does not get a write re-sent"
    assert obs["retry_safety"] == "maybe_executed" and obs["repair_action"] == "verify_state"
    assert obs["details"]["upstream_claimed"] == "rejected" and obs["details"]["retry_stopped"] == "untrusted_claim"


async def test_a_write_a_trusted_upstream_rejects_twice_as_typed_unavailable_is_retried_and_executes_once() -> None:
    busy = error_text("busy, try later", {"type": "unavailable"})
    up = shop(create_order=ScriptedUpstream.sequence(lambda a: busy, lambda a: busy, lambda a: ok_text("created")))
    recorder = SleepRecorder()
    async with over_link(up, {"create_order": rule("write_unsafe")}, recorder, trusted=True) as (h, _):
        result = await call(h, "create_order", {"sku": "S"})
    no_fault(result)
    assert text_of(result) == "created"
    assert up.count("create_order") == 3, "two rejections (not executed) and the one execution"
    assert attempt_outcomes(result) == ["D1_transient_execution_error"] * 2 + ["ok"]
    assert recorder.delays == full_jitter(0.1, 0.2)


def internal_error(args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(types.INTERNAL_ERROR, "database connection reset")


async def test_a_write_failing_with_json_rpc_internal_error_runs_once_and_asks_to_verify_state() -> None:
    up = shop(create_order=internal_error)
    recorder = SleepRecorder()
    async with over_link(up, {"create_order": rule("write_unsafe")}, recorder) as (h, _):
        result = await call(h, "create_order", {"sku": "S"})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "D1_transient_execution_error",
        "retry_safety": "maybe_executed",
        "side_effect_status": "unknown",
        "repair_action": "verify_state",
        "max_retry": 0,
        "attempts": ["D1_transient_execution_error"],
    }
    assert obs["is_transient"] is True and obs["upstream_message"]["text"] == "database connection reset"
    assert up.count("create_order") == 1
    assert recorder.delays == []


async def test_a_read_failing_with_json_rpc_internal_error_is_retried_once_then_surfaced() -> None:
    up = shop(search=internal_error)
    recorder = SleepRecorder()
    async with over_link(up, {"search": rule("read_only")}, recorder) as (h, _):
        result = await call(h, "search", {"q": "x"})
    assert core(observation(result)) == {
        "fault_type": "D1_transient_execution_error",
        "retry_safety": "maybe_executed",
        "side_effect_status": "unknown",
        "repair_action": "backoff_retry",
        "max_retry": 2,
        "attempts": ["D1_transient_execution_error"] * 2,
    }
    assert up.count("search") == 2
    assert recorder.delays == full_jitter(0.1)


def bare_internal_error(args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(types.INTERNAL_ERROR, "Internal error")


def sql_syntax_error(args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(types.INTERNAL_ERROR, 'ERROR: syntax error at or near "selec" (SQLSTATE 42601)')


async def test_a_read_failing_with_a_bare_internal_error_is_unrecognised_and_never_repeated_by_the_proxy() -> None:
    """Issue 19: a bare -32603 is no evidence of a transient fault. Even on a read_only tool (where rule R would allow
    a repeat) the retry stage does not repeat a fault the rules did not recognise, and the model is told so."""
    up = shop(search=bare_internal_error)
    recorder = SleepRecorder()
    async with over_link(up, {"search": rule("read_only")}, recorder) as (h, _):
        result = await call(h, "search", {"q": "x"})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "D4_permanent_execution_error",
        "retry_safety": "maybe_executed",
        "side_effect_status": "unknown",
        "repair_action": "switch_tool",
        "max_retry": 0,
        "attempts": ["D4_permanent_execution_error"],
    }
    assert obs["is_transient"] is False and obs["details"]["basis"] == "unrecognised"
    assert "unrecognised" in obs["suggestion"] and obs["upstream_message"]["text"] == "Internal error"
    assert up.count("search") == 1
    assert recorder.delays == []


async def test_a_read_failing_with_an_sql_syntax_error_as_internal_error_is_a_wrong_argument_sent_once() -> None:
    up = shop(search=sql_syntax_error)
    recorder = SleepRecorder()
    async with over_link(up, {"search": rule("read_only")}, recorder) as (h, _):
        result = await call(h, "search", {"q": "selec"})
    obs = observation(result)
    assert (obs["fault_type"], obs["repair_action"], obs["is_transient"]) == (
        "B4_semantic_argument_rejection",
        "fix_parameter",
        False,
    )
    assert obs["details"]["basis"] == "standard_code" and obs["details"]["vocabulary"] == "sqlstate"
    assert up.count("search") == 1 and recorder.delays == []


# --- D2 rate_limited ------------------------------------------------------------------------------------------------


async def test_a_write_a_trusted_upstream_rate_limits_with_retry_after_one_second_waits_then_succeeds() -> None:
    limited = error_text("slow down", {"type": "rate_limited", "retry_after_ms": 1000})
    up = shop(create_order=ScriptedUpstream.sequence(lambda a: limited, lambda a: ok_text("created")))
    recorder = SleepRecorder()
    async with over_link(up, {"create_order": rule("write_unsafe")}, recorder, trusted=True) as (h, _):
        result = await call(h, "create_order", {"sku": "S"})
    no_fault(result)
    assert recorder.delays == [1.0], "Retry-After (1 s) is longer than the jitter (at most 0.1 s): it is the wait"
    assert up.count("create_order") == 2
    assert attempt_outcomes(result) == ["D2_rate_limited", "ok"]


def _retry_at(obs: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(obs["details"]["retry_at"])


async def test_a_rate_limit_asking_for_a_day_is_not_waited_for_and_reports_when_it_resets() -> None:
    """A Retry-After of one hour or more is a quota (F3 by error_results.QUOTA_RETRY_AFTER_MS), not a rate limit."""
    day_ms = 86_400_000
    up = shop(search=lambda args: error_text("daily limit", {"type": "rate_limited", "retry_after_ms": day_ms}))
    recorder = SleepRecorder()
    async with over_link(up, {"search": rule("read_only")}, recorder) as (h, _):
        result = await call(h, "search", {"q": "x"})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "F3_quota_exhausted",
        "retry_safety": "rejected",
        "side_effect_status": "none",
        "repair_action": "degrade",
        "max_retry": 0,
        "attempts": ["F3_quota_exhausted"],
    }
    assert obs["retry_after_ms"] == day_ms
    assert abs(_retry_at(obs) - (datetime.now(UTC) + timedelta(days=1))) < timedelta(minutes=1)
    assert recorder.delays == []
    assert up.count("search") == 1


async def test_a_rate_limit_longer_than_the_wait_cap_is_surfaced_with_its_reset_time_without_waiting() -> None:
    up = shop(search=lambda args: error_text("slow down", {"type": "rate_limited", "retry_after_ms": 60_000}))
    recorder = SleepRecorder()
    async with over_link(up, {"search": rule("read_only")}, recorder) as (h, _):
        result = await call(h, "search", {"q": "x"})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "D2_rate_limited",
        "retry_safety": "rejected",
        "side_effect_status": "none",
        "repair_action": "backoff_retry",
        "max_retry": 1,
        "attempts": ["D2_rate_limited"],
    }
    assert obs["retry_after_ms"] == 60_000 and obs["details"]["retry_stopped"] == "retry_after_over_cap"
    assert abs(_retry_at(obs) - (datetime.now(UTC) + timedelta(minutes=1))) < timedelta(seconds=30)
    assert recorder.delays == []
    assert up.count("search") == 1


async def test_a_write_answered_429_with_retry_after_one_second_waits_that_second_then_succeeds() -> None:
    up = shop(create_order=lambda args: ok_text("created"))
    recorder = SleepRecorder()
    async with over_http(up, {"create_order": rule("write_unsafe")}, recorder) as (h, shim):
        shim.plan = [HttpFault(429, {"Retry-After": "1"})]
        result = await call(h, "create_order", {"sku": "S"})
    no_fault(result)
    assert recorder.delays == [1.0]
    assert (shim.tool_posts, up.count("create_order")) == (2, 1)


# --- D3 slow_success ------------------------------------------------------------------------------------------------


@virtual_time
async def test_a_call_that_succeeds_slowly_within_its_attempt_timeout_passes_through_untouched() -> None:
    async def slow(args: dict[str, Any]) -> types.CallToolResult:
        await anyio.sleep(0.3)  # the injected fault: 0.6 x the attempt timeout
        return ok_text("done")

    up = shop(create_order=slow)
    recorder = SleepRecorder()
    async with over_link(up, {"create_order": rule("write_unsafe", attempt_s=0.5)}, recorder) as (h, _):
        result = await call(h, "create_order", {"sku": "S"})
    no_fault(result)
    assert result.content == [types.TextContent(text="done")] and result.meta is None
    assert up.count("create_order") == 1
    assert recorder.delays == []


async def _progressing_call(tmp_path: Path, extends: bool) -> tuple[types.CallToolResult, list[str]]:
    """The probe server's ``slow`` tool (4 s in 40 steps, progress after each), in memory, under a 2 s attempt
    timeout that progress extends (or not): its result and the probe's events."""
    events = tmp_path / f"events-{extends}"
    server = build_probe_server(Probe(events))
    recorder = SleepRecorder()
    timeouts = {"attempt_s": 2.0, "total_s": 60, "progress_extends": extends}
    policy = {"tools": {"slow": {"effect": "write_unsafe", "timeouts": timeouts}}}
    transports = {"probe": lambda: InMemoryTransport(server)}
    pipeline = recording_pipeline(recorder)
    async with proxy_over({"probe": {"command": "in-memory"}}, policy, transports=transports, pipeline=pipeline) as h:
        with anyio.fail_after(LIMIT_S):
            result = await h.client.call_tool("slow", {"seconds": 4.0, "steps": 40})  # twice the attempt timeout
    assert recorder.delays == []
    return result, [e.split()[0] for e in read_events(events) if e.startswith(("slow", "cancelled"))]


@virtual_time  # each 0.1 s step is exactly 0.1 s: the premise (progress within the 2 s) holds by construction
async def test_a_call_reporting_progress_is_not_timed_out_while_it_keeps_progressing(tmp_path: Path) -> None:
    # Before: a real stdio subprocess reported progress every 0.1 s against a real 2 s timeout, a race a loaded
    # machine could lose. On virtual time the same server code runs in memory, and without the extension the same
    # call times out: the premise is shown, not assumed.
    result, kinds = await _progressing_call(tmp_path, extends=True)
    no_fault(result)
    assert text_of(result) == "slow done"
    assert kinds == ["slow_started", "slow_done"], "one run, never cancelled"
    cut, kinds = await _progressing_call(tmp_path, extends=False)
    assert observation(cut)["fault_type"] == "C3_attempt_timeout"
    assert kinds == ["slow_started", "cancelled"], "without the extension the same call ends at its 2 s"


# --- D4 permanent_execution_error -----------------------------------------------------------------------------------


async def test_a_typed_not_found_error_reaches_the_upstream_once_and_an_identical_repeat_not_at_all() -> None:
    up = shop(get_order=lambda args: error_text("no order 42", {"type": "not_found"}))
    recorder = SleepRecorder()
    async with over_link(up, {"get_order": rule("read_only")}, recorder) as (h, _):
        with anyio.fail_after(LIMIT_S):
            result = await h.client.call_tool("get_order", {"id": 42})
            repeat = await h.client.call_tool("get_order", {"id": 42})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "D4_permanent_execution_error",
        "retry_safety": "executed_failed",
        "side_effect_status": "unknown",
        "repair_action": "switch_tool",
        "max_retry": 0,
        "attempts": ["D4_permanent_execution_error"],
    }
    assert obs["is_transient"] is False and obs["upstream_message"]["text"] == "no order 42"
    repeated = observation(repeat)
    assert (repeated["fault_type"], repeated["repeat_count"], repeated["retry_safety"]) == (
        "D4_permanent_execution_error",
        1,
        "not_sent",
    )
    assert repeated["details"]["short_circuited"] is True
    assert up.count("get_order") == 1, "no proxy retry, and the loop guard answers the identical repeat"
    assert recorder.delays == []


async def test_an_untyped_error_of_a_write_runs_once_and_asks_to_verify_state() -> None:
    up = shop(create_order=lambda args: error_text("the ledger service returned an unexpected answer"))
    recorder = SleepRecorder()
    async with over_link(up, {"create_order": rule("write_unsafe")}, recorder) as (h, _):
        result = await call(h, "create_order", {"sku": "S"})
    assert core(observation(result)) == {
        "fault_type": "D4_permanent_execution_error",
        "retry_safety": "maybe_executed",
        "side_effect_status": "unknown",
        "repair_action": "verify_state",
        "max_retry": 0,
        "attempts": ["D4_permanent_execution_error"],
    }
    assert up.count("create_order") == 1
    assert recorder.delays == []


# --- D5 state_conflict ----------------------------------------------------------------------------------------------


async def test_a_create_that_already_exists_is_never_retried_and_names_the_existing_object() -> None:
    exists = error_text("order exists", {"type": "already_exists", "existing_id": "ord-9"})
    up = shop(create_order=lambda args: exists)
    recorder = SleepRecorder()
    async with over_link(up, {"create_order": rule("write_unsafe")}, recorder) as (h, _):
        result = await call(h, "create_order", {"client_ref": "R1"})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "D5_state_conflict",
        "retry_safety": "executed_failed",
        "side_effect_status": "not_committed",
        "repair_action": "verify_state",
        "max_retry": 0,
        "attempts": ["D5_state_conflict"],
    }
    assert obs["details"]["upstream_error"] == {"existing_id": "ord-9"}
    assert up.count("create_order") == 1
    assert recorder.delays == []


async def test_a_stale_version_conflict_is_not_retried_and_reports_the_current_version() -> None:
    stale = error_text("version mismatch", {"type": "aborted", "current_version": 7})
    up = shop(update_order=lambda args: stale)
    recorder = SleepRecorder()
    async with over_link(up, {"update_order": rule("write_idempotent")}, recorder) as (h, _):
        result = await call(h, "update_order", {"id": 1, "version": 6})
    obs = observation(result)
    assert (obs["fault_type"], obs["repair_action"], obs["max_retry"]) == ("D5_state_conflict", "verify_state", 0)
    assert obs["details"]["upstream_error"] == {"current_version": 7}
    assert up.count("update_order") == 1
    assert recorder.delays == []
