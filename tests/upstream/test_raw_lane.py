"""The raw tools/call lane of a stdio upstream (``resilient_mcp/upstream/rawcall.py``), through ``Upstream`` and a
real subprocess, with the lane on and off (``RESILIENT_MCP_RAW_UPSTREAM_CALLS``): every case must come out the
same both ways. The server is tests/fixtures/raw_lane_server.py (it tells what it received); the Node reference
server (server-everything) checks that real servers take the lane's ids and progress tokens."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from resilient_mcp.faults import Fault, OversizedResult, RetrySafety
from resilient_mcp.faults.stderr_words import STDERR_META_KEY
from resilient_mcp.policy.config import StdioUpstream
from resilient_mcp.upstream import NoHost, Upstream
from resilient_mcp.upstream.errors import Attempt
from resilient_mcp.upstream.rawcall import FIRST_ID, RAW_SWITCH, RawCalls
from tests.helpers import SERVER_EVERYTHING, node_binary, server_everything_missing

SERVER = Path(__file__).resolve().parent.parent / "fixtures" / "raw_lane_server.py"
BOUND_S = 120  # a bound only: every wait below ends on an event


@pytest.fixture(params=["on", "off"])
def lane(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(RAW_SWITCH, request.param)
    return str(request.param)


@asynccontextmanager
async def _upstream(lane: str, **config: Any) -> AsyncIterator[Upstream]:
    cfg = StdioUpstream(command=sys.executable, args=[str(SERVER)], connect_timeout_s=BOUND_S, **config)
    async with Upstream("raw", cfg, NoHost(), backoff_initial_s=0.01).running(BOUND_S) as up:
        yield up
        if lane == "on":
            assert up._raw is not None and up._raw.calls > 0, "the calls took the raw lane"
        else:
            assert up._raw is None


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def _seen(up: Upstream) -> dict[str, Any]:
    seen: dict[str, Any] = json.loads(_text(await up.call_tool("seen", {}, timeout_s=BOUND_S)))
    return seen


@pytest.mark.anyio
async def test_a_call_and_what_the_upstream_received(lane: str) -> None:
    with anyio.fail_after(BOUND_S):
        async with _upstream(lane) as up:
            result = await up.call_tool("echo", {"text": "hé\u2028", "n": None}, {"k": "v", "gone": None}, timeout_s=30)
            assert _text(result) == "hé\u2028" and not result.is_error
            assert (await up.call_tool("tail_id", {}, timeout_s=30)).content[0].text == "tail"  # type: ignore[union-attr]
            call = (await _seen(up))["calls"][0]
    assert call["arguments"] == {"text": "hé\u2028", "n": None}
    # the SDK's own request: the host's _meta without None values, the request's id as its progress token
    assert call["meta"] == {"k": "v", "progressToken": call["id"]}
    assert (call["id"] >= FIRST_ID) is (lane == "on")


@pytest.mark.anyio
async def test_concurrent_calls_each_get_their_own_answer_and_sdk_requests_pass_meanwhile(lane: str) -> None:
    answers: dict[int, str] = {}
    all_in = anyio.Event()

    async def echo(i: int) -> None:
        answers[i] = _text(await up.call_tool("echo", {"text": f"n{i}"}, timeout_s=60))
        if len(answers) == 20:
            all_in.set()

    with anyio.fail_after(BOUND_S):
        async with _upstream(lane) as up, anyio.create_task_group() as tg:
            tg.start_soon(up.call_tool, "hang", {}, None)  # in flight the whole time
            for i in range(20):
                tg.start_soon(echo, i)
            listed = await up.request(types.ListToolsRequest(), types.ListToolsResult)  # the SDK's path
            assert "echo" in {t.name for t in listed.tools}
            await all_in.wait()
            tg.cancel_scope.cancel()
    assert answers == {i: f"n{i}" for i in range(20)}


@pytest.mark.anyio
async def test_an_error_result_and_a_json_rpc_error(lane: str) -> None:
    with anyio.fail_after(BOUND_S):
        async with _upstream(lane) as up:
            failed = await up.call_tool("fail", {}, timeout_s=30)
            assert failed.is_error and _text(failed) == "the tool failed: disk full"
            with pytest.raises(Fault) as caught:
                await up.call_tool("rpc_error", {}, timeout_s=30)
    fault = caught.value
    assert isinstance(fault.__cause__, MCPError) and fault.__cause__.error.code == -32602
    assert fault.__cause__.error.data == {"x": 1}
    assert fault.upstream_message is not None and "bad arguments" in fault.upstream_message


@pytest.mark.anyio
async def test_an_upstream_that_exits_mid_call_fails_the_call_as_died_and_is_restarted(lane: str) -> None:
    with anyio.fail_after(BOUND_S):
        async with _upstream(lane) as up:
            with pytest.raises(Fault) as caught:
                await up.call_tool("exit", {}, timeout_s=60)
            assert await up.call_tool("echo", {"text": "again"}, timeout_s=60)  # the restarted process
    fault = caught.value
    assert fault.retry_safety is RetrySafety.MAYBE_EXECUTED
    assert fault.details.get("upstream_state") == "died", fault.details
    assert isinstance(fault.__cause__, MCPError) and fault.__cause__.error.code == types.CONNECTION_CLOSED


@pytest.mark.anyio
async def test_a_call_cancelled_after_it_was_sent_sends_notifications_cancelled(lane: str) -> None:
    with anyio.fail_after(BOUND_S):
        async with _upstream(lane) as up:
            async with anyio.create_task_group() as tg:
                tg.start_soon(up.call_tool, "hang", {}, None)
                while not any(c["name"] == "hang" for c in (await _seen(up))["calls"]):
                    pass  # each look is a round trip the server answers after the lines before it
                tg.cancel_scope.cancel()
            seen = await _seen(up)  # written after the cancellation: the server read that first
            hang = next(c for c in seen["calls"] if c["name"] == "hang")
            assert seen["cancelled"] == [hang["id"]]
            assert _text(await up.call_tool("echo", {"text": "after"}, timeout_s=30)) == "after"


@pytest.mark.anyio
async def test_a_call_in_flight_when_the_connection_restarts_fails_as_closed_not_died(lane: str) -> None:
    failed: list[BaseException] = []

    async def hang(up: Upstream) -> None:
        try:
            await up.call_tool("hang", {}, None)
        except Fault as exc:
            failed.append(exc)

    with anyio.fail_after(BOUND_S):
        async with _upstream(lane) as up:
            async with anyio.create_task_group() as tg:
                tg.start_soon(hang, up)
                while not any(c["name"] == "hang" for c in (await _seen(up))["calls"]):
                    pass
                up.request_restart()
            assert _text(await up.call_tool("echo", {"text": "new"}, timeout_s=60)) == "new"
    [fault] = failed
    assert isinstance(fault.__cause__, MCPError) and fault.__cause__.error.code == types.CONNECTION_CLOSED
    assert fault.details.get("upstream_state") != "died"


@pytest.mark.anyio
async def test_an_oversized_answer_is_e4_and_the_connection_goes_on(lane: str) -> None:
    with anyio.fail_after(BOUND_S):
        async with _upstream(lane, max_message_bytes=20_000) as up:
            with pytest.raises(OversizedResult) as caught:
                await up.call_tool("big", {"size": 100_000}, timeout_s=60)
            assert _text(await up.call_tool("big", {"size": 1000}, timeout_s=30)) == "x" * 1000
    assert caught.value.details["max_message_bytes"] == 20_000


@pytest.mark.anyio
async def test_progress_of_the_call_reaches_its_callback(lane: str) -> None:
    events: list[tuple[float, float | None, str | None]] = []
    both = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        events.append((progress, total, message))
        if len(events) == 2:
            both.set()

    with anyio.fail_after(BOUND_S):
        async with _upstream(lane) as up:
            result = await up.call_tool("progress", {}, timeout_s=30, on_progress=on_progress)
            assert _text(result) == "done"
            await both.wait()  # the callbacks run in tasks of their own, as the SDK runs them
    assert sorted(events) == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]


class _Logs(NoHost):
    def __init__(self, order: list[str]) -> None:
        super().__init__()
        self.order = order

    async def upstream_log(self, upstream: Any, params: types.LoggingMessageNotificationParams) -> None:
        self.order.append(f"log {params.data}")


@pytest.mark.anyio
async def test_a_log_written_before_the_answer_reaches_the_proxy_before_the_result(lane: str) -> None:
    # The proxy relays an upstream's log to the host of the call in flight; once the call has returned, the log is no
    # longer the call's (conformance "tools-call-with-logging" lost it so through wrap).
    order: list[str] = []
    cfg = StdioUpstream(command=sys.executable, args=[str(SERVER)], connect_timeout_s=BOUND_S)
    with anyio.fail_after(BOUND_S):
        async with Upstream("raw", cfg, _Logs(order)).running(BOUND_S) as up:
            for _ in range(3):
                result = await up.call_tool("logs", {}, timeout_s=60)
                order.append(_text(result))
    assert order == ["log working", "logged"] * 3


@pytest.mark.anyio
async def test_a_wordless_error_gets_the_stderr_words_of_the_call(lane: str) -> None:
    with anyio.fail_after(BOUND_S):
        async with _upstream(lane) as up:
            result = await up.call_tool("wordless", {}, timeout_s=30)
    assert result.is_error
    assert result.meta is not None
    assert result.meta[STDERR_META_KEY] == {"words": "LookupError: No such container: web-9"}


@pytest.mark.anyio
@pytest.mark.skipif(server_everything_missing() is not None, reason=str(server_everything_missing()))
async def test_the_node_reference_server_answers_the_lanes_ids_and_progress_tokens(lane: str) -> None:
    node = node_binary()
    assert node is not None
    cfg = StdioUpstream(command=node, args=[str(SERVER_EVERYTHING), "stdio"], connect_timeout_s=BOUND_S)
    steps: list[float] = []
    done = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)
        if len(steps) == 2:
            done.set()

    with anyio.fail_after(BOUND_S):
        async with Upstream("everything", cfg, NoHost()).running(BOUND_S) as up:
            echoed = await up.call_tool("echo", {"message": "hi"}, timeout_s=60)
            assert "hi" in _text(echoed) and not echoed.is_error
            args = {"duration": 0.02, "steps": 2}
            await up.call_tool("trigger-long-running-operation", args, timeout_s=60, on_progress=on_progress)
            await done.wait()
            assert (up._raw is not None and up._raw.calls == 2) is (lane == "on")
    assert sorted(steps) == [1.0, 2.0]


class _Wire:
    """A wire whose writes fail as a closed pipe's."""

    async def send_line(self, data: bytes) -> None:
        raise anyio.BrokenResourceError

    def spawn(self, fn: Any, *args: Any) -> None:
        raise AssertionError("nothing to spawn")

    def track(self, request_id: int, on: bool) -> None:
        pass


@pytest.mark.anyio
async def test_a_write_that_fails_is_connection_closed_and_not_sent() -> None:
    raw = RawCalls(lambda: None)
    raw.attach(_Wire())
    attempt = Attempt("raw", ended=lambda: False, session_lost=lambda: None)
    with pytest.raises(MCPError) as caught:
        await raw.call_tool("echo", {}, None, attempt, None, "2025-11-25")
    assert caught.value.error.code == types.CONNECTION_CLOSED and attempt.sent is False
    raw.close()
    with pytest.raises(MCPError):
        await raw.call_tool("echo", {}, None, attempt, None, "2025-11-25")
    assert not raw.waiting
