"""The raw tools/call lane of the stdio host (``resilient_mcp.host.toolcall``), through a real ``wrap`` process.

A plain tools/call of an initialized handshake-era host takes the lane (it logs ``tool_call_raw`` at debug level);
every other shape keeps the SDK's path (a progress token, a trace context, a host that declared elicitation or
sampling, a tool whose call may become a task); and the host reads the same answers either way: the same requests
sent to a proxy with the lane turned off (``RESILIENT_MCP_RAW_TOOL_CALLS=off``) get the same answers. Cancellation of
a call on the lane reaches the upstream as on the SDK's path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from resilient_mcp.host.toolcall import RAW_SWITCH
from tests.helpers import (
    JsonRpcPipe,
    await_until,
    child_env,
    logged_request_ids,
    probe_argv,
    proxy_argv,
    read_events,
    running,
    stderr_tail,
)

pytestmark = pytest.mark.anyio

CALL_S = 30.0
LEDGER_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "ledger_server.py"


@contextmanager
def _proxy(
    tmp_path: Path,
    name: str,
    *,
    raw: bool,
    upstream: list[str] | None = None,
    capabilities: dict[str, Any] | None = None,
    policy: str | None = None,
) -> Iterator[tuple[JsonRpcPipe, Path, Path]]:
    """``wrap`` in front of the probe server (or ``upstream``), handshake done (the host declaring ``capabilities``),
    the host's ``notifications/initialized`` handled."""
    err, events = tmp_path / f"{name}.stderr", tmp_path / f"{name}.events"
    env = child_env(state_home=tmp_path / f"{name}-state", **{RAW_SWITCH: "on" if raw else "off"})
    options = []
    if policy is not None:
        (tmp_path / f"{name}.yaml").write_text(policy)
        options = ["--policy", str(tmp_path / f"{name}.yaml")]
    argv = proxy_argv("--log-level", "debug", "wrap", *options, "--", *(upstream or probe_argv(events=events)))
    with running(argv, err, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as process:
        pipe = JsonRpcPipe(process, err)
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities or {},
            "clientInfo": {"name": "t", "version": "0"},
        }
        assert "result" in pipe.request("initialize", hello, timeout=60), stderr_tail(err)
        pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # the SDK handles the notification in a task spawned before this request's: answered, the lane knows
        assert "result" in pipe.request("ping"), stderr_tail(err)
        yield pipe, err, events


def _raw_ids(err: Path) -> list[Any]:
    """The request ids the lane ran (its ``tool_call_raw`` debug lines)."""
    return logged_request_ids(err, "tool_call_raw")


def _ask(pipe: JsonRpcPipe, message: dict[str, Any]) -> dict[str, Any]:
    """Send ``message``; its answer (other traffic skipped)."""
    pipe.send(message)
    while True:
        reply = pipe.receive(CALL_S)
        if reply.get("id") == message["id"] and "method" not in reply:
            return reply


_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SHAPES: list[dict[str, Any]] = [
    # the lane's: a plain call, with a string id, with null arguments, with the host's _meta
    {"id": 11, "params": {"name": "echo", "arguments": {"text": "plain"}}},
    {"id": "s-12", "params": {"name": "echo", "arguments": {"text": "string id"}}},
    {"id": 14, "params": {"name": "nope", "arguments": None}},
    {"id": 15, "params": {"name": "echo", "arguments": {"text": 5}, "_meta": {"trace": "t"}}},
    # the SDK's: a progress token, a trace context, extra keys, the 2026-07-28 envelope, malformed shapes, a token
    # the SDK cannot read
    {"id": 13, "params": {"name": "echo", "arguments": {"text": "token"}, "_meta": {"progressToken": "p13"}}},
    {"id": 16, "params": {"name": "echo", "arguments": {"text": "t"}, "_meta": {"traceparent": _TRACEPARENT}}},
    {"id": 21, "params": {"name": "echo", "arguments": {"text": "x"}, "task": {"ttl": 1000}}},
    {"id": 22, "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": {"io.modelcontextprotocol/x": 1}}},
    {"id": 23, "params": {"name": "echo", "arguments": [1]}},
    {"id": 24, "params": {"name": 3}},
    {"id": 25, "params": {"name": "echo", "_meta": {"progressToken": [1]}}},
    {"id": 26, "params": {"name": "echo", "arguments": {"text": "x"}}, "extra": True},
    {"id": 27},
]
LANE_IDS = [11, "s-12", 14, 15]


def _answers(tmp_path: Path, *, raw: bool) -> tuple[list[dict[str, Any]], list[Any]]:
    with _proxy(tmp_path, "raw" if raw else "sdk", raw=raw) as (pipe, err, _):
        answers = [_ask(pipe, {"jsonrpc": "2.0", "method": "tools/call", **shape}) for shape in SHAPES]
        return answers, _raw_ids(err)


def test_plain_calls_take_the_raw_lane_other_shapes_fall_back_and_the_host_reads_the_same_answers(
    tmp_path: Path,
) -> None:
    raw_answers, raw_ids = _answers(tmp_path, raw=True)
    sdk_answers, sdk_ids = _answers(tmp_path, raw=False)
    assert raw_ids == LANE_IDS, "every plain call and nothing else took the lane"
    assert sdk_ids == [], "with the lane off every call took the SDK's path"
    assert raw_answers == sdk_answers
    by_id = {a["id"]: a for a in raw_answers}
    assert by_id[11]["result"]["content"] == [{"type": "text", "text": "plain"}]
    assert "error" in by_id[14], by_id[14]  # an unknown tool: the proxy's error, on either path
    assert by_id[15]["result"]["isError"] is True  # arguments the schema refuses: validated on the lane too
    assert "error" in by_id[23] and "error" in by_id[24]  # refused by the SDK exactly as before


async def test_a_call_with_a_progress_token_keeps_the_sdk_path_and_one_on_the_lane_is_cancelled_by_the_host(
    tmp_path: Path,
) -> None:
    with _proxy(tmp_path, "cancel", raw=True) as (pipe, err, events):
        pipe.send(
            {
                "jsonrpc": "2.0",
                "id": 31,
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 1, "steps": 2}, "_meta": {"progressToken": "t"}},
            }
        )
        progress, answer = [], None
        while answer is None:
            reply = pipe.receive(CALL_S)
            if reply.get("method") == "notifications/progress":
                progress.append(reply["params"])
            elif reply.get("id") == 31:
                answer = reply
        assert [p["progressToken"] for p in progress] == ["t", "t"]
        assert [p["progress"] for p in progress] == [1, 2]
        assert answer["result"]["content"] == [{"type": "text", "text": "slow done"}]

        params = {"name": "slow", "arguments": {"seconds": 60, "steps": 1}}
        pipe.send({"jsonrpc": "2.0", "id": 32, "method": "tools/call", "params": params})
        started = lambda: sum(e.startswith("slow_started") for e in read_events(events)) == 2  # noqa: E731
        await await_until(started, CALL_S, "the second slow call upstream")
        pipe.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 32}})
        await await_until(lambda: any(e.startswith("cancelled") for e in read_events(events)), CALL_S, "the cancel")
        pipe.send({"jsonrpc": "2.0", "id": 33, "method": "ping"})
        seen = [pipe.receive(CALL_S)]
        while seen[-1].get("id") != 33:
            seen.append(pipe.receive(CALL_S))
        assert all(m.get("id") != 32 for m in seen), "a call the host cancelled is never answered"
        assert _raw_ids(err) == [32], "the call with a progress token took the SDK's path"


def test_a_host_that_declared_elicitation_or_sampling_keeps_the_sdk_path(tmp_path: Path) -> None:
    for capability in ("elicitation", "sampling"):
        with _proxy(tmp_path, capability, raw=True, capabilities={capability: {}}) as (pipe, err, _):
            params = {"name": "echo", "arguments": {"text": capability}}
            answer = _ask(pipe, {"jsonrpc": "2.0", "id": 51, "method": "tools/call", "params": params})
            assert answer["result"]["content"] == [{"type": "text", "text": capability}]
            assert _raw_ids(err) == [], f"a host that declared {capability}: the SDK's path"


def test_a_tool_whose_call_may_become_a_task_keeps_the_sdk_path(tmp_path: Path) -> None:
    policy = "version: 1\ntools:\n  slow: {effect: read_only, timeouts: {total_s: 120}, task: {handoff_s: 60}}\n"
    with _proxy(tmp_path, "handoff", raw=True, policy=policy) as (pipe, err, _):
        for rid, name, arguments in [(61, "slow", {"seconds": 0, "steps": 1}), (62, "echo", {"text": "e"})]:
            answer = _ask(
                pipe,
                {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}},
            )
            assert "result" in answer, answer
        assert _raw_ids(err) == [62], "slow may be handed off as a task: the SDK's path; echo: the lane"


async def test_a_cancel_applies_before_the_next_line_so_an_identical_write_right_after_it_is_held(
    tmp_path: Path,
) -> None:
    # The SDK's dispatcher applies a notifications/cancelled before it dispatches the next message; the lane must
    # not let the next call overtake the cancel (it did while the cancel travelled the SDK's hops).
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    upstream = [sys.executable, str(LEDGER_SERVER), "--ledger", str(ledger)]
    with _proxy(tmp_path, "order", raw=True, upstream=upstream) as (pipe, _, _):
        params = {"name": "append", "arguments": {"entry": "pay invoice 7", "gate": str(gate)}}
        pipe.send({"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": params})
        written = lambda: ledger.read_text().splitlines() if ledger.exists() else []  # noqa: E731
        await await_until(written, CALL_S, "the write to reach the upstream")  # its answer waits for the gate
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}
        again = {"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": params}
        assert pipe.process.stdin is not None
        pipe.process.stdin.write(json.dumps(cancel).encode() + b"\n" + json.dumps(again).encode() + b"\n")
        pipe.process.stdin.flush()  # one write: the proxy reads both lines at once
        answer = pipe.receive(CALL_S)
        while answer.get("id") != 42:
            answer = pipe.receive(CALL_S)
        observation = answer["result"]["structuredContent"]
        assert observation["repair_action"] == "verify_state", observation
        assert written() == ["pay invoice 7"], "the identical write was held, not sent"


WORDLESS_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "wordless_server.py"


@pytest.mark.parametrize("raw", [True, False], ids=["lane", "sdk-path"])
def test_a_wordless_crash_on_the_lane_is_read_from_the_upstreams_stderr_as_on_the_sdk_path(
    tmp_path: Path, raw: bool
) -> None:
    """The lane runs the same chain down to ``Upstream.call_tool``, so a wordless ``Error executing tool lookup`` is
    still paired with the exception the stdio upstream wrote on its stderr during the call (issue 19): the
    observation the host reads quotes those words, not "Error executing tool"."""
    upstream = [sys.executable, str(WORDLESS_SERVER)]
    with _proxy(tmp_path, "lane" if raw else "sdk", raw=raw, upstream=upstream) as (pipe, err, _):
        call = {"name": "lookup", "arguments": {"name": "web-9"}}
        answer = _ask(pipe, {"jsonrpc": "2.0", "id": 31, "method": "tools/call", "params": call})
        assert _raw_ids(err) == ([31] if raw else []), stderr_tail(err)
    result = answer["result"]
    assert result["isError"] is True, answer
    fault = result["_meta"]["io.github.resilient-mcp/fault"]
    assert fault["fault_type"] == "D4_permanent_execution_error" and fault["is_transient"] is False, fault
    assert fault["details"]["words_from"] == "stderr", fault
    assert fault["details"]["stderr_words"] == "LookupError: No such container: web-9", fault
    assert "No such container: web-9" in fault["upstream_message"]["text"], fault


CONFORMANCE_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_server.py"


def test_what_the_upstream_sends_the_host_during_a_call_on_the_lane_reaches_it(tmp_path: Path) -> None:
    """The lane's calls share one session over the connection's channel: a roots/list the upstream asks mid-call is
    relayed to the host (who declared roots) and answered, and the upstream's log lines reach the host before the
    result, as on the SDK's path."""
    upstream = [sys.executable, str(CONFORMANCE_SERVER), "--stdio"]
    with _proxy(tmp_path, "relay", raw=True, upstream=upstream, capabilities={"roots": {}}) as (pipe, err, _):
        call = {"jsonrpc": "2.0", "id": 31, "method": "tools/call"}
        pipe.send({**call, "params": {"name": "test_input_required_result_list_roots", "arguments": {}}})
        asked = pipe.receive(CALL_S)
        while asked.get("method") != "roots/list":
            asked = pipe.receive(CALL_S)
        pipe.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": [{"uri": "file:///lane", "name": "l"}]}})
        reply = pipe.receive(CALL_S)
        while reply.get("id") != 31:
            reply = pipe.receive(CALL_S)
        assert "file:///lane" in json.dumps(reply["result"]), reply
        pipe.send({**call, "id": 32, "params": {"name": "test_tool_with_logging", "arguments": {}}})
        logged = []
        reply = pipe.receive(CALL_S)
        while reply.get("id") != 32:
            logged += [reply["params"]["data"]] if reply.get("method") == "notifications/message" else []
            reply = pipe.receive(CALL_S)
        assert "Tool execution completed" in logged, (logged, reply)
        assert not reply["result"].get("isError"), reply
        assert _raw_ids(err) == [31, 32], stderr_tail(err)
